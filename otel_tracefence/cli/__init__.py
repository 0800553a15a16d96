"""The ``tracefence`` command line."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys
from typing import Sequence

from otel_tracefence.core.config import ConfigError, load_config
from otel_tracefence.readers.errors import UnreadableInput
from otel_tracefence.cli import plan, review, serve, tools, ui


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command Ctrl-C stopped


def _global_options(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--config", default=default, help="YAML config file (default: $OTEL_TRACEFENCE_CONFIG)")
    parser.add_argument("--log-level", default=default, type=str.upper, choices=LOG_LEVELS, help="logging level (default: WARNING; INFO for serve)")


def _everywhere(parser: argparse.ArgumentParser) -> None:
    """Accept the global options after any subcommand too (``tracefence plan f.csv --config c.yaml``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _global_options(sub, argparse.SUPPRESS)
                _everywhere(sub)


def version() -> str:
    """The installed distribution's version (``otel-tracefence``), or ``unknown`` when it is not installed."""
    try:
        return importlib.metadata.version("otel-tracefence")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``: the installed version and which engine runs (``compiled`` or ``python``, see
    :func:`otel_tracefence.engine`), on standard output, then exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, default: object = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object, option_string: str | None = None) -> None:
        from otel_tracefence import engine

        print(f"tracefence {version()} ({engine()} engine)")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracefence", description="Tell which agent traces are safe to replay or retry.")
    parser.add_argument("--version", action=_VersionAction, help="show the version and the engine (compiled or python), and exit")
    _global_options(parser, None)
    parser.set_defaults(log_level=None)  # each command's own default: WARNING, INFO for serve
    subparsers = parser.add_subparsers(dest="command", required=True)
    plan.add_parser(subparsers)
    review.add_parser(subparsers)
    serve.add_parser(subparsers)
    tools.add_parser(subparsers)
    ui.add_parser(subparsers)
    _everywhere(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (2 for usage, config and input errors)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level or "WARNING", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config)
        return args.run(args, config)
    except ConfigError as exc:
        print(f"tracefence: {exc}", file=sys.stderr)
        return 2
    except UnreadableInput as exc:
        print(f"tracefence {args.command}: {getattr(args, 'file', '')}: {exc}; nothing was planned", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's code for SIGINT, never a traceback
        print(f"tracefence {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (| head): not an error of ours
        sys.stderr.close()
        return 0
    except OSError as exc:
        print(f"tracefence {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
