# Two commands on a fresh machine: `make bench` (the main job) and `make test`.
# Each creates .venv from pyproject.toml when it is missing or older than pyproject.toml.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# The oldest supported numpyro/jax pair (the lower bounds in pyproject.toml), in its own venv.
OLDEST_VENV := .venv-oldest
OLDEST_PY := $(OLDEST_VENV)/bin/python
OLDEST_STAMP := $(OLDEST_VENV)/.installed
OLDEST_PINS := numpyro==0.21.0 jax==0.7.0 jaxlib==0.7.0
# The tests that say "same numbers, same API, stable pytrees" on that pair (the property suite
# and the packaging/type/docs tests run on the newest pair only).
OLDEST_TESTS := tests/test_api.py tests/test_handlers.py tests/test_numbers.py \
	tests/test_cache.py tests/test_pytree.py

.PHONY: bench test-bench release-check check test test-x64 test-integration test-simplified-constants typecheck stubs test-properties test-oldest test-newest test-upstream \
	test-upstream-slice test-mutation test-mutation-full test-mutation-sample docs clean browser

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,dev,bench,docs,checkpoints]"
	touch $(STAMP)

# `make bench` needs only stabledist, jax, numpyro and matplotlib (the `bench` extra): its own
# stamp installs that much into the same .venv (a fresh machine gets no test, lint or docs
# tools for it); a .venv that `make test` set up already has it.
BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[bench]"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) -m benchmarks $(ARGS)

# The benchmark's own tests, beside it in benchmarks/tests (not part of `make test`): the
# registry, the report and the page, and the strict smoke run of the whole suite (CI's step).
test-bench: $(STAMP)
	$(PY) -m pytest benchmarks/tests $(ARGS)

# Before a release: the published benchmark numbers (docs/benchmarks.md) measured the code as it
# is; says how far stabledist/ and benchmarks/ moved since, and fails while they have.
release-check: $(BENCH_STAMP)
	$(PY) -m benchmarks.release

# One worker per core (pytest-xdist); all tests of one distribution class go to the same
# worker (--dist loadgroup, as tests/conftest.py defines it: the class a test's parameter
# names, else its module), so they share its compiled operations.
XDIST := -n auto --dist loadgroup

# The inner loop, after each edit (about a minute on 2 cores with a warm venv): ruff, the import
# contracts, pyright, and the tests of the core's own machinery with the property suite on its
# covering set of kinds of class (tests/helpers.py INDEPENDENT_OF_CLASS); the leaf
# order across fresh processes is left to `make test`, the whole suite.
CHECK_TESTS := tests/test_properties.py tests/test_pytree.py tests/test_hierarchies.py \
	tests/test_messages.py tests/test_architecture.py
check: $(STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports --no-logo --no-cache
	$(MAKE) typecheck
	STABLEDIST_COVERING_ONLY=tests/test_properties.py $(PY) -m pytest $(XDIST) -q \
		-m "not integration and not xla_defaults" $(CHECK_TESTS) \
		--deselect tests/test_pytree.py::test_leaf_order_identical_across_processes $(ARGS)

test: $(STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports --no-logo --no-cache   # the layers of pyproject.toml
	$(MAKE) typecheck
	$(PY) -m pytest $(XDIST) -m "not integration and not xla_defaults" $(ARGS)

# The property suite's comparisons with numpyro once more under jax_enable_x64, where Python
# floats are float64 and mix with float32 arrays (in CI on the newest stack, `make test-newest`;
# `make test` runs the same tests without x64; its own process, as x64 is set for a whole process): numpyro's numbers read
# eagerly (test_upstream) and inside a compiled program (test_jit, with the float64 casts of
# tests/test_properties.py's FLOAT64_CLASSES). A round trip and a vmap over stacked instances
# handle leaves whatever their dtype: their x64 runs repeated these two (make test runs them
# without x64).
X64_PROPERTIES := test_jit or test_upstream
test-x64: $(STAMP)
	JAX_ENABLE_X64=1 $(PY) -m pytest $(XDIST) tests/test_properties.py -k "$(X64_PROPERTIES)" \
		$(ARGS)

# The tests that start fresh processes or environments (marked `integration`): the wheel in a
# new venv, pyright and mypy on a user's file, every docs page on its own, two jax.distributed
# processes; and the real workloads compared with numpyro (tests/test_workloads.py, marked
# `xla_defaults`). All under XLA's default code generation, what users run: `make test` compiles
# with a cheaper one (tests/conftest.py), where every comparison is between two computations
# compiled under the same flags; a real program's two sides can be different programs (inputs in
# another order, values stabledist hoists and numpyro computes in the trace). `make test-oldest`
# runs the numbers-vs-numpyro tests under XLA's defaults too. CI runs these after `make test`
# (the benchmark's smoke run: `make test-bench`).
test-integration: $(STAMP) browser
	STABLEDIST_TEST_XLA_DEFAULTS=1 $(PY) -m pytest $(XDIST) -m "integration or xla_defaults" $(ARGS)

# Chromium for the docs site's browser test (tests/test_docs_browser.py, driven by playwright):
# Debian's package, installed when missing (playwright's own browser download is not used).
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
browser:
	@test -x $(CHROMIUM) || { $(SUDO) apt-get update && $(SUDO) apt-get install -y chromium; }

# JAX's simplified constants (JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=1: closed-over arrays are
# passed to compiled programs as arguments, not folded; off by default through jax 0.12): the
# property suite's properties that close over an instance (its lazy values first read, or
# hoisted, inside a transformation) and the cache's tests once more under it (CI). The
# properties that pass an instance as an argument (jit, vmap, control flow) close over no
# array of it: for them the setting changes nothing stabledist does. The properties run on the
# covering set of kinds of class (how constants reach a program is the same code for every
# class), the cache's tests on every class they name. One pytest run.
SIMPLIFIED_TESTS := tests/test_properties.py::test_closure tests/test_properties.py::test_hoisting \
	tests/test_cache.py
test-simplified-constants: $(STAMP)
	JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=1 STABLEDIST_COVERING_ONLY=tests/test_properties.py \
		$(PY) -m pytest $(XDIST) $(SIMPLIFIED_TESTS) $(ARGS)

# pyright (standard mode, configured in pyproject.toml) on the package, stubs included.
typecheck: $(STAMP)
	$(VENV)/bin/pyright --pythonpath $(PY) stabledist

# Regenerate the type stubs and the class table of docs/api/distributions.md after changing
# numpyro or stabledist's public names (tests/test_types.py checks both are current).
stubs: $(STAMP)
	$(PY) tools/generate_stubs.py

# Only the hypothesis property suite (tests/test_properties.py): every class x every property.
# STABLEDIST_HYPOTHESIS_PROFILE=thorough make test-properties: the nightly / pre-release run.
test-properties: $(STAMP)
	$(PY) -m pytest $(XDIST) tests/test_properties.py $(ARGS)

# numpyro's own tests (from the installed numpyro's sdist) against stabledist: imports
# substituted, stable internals on, and plain numpyro for reference (hours; see
# CONTRIBUTING.md and tests/upstream/expected_failures.toml).
test-upstream: $(STAMP)
	$(PY) tools/upstream_tests.py $(ARGS)

# The fixed CI slice of it (a few minutes): the substituted and stable-internals modes only.
test-upstream-slice: $(STAMP)
	$(PY) tools/upstream_tests.py --slice $(ARGS)

# Mutation testing (tools/mutation, CONTRIBUTING.md "Mutation testing"). The CI part: the
# hand-planted AST mutants of the core, each against the tests that should catch it (a few
# minutes); fails on a survivor that tools/mutation/survivors.toml does not explain.
test-mutation: $(STAMP)
	$(PY) tools/mutation/run.py fast $(ARGS)

# The full run: mutmut over the core modules (tools/mutation/setup.cfg) in a scratch copy
# (.cache/mutation); long, run by hand or nightly. ARGS='stabledist._src.lazy.cache.*' for one
# module.
test-mutation-full: $(STAMP)
	$(PY) tools/mutation/run.py full $(ARGS)

# The fixed, seeded sample of mutmut's mutants of the core (tools/mutation/sample.txt), each run
# against the tests before a change (BEFORE, default 6e80ad6: main before issue 44's test
# changes) and after it (the checkout's HEAD):
# the kill counts of both, and every mutant the change stopped killing (tools/mutation/sample.py;
# hours on 2 cores, resumable). ARGS='--jobs 1' etc. go to both runs.
BEFORE ?= 6e80ad6
test-mutation-sample: $(STAMP)
	$(PY) tools/mutation/sample.py run --side before --before $(BEFORE) $(ARGS)
	$(PY) tools/mutation/sample.py run --side after --before $(BEFORE) $(ARGS)
	$(PY) tools/mutation/sample.py report

$(OLDEST_STAMP): pyproject.toml
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_PY) -m pip install --quiet --upgrade pip
	$(OLDEST_PY) -m pip install --quiet -e ".[test]" $(OLDEST_PINS)
	touch $(OLDEST_STAMP)

# The second CI command: the oldest supported numpyro/jax pair.
test-oldest: $(OLDEST_STAMP)
	$(OLDEST_PY) -c "import numpyro, jax; print('numpyro', numpyro.__version__, 'jax', jax.__version__)"
	STABLEDIST_TEST_XLA_DEFAULTS=1 $(OLDEST_PY) -m pytest $(XDIST) $(OLDEST_TESTS) $(ARGS)

# The newest stack users run: Python 3.13 (3.12 where 3.13 is missing; jax >= 0.11 needs 3.12+)
# with the newest jax, jaxlib and numpyro that pyproject.toml admits, unpinned, in its own venv.
# The Python is NEWEST_PYTHON if given, else the first of python3.13, python3.12 found on PATH or
# in pyenv's versions (this machine image ships pyenv with both, `pyenv root`); none found is an
# error, never a skip.
NEWEST_VENV := .venv-newest
NEWEST_PY := $(NEWEST_VENV)/bin/python
NEWEST_STAMP := $(NEWEST_VENV)/.installed
NEWEST_VERSIONS := 3.13 3.12
# The tests that compare with numpyro (numbers, parity, handlers), the cache and hoisting, the
# pytree, export, slicing and batching features, JAX's internals, and the property suite's
# round trip and vmap: one pytest run, so each class's tests share a worker and its compiled
# programs. In the feature modules (NEWEST_COVERING) a test of one class runs on the covering
# set of kinds of class (tests/helpers.py INDEPENDENT_OF_CLASS): that code is the same for every
# class, and `make test` runs every class on the main stack; the comparisons with numpyro run
# every class here. The property suite's comparisons with numpyro run under x64 here
# (`make test-x64` on this stack; `make test` runs them without).
NEWEST_TESTS := tests/test_api.py tests/test_handlers.py tests/test_numbers.py \
	tests/test_cache.py tests/test_pytree.py tests/test_export.py tests/test_slicing.py \
	tests/test_batched.py tests/test_parity.py tests/test_jax_private.py tests/test_readme.py
NEWEST_PROPERTIES := $(addprefix tests/test_properties.py::,test_upstream_failures_still_fail \
	test_round_trip test_vmap)
NEWEST_COVERING := tests/test_api.py tests/test_pytree.py tests/test_export.py \
	tests/test_slicing.py tests/test_batched.py tests/test_properties.py
# Every documented example on the stack users install (each docs page and the README in a fresh
# process, as tests/test_docs_examples.py runs them), and the multi-process program the parallel
# guide shows (tests/test_multiprocess.py): integration tests, run with XLA's defaults. The
# `checkpoints` extra is what the checkpoint example of docs/guides/jax-values.md imports.
NEWEST_DOCS_TESTS := tests/test_docs_examples.py tests/test_multiprocess.py

$(NEWEST_STAMP): pyproject.toml
	@py="$(NEWEST_PYTHON)"; root=$$(pyenv root 2>/dev/null || echo "$$HOME/.pyenv"); \
	for v in $(NEWEST_VERSIONS); do \
		[ -n "$$py" ] && break; \
		for c in "$$(command -v python$$v)" $$(ls -r "$$root"/versions/$$v*/bin/python$$v 2>/dev/null); do \
			if [ -n "$$c" ] && "$$c" -c "import venv" 2>/dev/null; then py="$$c"; break; fi; \
		done; \
	done; \
	if [ -z "$$py" ]; then \
		echo "make test-newest: no Python $(NEWEST_VERSIONS) found on PATH or in $$root/versions;" \
			"install one (pyenv install 3.13) or give NEWEST_PYTHON=/path/to/python3.13" >&2; \
		exit 1; \
	fi; \
	echo "newest stack: $$py"; rm -rf $(NEWEST_VENV); "$$py" -m venv $(NEWEST_VENV)
	$(NEWEST_PY) -m pip install --quiet --upgrade pip
	$(NEWEST_PY) -m pip install --quiet -e ".[test,checkpoints]"
	touch $(NEWEST_STAMP)

# CI: the newest stack (a fresh machine's newest Python, the newest releases admitted).
test-newest: $(NEWEST_STAMP)
	$(NEWEST_PY) -c "import sys, numpyro, jax; print('Python', sys.version.split()[0], \
		'numpyro', numpyro.__version__, 'jax', jax.__version__)"
	STABLEDIST_COVERING_ONLY="$(NEWEST_COVERING)" $(NEWEST_PY) -m pytest $(XDIST) \
		-m "not integration" $(NEWEST_TESTS) $(NEWEST_PROPERTIES) $(ARGS)
	$(MAKE) test-x64 PY=$(NEWEST_PY) STAMP=$(NEWEST_STAMP)
	STABLEDIST_TEST_XLA_DEFAULTS=1 $(NEWEST_PY) -m pytest $(XDIST) -m integration \
		$(NEWEST_DOCS_TESTS) $(ARGS)

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

clean:
	rm -rf $(VENV) $(OLDEST_VENV) $(NEWEST_VENV) results site .pytest_cache .hypothesis .cache
