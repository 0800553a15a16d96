# Every target sets up what it needs from a fresh clone: a virtual environment
# in .venv with the project installed (editable) and its test dependencies.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROTO_OUT := otel_tracefence/_proto/tracefence/v1

.PHONY: setup demo test proto bench soak chaos fuzz clean conformance

# The engine's sources (otel_tracefence/compiled.py, ENGINE_SOURCES): setup.py compiles them at install, so an
# edit reinstalls (meanwhile an extension module built from an older source is never loaded).
ENGINE_SOURCES := $(shell $(PYTHON) -c "import runpy; m = runpy.run_path('otel_tracefence/compiled.py'); print(*(p.relative_to(m['_ROOT']) for p in m['engine_files']()))")

$(VENV)/.installed: pyproject.toml setup.py otel_tracefence/compiled.py $(ENGINE_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[serve,ui,postgres,test]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(PY) -m otel_tracefence.demo

test: setup
	$(VENV)/bin/ruff check --no-cache otel_tracefence tests bench
	$(VENV)/bin/mypy otel_tracefence
	$(PY) -m pytest

# Regenerate the committed code from proto/ (tests check it is up to date).
proto: setup
	$(PY) -m grpc_tools.protoc -Iotel_tracefence/_proto=proto --python_out=. --pyi_out=. --grpc_python_out=. proto/tracefence/v1/tracefence.proto

# Regenerate docs/conformance.md from the conformance matrix's table (tests check it is up to date).
conformance: setup
	$(PY) -m tests.frameworks.conformance > docs/conformance.md

bench: setup
	$(PY) bench/planner.py

# Several concurrent OTLP clients against `tracefence serve` for SOAK_SECONDS (not in `make test`):
# memory under the bound derived from the configured limits, no acknowledged span lost.
SOAK_SECONDS ?= 300
soak: setup
	SOAK_SECONDS=$(SOAK_SECONDS) $(PY) bench/soak.py

# The larger versions of the fault tests (issue 9; not in `make test`): a 100,500-span trace beside a small one,
# SIGKILL/SIGTERM with the persistent queue after minutes' worth of load; then the issue's own reproductions:
# a 100k-span trace against 1k-span traces (cost per span, a small trace's delivery meanwhile), the poison
# batch against a 4 MiB upstream, and one 1M-span Export against the intake bound (memory); last, issue 30's
# chaos table (bench/chaos.py: review items, small volumes, connection floods, huge JSON, raw values; its tmpfs
# checks need root and show SKIP without it).
chaos: setup
	TRACEFENCE_CHAOS=1 $(PY) -m pytest tests/faults/test_faults.py -q -k "giant or persistent_queue or poison or processor_ or sigterm or sigkill"
	$(PY) bench/giant_trace.py --rounds 1
	$(PY) bench/poison.py
	$(PY) bench/intake_memory.py
	$(PY) bench/chaos.py

# Coverage-guided fuzzing (atheris) of the OTLP protobuf and CSV entry points and of the wire reader of spans, FUZZ_SECONDS each
# (default 60; `make fuzz FUZZ_SECONDS=600`). Not part of `make test` nor of CI.
fuzz: setup
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[fuzz]'
	$(PY) bench/fuzz_otlp.py
	$(PY) bench/fuzz_csv.py
	TRACEFENCE_PURE_PYTHON=1 $(PY) bench/fuzz_wire_span.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
