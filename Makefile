# Every target sets up what it needs from a fresh clone: a virtual environment
# in .venv with the project installed (editable) and its test dependencies.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROTO_OUT := otel_tracefence/_proto/tracefence/v1

.PHONY: setup demo test proto bench clean

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

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
