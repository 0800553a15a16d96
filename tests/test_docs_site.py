"""The docs: the site builds from ``docs/`` with ``mkdocs build --strict`` (a broken link, a missing anchor or a
page outside the nav fails), the README stays a front page of at most 300 lines, and every page of ``docs/`` is
reachable from the README by its links. The decision log is filed by topic (``docs/decisions/``): every number it
ever held is on exactly one page, and the index (``docs/DECISIONS.md``) sends each number to that page."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
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
    pages = {page.resolve() for page in (ROOT / "docs").rglob("*.md")}
    assert sorted(p.name for p in pages - seen) == []


# Every number docs/DECISIONS.md held when it was one file in the order of history (s36), before it was filed by
# topic. Numbers were given in blocks; the gaps were never used. A number the code cites must never disappear.
DECISION_NUMBERS_FILED = (
    "1-159,165-168,172-178,180-193,195-210,220-224,235-240,250-259,270-272,285-288,290,295-297,300-306,320-322,"
    "340-348,355-360,370-376,385-389,400-403,420-425,440-444,460,480-486,500-506,510-514,520-527,530-532,540-542,"
    "550-553,560-562,570-573,590-594,600-602,640-642,650-658,660-664,670-674,680-688,690-696"
)
_ANCHOR = re.compile(r'^<a id="item-(\d+)"></a>$', re.MULTILINE)
_UNFILED_ITEM = re.compile(r"^(\d+)\. ", re.MULTILINE)
_INDEX_ROW = re.compile(r"^\| (\d+)(?:-(\d+))? \| \[[^]]+\]\(decisions/([\w-]+)\.md#item-(\d+)\) \|$", re.MULTILINE)


def _numbers(spec: str) -> set[int]:
    numbers: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        numbers.update(range(int(low), int(high or low) + 1))
    return numbers


def _filed() -> dict[int, list[str]]:
    """Each decision number -> the pages holding its item: an anchor on a topic page, or an item appended to the
    index (under "New items not yet filed by topic") and not filed yet."""
    where: dict[int, list[str]] = {}
    for page in sorted((ROOT / "docs" / "decisions").glob("*.md")):
        for number in _ANCHOR.findall(page.read_text(encoding="utf-8")):
            where.setdefault(int(number), []).append(page.stem)
    for number in _UNFILED_ITEM.findall((ROOT / "docs" / "DECISIONS.md").read_text(encoding="utf-8")):
        where.setdefault(int(number), []).append("DECISIONS")
    return where


def test_every_decision_number_is_filed_exactly_once():
    where = _filed()
    assert sorted(_numbers(DECISION_NUMBERS_FILED) - set(where)) == []
    assert {number: pages for number, pages in where.items() if len(pages) > 1} == {}
    counts = Counter(page for pages in where.values() for page in pages)
    assert counts["history"] >= 1 and counts["measurements"] >= 1


def test_the_decision_index_sends_each_number_to_its_page():
    index = (ROOT / "docs" / "DECISIONS.md").read_text(encoding="utf-8")
    assert "\n## New items not yet filed by topic\n" in index
    rows = [(int(low), int(high or low), page, int(first)) for low, high, page, first in _INDEX_ROW.findall(index)]
    assert rows, "the index has no table of numbers"
    for number, pages in _filed().items():
        if pages == ["DECISIONS"]:
            continue
        row_pages = [page for low, high, page, _ in rows if low <= number <= high]
        assert row_pages == pages, f"DECISIONS {number}: the index says {row_pages}, the item is on {pages}"
    assert all(low == first for low, _, _, first in rows)


def test_a_topic_page_states_the_rule_today_first():
    for page in sorted((ROOT / "docs" / "decisions").glob("*.md")):
        if page.stem in ("history", "measurements"):
            continue
        headings = re.findall(r"^## (.+)$", page.read_text(encoding="utf-8"), re.MULTILINE)
        assert headings[:2] == ["The rule today", "The items"], page.name
