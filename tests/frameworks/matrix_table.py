"""The conformance matrix's table types (issue 24, section 3): the scenarios, a framework's record,
the expected cell, and the steps several frameworks share.

``tests/frameworks/conformance.py`` (the in-process frameworks) and each framework under
``tests/frameworks/isolated/`` (its own environment) build their cells from these.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- The scenarios ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    key: str
    what: str


SCENARIOS = [
    Scenario("read_ok", "a read that succeeds"),
    Scenario("write_commits", "a write that commits"),
    Scenario("write_raises", "a write that raises (the run stops, where the framework lets an error through)"),
    Scenario("write_times_out", "a write that times out (the framework's own tool timeout; else a TimeoutError raised in the tool)"),
    Scenario("tool_error_to_model", "a write's failure handed back to the model as the tool's result"),
    Scenario("parallel_one_fails", "two calls requested in one turn, run together, one write failing"),
    Scenario("framework_retries", "a failed write run again (by the framework's retry, else by the agent loop on the model's second request)"),
    Scenario("requested_never_ran", "a write the model requested that never ran (max turns / an interrupt / a cancelled task)"),
    Scenario("approval_interrupt_resume", "a write interrupted for human approval, approved, and resumed"),
    Scenario("mcp_is_error", "an MCP tool answering isError"),
]
SCENARIO_KEYS = [s.key for s in SCENARIOS]


# -- A framework ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Framework:
    key: str
    name: str
    dist: str  # the framework's distribution (its version is read from importlib.metadata)
    instrumentation: str
    instrumentation_dist: str | None  # None: the framework traces itself
    module: str  # what must import for the framework's cells to run (in-process frameworks)
    # "python" or "node": the framework runs in its own cached environment (tests/frameworks/isolated/),
    # its version read from that environment's pins; None: installed in the test environment itself.
    isolated: str | None = None


# -- The expected cells ------------------------------------------------------------------------------------------


Step = tuple  # (tool, decision, reasons): one step of the plan


@dataclass(frozen=True)
class Cell:
    """One framework x scenario: the plan it must get (class and each step), and why, in one line.

    ``wrong_today``: the cell plans otherwise today; names the kind of issue 24 (A-E) and what it plans
    instead (the matrix test marks it ``xfail(strict=True)``: flip it when the kind is fixed).
    ``cannot``: the framework (this version) cannot make the scenario, and why.
    ``doors_differ``: the three doors do not agree on the cell's trace today, and how (the doors test marks it
    ``xfail(strict=True)``: a finding for the package, flipped when the doors agree)."""

    framework: str
    scenario: str
    replay_class: str | None = None
    steps: tuple = ()
    reason: str = ""
    wrong_today: str | None = None
    cannot: str | None = None
    doors_differ: str | None = None


def cell(
    framework: str, scenario: str, replay_class: str | None, steps: tuple, reason: str, wrong_today: str | None = None, doors_differ: str | None = None,
) -> Cell:
    return Cell(framework, scenario, replay_class, tuple(sorted(steps)), reason, wrong_today, doors_differ=doors_differ)


def cannot(framework: str, scenario: str, why: str) -> Cell:
    return Cell(framework, scenario, cannot=why)


NA = "arguments_not_recorded"  # the MCP SDK's spans record no arguments
U = "arguments_unwrapped"  # OpenInference wraps a call's arguments (input.value {"kwargs": ...})
READ_OK = ("lookup_customer", "replay", ("declared_read",))
COMMITTED = ("create_invoice", "skip", ("write_committed",))
RETRIED = (("create_invoice", "review", ("write_error", "repeated_later")), ("create_invoice", "review", ("repeats_earlier_write",)))
NO_MODEL = "the MCP SDK is no agent: there is no model to request, retry or hand an error to"


def oi(step: Step) -> Step:
    """The same step as OpenInference reports it: its arguments were unwrapped."""
    return (step[0], step[1], (*step[2], U))


FINAL = ("final_answer", "replay", ("declared_read", U))  # smolagents ends each run with it (a tool rule names it a read)
