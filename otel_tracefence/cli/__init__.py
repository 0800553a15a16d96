"""The ``tracefence`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from otel_tracefence.core.config import ConfigError, load_config
from otel_tracefence.readers.errors import UnreadableInput
from otel_tracefence.cli import completion, plan, reconcile, review, serve, tools, ui
from otel_tracefence.cli.inputs import bad_url_flag


#: The top-level modules only an extra installs (pyproject.toml, [project.optional-dependencies]) -> the extras that
#: bring them; a command names its own extra when it is one of them (``tracefence ui`` without Starlette: ``[ui]``).
EXTRA_MODULES = {
    "starlette": ("serve", "ui"), "uvicorn": ("serve", "ui"), "h11": ("serve", "ui"), "anyio": ("serve", "ui"),
    "grpc_health": ("serve",), "grpc_status": ("serve",),
    "jinja2": ("ui",), "multipart": ("ui",), "python_multipart": ("ui",),
    "psycopg": ("postgres",), "psycopg_pool": ("postgres",),
}

COMMAND_EXTRAS = {"serve": "serve", "ui": "ui"}

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


class _VersionAction(argparse.Action):
    """``--version``: the installed version and which engine runs (``compiled`` or ``python``, see
    :func:`otel_tracefence.engine`), on standard output, then exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, default: object = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object, option_string: str | None = None) -> None:
        from otel_tracefence import __version__, engine

        print(f"tracefence {__version__} ({engine()} engine)")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracefence", description="Tell which agent traces are safe to replay or retry.")
    parser.add_argument("--version", action=_VersionAction, help="show the version and the engine (compiled or python), and exit")
    _global_options(parser, None)
    parser.set_defaults(log_level=None)  # each command's own default: WARNING, INFO for serve
    subparsers = parser.add_subparsers(dest="command", required=True)
    plan.add_parser(subparsers)
    review.add_parser(subparsers)
    reconcile.add_parser(subparsers)
    serve.add_parser(subparsers)
    tools.add_parser(subparsers)
    ui.add_parser(subparsers)
    completion.add_parser(subparsers, parser)
    _everywhere(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (2 for usage, config and input errors)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    bad_url = bad_url_flag(args)
    if bad_url is not None:
        print(f"tracefence {args.command}: {bad_url}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level or "WARNING", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config)
        return args.run(args, config)
    except ConfigError as exc:
        print(f"tracefence: {exc}", file=sys.stderr)
        return 2
    except UnreadableInput as exc:
        where = f"{args.file}: " if getattr(args, "file", None) else ""
        print(f"tracefence {args.command}: {where}{exc}; nothing was planned", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's code for SIGINT, never a traceback
        print(f"tracefence {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (| head): not an error of ours
        sys.stderr.close()
        return 0
    except ModuleNotFoundError as exc:
        extra = missing_extra(args.command, exc.name or "")
        if extra is None:
            raise
        module = (exc.name or "").partition(".")[0]
        print(f"tracefence {args.command}: needs the [{extra}] extra ({module} is not installed): pip install 'otel-tracefence[{extra}]'", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"tracefence {args.command}: {exc}", file=sys.stderr)
        return 2


def missing_extra(command: str, module: str) -> str | None:
    """The extra to install for ``command`` when ``module`` (a missing module's dotted name) is not installed, or
    None when no extra brings it (a broken install: the traceback stays)."""
    extras = EXTRA_MODULES.get(module.partition(".")[0])
    if extras is None:
        return None
    own = COMMAND_EXTRAS.get(command)
    return own if own in extras else extras[0]


if __name__ == "__main__":
    sys.exit(main())
