# Every target sets up what it needs from a fresh clone: a virtual environment
# in .venv with the project installed (editable) and its test dependencies.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROTO_OUT := otel_tracefence/_proto/tracefence/v1

.PHONY: setup demo test proto bench soak fuzz clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(PY) -m otel_tracefence.demo

test: setup
	$(PY) -m pytest

# Regenerate the committed code from proto/ (tests check it is up to date).
proto: setup
	$(PY) -m grpc_tools.protoc -Iotel_tracefence/_proto=proto --python_out=. --pyi_out=. --grpc_python_out=. proto/tracefence/v1/tracefence.proto

bench: setup
	$(PY) bench/planner.py

# Several concurrent OTLP clients against `tracefence serve` for SOAK_SECONDS (not in `make test`):
# memory under the bound derived from the configured limits, no acknowledged span lost.
SOAK_SECONDS ?= 300
soak: setup
	SOAK_SECONDS=$(SOAK_SECONDS) $(PY) bench/soak.py

# Coverage-guided fuzzing (atheris) of the OTLP protobuf and CSV entry points, FUZZ_SECONDS each
# (default 60; `make fuzz FUZZ_SECONDS=600`). Not part of `make test` nor of CI.
fuzz: setup
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[fuzz]'
	$(PY) bench/fuzz_otlp.py
	$(PY) bench/fuzz_csv.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
