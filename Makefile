# official_albert — two commands on a fresh machine: `make demo` and `make test` (each creates ./.venv).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
export TF_CPP_MIN_LOG_LEVEL := 2
export PYTHONPATH := $(CURDIR)

.PHONY: venv demo test test-fast test-under-load test-cpu-kinds lint format bench clean-venv

$(VENV)/.base-installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.txt
	touch $@

# The test venv also gets the OpenVINO, JAX, KerasHub, LiteRT, serving and retrieval extras (requirements-openvino.txt,
# requirements-jax.txt, requirements-keras-hub.txt, requirements-litert.txt, requirements-serve.txt,
# requirements-retrieval.txt): CI runs the OpenVINO export tests, the Keras-backend tests, the KerasHub preset round
# trips, the LiteRT tests, the server's and the retrieval study's (its BM25 baseline).
# `make demo` and the core install never need them.
EXTRAS := requirements-openvino.txt requirements-jax.txt requirements-keras-hub.txt requirements-litert.txt \
          requirements-serve.txt requirements-retrieval.txt
$(VENV)/.test-installed: $(VENV)/.base-installed requirements-test.txt $(EXTRAS)
	$(PIP) -r requirements.txt -r requirements-test.txt $(addprefix -r ,$(EXTRAS))
	touch $@

# Only the environment (the core install), for running the recipe's commands by hand: `.venv/bin/python -m ...`.
venv: $(VENV)/.base-installed

demo: $(VENV)/.base-installed
	$(PY) -m experiments.demo

# The lint (ruff, config in pyproject.toml) runs first: a style error fails the suite like a test does. The suite runs
# in TEST_WORKERS pytest-xdist processes, each test file whole in one of them (module fixtures are built once); one
# process kept the 2 cores ~58 % busy (README, Tests). TEST_WORKERS=0 runs it in one process. The 40 slowest tests are
# listed at the end, so every run (CI's too) says where the suite's time goes (issue 45: the whole suite ≤ 25 min).
# --no-loadscope-reorder keeps the files in collection order, longest first (tests/conftest.py, LONGEST_FIRST):
# by default pytest-xdist would order them by their number of tests instead.
TEST_WORKERS ?= 2
test: lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=40 tests

# The fast tier, for the edit-test loop: the whole suite less the tests marked `large` (end-to-end runs, benchmark
# workloads, the documented commands, multi-process scale-out) and those marked `slow` (≥ ~4 s on 2 cores outside
# the model and export harnesses; pytest.ini). `make test` stays the gate: CI runs it.
test-fast: lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not large and not slow" --durations=40 tests

# The tests that coordinate processes or wait on progress, with LOAD busy processes beside them (tests/conftest.py):
# an assumption that a step, a start-up or a signal is fast fails here before it flakes in CI.
LOAD ?= 2
test-under-load: $(VENV)/.test-installed
	ALBERT_TEST_LOAD=$(LOAD) $(PY) -m pytest -m timing tests

# The CPU-dependent tests (marker cpu_kind) rerun as the other CPU kinds these machines have had (an AVX2-only CPU;
# AVX-512 without bf16): tests/test_cpu_kinds.py, also part of `make test`. docs/performance.md, "Which CPU".
test-cpu-kinds: $(VENV)/.test-installed
	$(PY) -m pytest tests/test_cpu_kinds.py

lint: $(VENV)/.test-installed
	$(PY) -m ruff check .

# Formats the Python files that differ from HEAD (or from BASE=<rev>) with yapf (config in pyproject.toml).
BASE ?= HEAD
format: $(VENV)/.test-installed
	$(PIP) "yapf==0.43.*"
	git diff --name-only --diff-filter=AM $(BASE) -- '*.py' | xargs -r $(PY) -m yapf -i

bench: $(VENV)/.test-installed
	$(PIP) -r requirements-bench.txt
	$(PY) -m experiments.benchmark --suite=default --output_dir=bench_out

clean-venv:
	rm -rf $(VENV)
