# official_albert — two commands on a fresh machine: `make demo` and `make test` (each creates ./.venv).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
export TF_CPP_MIN_LOG_LEVEL := 2
export PYTHONPATH := $(CURDIR)

.PHONY: demo test bench clean-venv

$(VENV)/.base-installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.txt
	touch $@

$(VENV)/.test-installed: $(VENV)/.base-installed requirements-test.txt
	$(PIP) -r requirements.txt -r requirements-test.txt
	touch $@

demo: $(VENV)/.base-installed
	$(PY) -m experiments.demo

test: $(VENV)/.test-installed
	$(PY) -m pytest tests

bench: $(VENV)/.test-installed
	$(PIP) -r requirements-bench.txt
	$(PY) -m experiments.benchmark --suite=default --output_dir=bench_out

clean-venv:
	rm -rf $(VENV)
