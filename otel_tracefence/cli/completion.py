"""``tracefence completion bash|zsh|tcsh``: print the shell completion script for every command and option.

Generated from the command line's own parser by shtab (static: nothing of the package runs at each Tab press).
Options and arguments that name a file complete file names; choices complete their values.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

SHELLS = ("bash", "zsh", "tcsh")
#: The ``dest`` of every argument or option that names a file (or a review database file) to read or write.
FILE_DESTS = frozenset({"files", "file", "config", "db", "review_db", "output_file", "ca_file", "worker_of"})


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """The ``completion`` command: its script completes the whole command line (every command imported to build it:
    :func:`otel_tracefence.cli.build_parser`)."""
    parser = subparsers.add_parser(
        "completion",
        help="print the shell completion script (bash, zsh or tcsh)",
        description="Print the completion script for SHELL on standard output, e.g. "
        "`tracefence completion bash > ~/.local/share/bash-completion/completions/tracefence`, or "
        "`eval \"$(tracefence completion bash)\"` in ~/.bashrc. See docs/cli.md.",
    )
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    parser.set_defaults(run=run)


def _mark_files(parser: argparse.ArgumentParser, file_completion: dict) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _mark_files(sub, file_completion)
        elif action.dest in FILE_DESTS:
            action.complete = file_completion  # type: ignore[attr-defined] - shtab reads this attribute


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for ``shell`` of ``parser`` (the whole ``tracefence`` command line)."""
    import shtab

    _mark_files(parser, shtab.FILE)
    return shtab.complete(parser, shell=shell)


def run(args: argparse.Namespace, config: Any) -> int:
    from otel_tracefence.cli import build_parser

    sys.stdout.write(script(build_parser(), args.shell))
    return 0
