"""URL flags checked before anything is opened (issue 28, part 5): a URL of a scheme no part of the product serves is
refused in one line naming the flag and the value (its password masked), exit 2, instead of being taken for a
missing file."""

from __future__ import annotations

import pytest

from cli_helpers import run


@pytest.mark.parametrize(
    "args, line",
    [
        (("tools", "--db", "sqlite:///tmp/x.db"), "tracefence tools: --db: sqlite:///tmp/x.db: a sqlite:// URL is not a review store this version serves: give a SQLite file path or a postgresql:// URL (for SQLite, give the file's path itself, not a sqlite:// URL)"),
        (("review", "--db", "mysql://u:secret@db/queue", "list"), "tracefence review: --db: mysql://u:***@db/queue: a mysql:// URL is not a review store this version serves: give a SQLite file path or a postgresql:// URL"),
        (("ui", "--db", "MySQL://db/queue"), "tracefence ui: --db: MySQL://db/queue: a mysql:// URL is not a review store this version serves: give a SQLite file path or a postgresql:// URL"),
        (("serve", "--review-db", "redis://cache:6379"), "tracefence serve: --db: redis://cache:6379: a redis:// URL is not a review store this version serves: give a SQLite file path or a postgresql:// URL"),
        (("serve", "--upstream", "ftp://collector:4317"), "tracefence serve: --upstream: 'ftp://collector:4317': expected host:port, http(s)://host:port, or (for http/protobuf) an http(s):// URL"),
        (("ui", "--trace-url-template", "ftp://jaeger/trace/{trace_id}"), "tracefence ui: --trace-url-template: 'ftp://jaeger/trace/{trace_id}': a trace URL template must start with http:// or https://"),
    ],
    ids=["tools-sqlite-url", "review-mysql-password-masked", "ui-scheme-any-case", "serve-review-db-alias", "serve-upstream", "ui-trace-link"],
)
def test_a_url_no_part_serves_is_refused_naming_flag_and_value(args, line):
    proc = run(*args)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == line + "\n"


def test_a_postgres_url_and_a_path_pass_the_check(tmp_path):
    """A path (even one with a colon) is no URL; a postgresql:// URL is the store's: the check lets both through."""
    proc = run("tools", "--db", str(tmp_path / "a:b.db"))
    assert proc.returncode == 2
    assert proc.stderr == f"tracefence tools: {tmp_path / 'a:b.db'}: no review database there\n"
