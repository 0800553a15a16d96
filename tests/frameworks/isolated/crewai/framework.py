"""CrewAI under OpenInference (openinference-instrumentation-crewai): kept out of the matrix's environments.

CrewAI 1.15.30's own dependencies (not extras) include chromadb, lancedb and onnxruntime: a fresh virtual
environment with it, its OpenInference instrumentation and the OTel SDK is about 1 GB and took 11 min 27 s to install
on this machine (``pip install -r requirements.heavy.txt`` into a new venv, with two other installs running beside it
on the 2 cores), against the whole ``make test`` budget of 30 minutes. So the row is listed with every cell
``cannot``, naming why, and no environment is made for it: ``FRAMEWORK.isolated`` is None and there is no runner,
so the matrix counts it kept out (``conformance.kept_out``): its cells skip as ``cannot``, and the page lists it.

CrewAI's native telemetry is no alternative for users: ``crewai/telemetry/telemetry.py`` (``Telemetry.__init__``)
makes a private ``TracerProvider`` exporting to CrewAI's own collector (a constant endpoint) and deliberately installs
no global provider (``Telemetry.set_tracer``), so it cannot be pointed at an application's OpenTelemetry provider;
CrewAI's "tracing" (``CREWAI_TRACING_ENABLED``, ``crewai/events/listeners/tracing``) posts batches to CrewAI's own
platform API, not OTLP. The OTel route users take is OpenInference's instrumentor, whose tool-error templates the
conventions table already holds (``crewai`` rows, ``normalize/conventions.py``).
"""

from tests.frameworks.matrix_table import SCENARIO_KEYS, Framework, cannot

FRAMEWORK = Framework("crewai", "CrewAI", "crewai", "OpenInference", "openinference-instrumentation-crewai", module="crewai", isolated=None)

WHY = (
    "not in the matrix: crewai 1.15.30 requires chromadb, lancedb and onnxruntime (about 1 GB; 11.5 min to install "
    "here), too heavy for an environment CI makes from scratch (tests/frameworks/isolated/crewai/framework.py)"
)
CELLS = [cannot("crewai", scenario, WHY) for scenario in SCENARIO_KEYS]
NOT_IN_MATRIX = [
    ("CrewAI 1.15.30, OpenInference", WHY),
    (
        "CrewAI's native telemetry",
        "its own private TracerProvider exporting to CrewAI's collector (crewai/telemetry/telemetry.py): it cannot be "
        "pointed at an application's OpenTelemetry provider, so OpenInference is the OTel route",
    ),
]
