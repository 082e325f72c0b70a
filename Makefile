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

# One worker per core (pytest-xdist); all tests of one distribution class go to the same
# worker (--dist loadgroup, xdist_group marks), so they share its compiled operations.
XDIST := -n auto --dist loadgroup

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest $(XDIST) $(ARGS)

# Only the hypothesis property suite (tests/test_properties.py): every class x every property.
# STABLEDIST_HYPOTHESIS_PROFILE=thorough make test-properties: the nightly / pre-release run.
test-properties: $(STAMP)
	$(PY) -m pytest $(XDIST) tests/test_properties.py $(ARGS)

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

clean:
	rm -rf $(VENV) results site .pytest_cache .hypothesis .cache
