# Two commands on a fresh machine: `make bench` (the main job) and `make test`.
# Each creates .venv from pyproject.toml when it is missing or older than pyproject.toml.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: bench test test-properties docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,bench,docs]"
	touch $(STAMP)

bench: $(STAMP)
	$(PY) -m benchmarks $(ARGS)

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest --ignore=tests/test_properties.py $(ARGS)

# The hypothesis property suite (tests/test_properties.py): every class x every property.
# Slower than the default run on 2 cores; STABLEDIST_HYPOTHESIS_PROFILE=thorough for nightly.
test-properties: $(STAMP)
	$(PY) -m pytest tests/test_properties.py $(ARGS)

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

clean:
	rm -rf $(VENV) results site .pytest_cache .hypothesis
