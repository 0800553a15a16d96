"""The ``tracefence`` command line.

:func:`main` builds a parser that lists the commands without importing them: a command's module
(``otel_tracefence.cli.plan`` ...) is imported, and its options added, only when that command is chosen
(:class:`LazyCommands`), so ``tracefence --help`` starts as fast as Python does. :func:`build_parser` builds the
whole parser, every command imported (the shell completion scripts are generated from it)."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any, Sequence

# Nothing of the engine, pydantic or the review package is imported here: ``tracefence --help`` builds the command
# list from COMMANDS alone, and a command's module is imported when it is chosen (docs/decisions/operations.md 890).


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


#: The commands, in the order ``tracefence --help`` lists them: name -> (the module that adds its parser with
#: ``add_parser(subparsers)`` and runs it, its one-line help as that module gives it; tests/cli/test_cli_startup.py).
COMMANDS = {
    "plan": ("otel_tracefence.cli.plan", "plan the traces in one or more files"),
    "review": ("otel_tracefence.cli.review", "list, show and resolve the traces held for review"),
    "reconcile": ("otel_tracefence.cli.reconcile", "ask the reconcilers whether held writes took effect, and record their verdicts"),
    "serve": ("otel_tracefence.cli.serve", "run the OTLP service (gRPC and HTTP) beside or behind the OpenTelemetry Collector"),
    "tools": ("otel_tracefence.cli.tools", "list the tools the traces show: calls, effect and its source, statuses, steps held"),
    "ui": ("otel_tracefence.cli.ui", "serve the review page and the trace inspector"),
    "completion": ("otel_tracefence.cli.completion", "print the shell completion script (bash, zsh or tcsh)"),
}


class CommandImportError(Exception):
    """A chosen command's module could not be imported (``cause``: the ``ModuleNotFoundError``)."""

    def __init__(self, command: str, cause: ModuleNotFoundError) -> None:
        super().__init__(command)
        self.command, self.cause = command, cause


class LazyCommands(argparse._SubParsersAction):
    """The subcommands, each a placeholder parser (its name and help) until it is chosen: then its module is imported,
    its own parser replaces the placeholder, and parsing goes on in it. Raises :class:`CommandImportError` when the
    module cannot be imported (an extra not installed)."""

    loaded: frozenset[str] = frozenset()  # the commands whose module is imported
    chosen = ""  # the command chosen, once parsing reaches it

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        name = values[0]
        if name in COMMANDS:
            self.chosen = name
            if name not in self.loaded:
                self.load(name)
        super().__call__(parser, namespace, values, option_string)

    def load(self, name: str) -> None:
        """Import command ``name``'s module and put its parser, with the global options, in place of the placeholder."""
        try:
            module = importlib.import_module(COMMANDS[name][0])
        except ModuleNotFoundError as exc:
            raise CommandImportError(name, exc) from exc
        del self._name_parser_map[name]
        self._choices_actions = [action for action in self._choices_actions if action.dest != name]
        module.add_parser(self)
        self.loaded = self.loaded | {name}
        sub = self._name_parser_map[name]
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


def build_parser(lazy: bool = False) -> argparse.ArgumentParser:
    """The ``tracefence`` parser: every command's module imported and its options added, or with ``lazy`` each
    command a placeholder until it is chosen (:class:`LazyCommands`; what :func:`main` uses)."""
    parser = argparse.ArgumentParser(prog="tracefence", description="Tell which agent traces are safe to replay or retry.")
    parser.add_argument("--version", action=_VersionAction, help="show the version and the engine (compiled or python), and exit")
    _global_options(parser, None)
    parser.set_defaults(log_level=None)  # each command's own default: WARNING, INFO for serve
    subparsers = parser.add_subparsers(dest="command", required=True, action=LazyCommands if lazy else argparse._SubParsersAction)
    for name, (module_name, help_line) in COMMANDS.items():
        if lazy:
            subparsers.add_parser(name, help=help_line)
        else:
            importlib.import_module(module_name).add_parser(subparsers)
    if not lazy:
        _everywhere(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (2 for usage, config and input errors; 130 for Ctrl-C)."""
    parser = build_parser(lazy=True)
    try:
        return _run(parser.parse_args(argv))
    except CommandImportError as exc:
        return _missing_module(exc.command, exc.cause)
    except KeyboardInterrupt:  # Ctrl-C, while a command runs or loads: one line and the shell's code for SIGINT, never a traceback
        command = next((f" {action.chosen}" for action in parser._actions if isinstance(action, LazyCommands) and action.chosen), "")
        print(f"tracefence{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    import logging

    from otel_tracefence.cli.inputs import bad_url_flag
    from otel_tracefence.core.config import ConfigError, load_config
    from otel_tracefence.readers.errors import UnreadableInput

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
    except BrokenPipeError:  # the reader went away (| head): not an error of ours
        sys.stderr.close()
        return 0
    except ModuleNotFoundError as exc:
        return _missing_module(args.command, exc)
    except OSError as exc:
        print(f"tracefence {args.command}: {exc}", file=sys.stderr)
        return 2


def _missing_module(command: str, exc: ModuleNotFoundError) -> int:
    """Exit 2 naming the extra that brings the missing module; re-raises ``exc`` when no extra does."""
    extra = missing_extra(command, exc.name or "")
    if extra is None:
        raise exc
    module = (exc.name or "").partition(".")[0]
    print(f"tracefence {command}: needs the [{extra}] extra ({module} is not installed): pip install 'otel-tracefence[{extra}]'", file=sys.stderr)
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
