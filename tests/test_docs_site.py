"""The docs: the site builds from ``docs/`` with ``mkdocs build --strict`` (a broken link, a missing anchor or a
page outside the nav fails), the README stays a front page of at most 300 lines, and every page of ``docs/`` is
reachable from the README by its links."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

README_MAX_LINES = 300
_LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


def test_the_site_builds_strict(tmp_path):
    mkdocs = Path(sys.executable).with_name("mkdocs")
    proc = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "site" / "DECISIONS" / "index.html").is_file()


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move the detail to a page of docs/"


def _linked(page: Path) -> set[Path]:
    return {(page.parent / target).resolve() for target in _LINK.findall(page.read_text(encoding="utf-8")) if "://" not in target}


def test_every_page_is_reachable_from_the_readme():
    seen: set[Path] = set()
    todo = [(ROOT / "README.md").resolve()]
    while todo:
        page = todo.pop()
        if page in seen or not page.is_file():
            continue
        seen.add(page)
        todo.extend(_linked(page))
    pages = {page.resolve() for page in (ROOT / "docs").glob("*.md")}
    assert sorted(p.name for p in pages - seen) == []
