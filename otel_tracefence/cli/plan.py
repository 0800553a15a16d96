"""``tracefence plan FILE...``: plan the traces in each file (``-``: standard input; gzip read as such) and print them.

Each file is planned alone, in the order given, and the plans are printed in that order; a file that cannot be
read or is rejected rejects the run (exit 2, nothing printed on standard output), each such file named with its
reason. A trace split across two files is planned in each as the part it has there (partial: a span names a parent
the file lacks); ``cat`` the files into one to plan it whole (docs/DECISIONS.md 655)."""

from __future__ import annotations

import argparse
import sys

from otel_tracefence.cli import table
from otel_tracefence.cli.inputs import STDIN, read_input
from otel_tracefence.cli.plan_common import EXIT_FAIL_ON, EXIT_OK, EXIT_REJECTED, fail_on_line, meets_fail_on, reading_progress, terminal_progress
from otel_tracefence.cli.plan_common import say as _say
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import ReplayClass, TracePlan
from otel_tracefence.pipeline.documents import plan_document
from otel_tracefence.pipeline.write_index import MemoryWriteIndex
from otel_tracefence.readers.detect import FORMATS
from otel_tracefence.readers.errors import UnreadableInput, decode_text_file


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan the traces in one or more files",
        description="Plan every trace in each FILE (OTLP/JSON, JSON rows, NDJSON rows or CSV rows; - for standard input; "
        "gzip-compressed files, such as *.gz, are decompressed), each file alone, in the order given; "
        "a file of plans this command wrote (--format json, either schema) is read back as written, each class checked against its own steps (never safer than they plan). "
        "Exit 0 on success, 1 when --fail-on is met, 2 when the input is rejected.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="input files (plain or gzip), or - for standard input")
    parser.add_argument("--input-format", choices=("auto", *FORMATS), default="auto", help="input format (default: auto-detect)")
    parser.add_argument("--format", choices=("json", "table"), default="json", help="json: one TracePlan per line (enum values as words: review, skip; plan JSON schema 2); table: for people")
    parser.add_argument("--fail-on", choices=[c.value for c in ReplayClass if c is not ReplayClass.DYNAMIC], help="exit 1 when any trace's class is at or past this one, or any trace is partial (steps may be missing)")
    parser.add_argument(
        "--on-malformed",
        choices=("reject", "review"),
        default=None,
        help="review (default for OTLP/JSON): plan a span that cannot be read whole as a review step, as the processor "
        "and the service do, with a warning naming it; reject (default for rows): exit 2 naming each bad row or span",
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help="for OTLP/JSON lines whose traces each sit whole on consecutive lines (as serve's output file and the SDK's "
        "file exporters write them): print each trace's plan as soon as the next trace begins, holding one trace at a time; "
        "a trace that comes again later is refused (exit 2)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, config: TraceFenceConfig) -> int:
    if args.files.count(STDIN) > 1:
        _say(STDIN, "standard input given more than once: it can be read once; nothing was planned")
        return EXIT_REJECTED
    if args.stream:
        from otel_tracefence.cli.plan_stream import run_stream

        return run_stream(args, config)
    planned: list[tuple[str, TracePlan]] = []
    json_parts: list[str] = []
    rejected = False
    index = MemoryWriteIndex(config.write_index_max_entries)  # one for the run: a retry in a later file meets its first try (996)
    for path in args.files:
        try:
            with reading_progress(path) as bar:
                data = read_input(path, config.limits.max_input_bytes, progress=bar.update if bar is not None else None)
            text = decode_text_file(data)
            with reading_progress(path, len(text), "reading spans of") as bar:
                outcome = plan_document(text, args.input_format, config, on_malformed=args.on_malformed, progress=terminal_progress,
                                        reading=bar.update if bar is not None else None, index=index)  # fmt: skip
        except UnreadableInput as exc:
            _say(path, f"{exc}; nothing was planned")
            rejected = True
            continue
        except OSError as exc:
            _say(path, f"{exc.strerror or exc}; nothing was planned")
            rejected = True
            continue
        for message in outcome.messages:
            _say(path, message)
        rejected = rejected or outcome.rejected
        planned.extend((path, plan) for plan in outcome.plans)
        json_parts.append(outcome.json_lines())
    if rejected:
        if len(args.files) > 1:
            print("tracefence plan: a file was rejected: nothing was printed", file=sys.stderr)
        return EXIT_REJECTED
    if args.fail_on and not planned:
        # A gate that passes on nothing fails open: an empty export is an input to fix (docs/DECISIONS.md 206).
        _say(", ".join(args.files), f"--fail-on {args.fail_on}: nothing to check, so the gate does not pass; nothing was planned")
        return EXIT_REJECTED
    if args.format == "json":
        sys.stdout.write("".join(json_parts))
    else:
        print(table.render([plan for _, plan in planned]))
    if args.fail_on:
        met = [(path, plan) for path, plan in planned if meets_fail_on(plan, args.fail_on)]
        for path, plan in met:
            _say(path, fail_on_line(plan, args.fail_on))
        if met:
            return EXIT_FAIL_ON
    return EXIT_OK
