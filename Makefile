# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-repeat test-all bench lint results readme clean-cache rtl-test rtl-test-all synth

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch first, so that pip never pulls a multi-GB CUDA build for the project's deps.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[test,hw]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m pipeline

test: $(STAMP)
	$(PY) -m pytest -q -m "not slow and not gpu" --durations=15

# The multi-process tests (slow ones included: torchrun restart and resume) N times in a row, stopping at the first
# failure: `make test-repeat N=20 THREADS=1` (THREADS sets OMP_NUM_THREADS; unset: torch's default).
N ?= 20
REPEAT_TESTS := tests/distributed tests/graphtransformer/test_parallel.py
test-repeat: $(STAMP)
	@for i in $$(seq 1 $(N)); do \
	  echo "== test-repeat: run $$i of $(N)$(if $(THREADS), with OMP_NUM_THREADS=$(THREADS))"; \
	  $(if $(THREADS),OMP_NUM_THREADS=$(THREADS)) $(PY) -m pytest -q -x $(REPEAT_TESTS) \
	    || { echo "test-repeat: run $$i of $(N) failed"; exit 1; }; \
	done; echo "test-repeat: $(N) of $(N) runs passed"

test-all: $(STAMP)
	$(PY) -m pytest -q --durations=25

bench: $(STAMP)
	$(PY) -m benchmarks.fp32_accuracy
	$(PY) -m benchmarks.train_speed
	$(PY) -m benchmarks.make_results

results: $(STAMP)
	$(PY) -m benchmarks.make_results

# Rerun every example whose output README.md and docs/*.md show (each file in its own temporary directory);
# one file: `$(PY) -m benchmarks.readme_examples --file docs/hw.md`.
readme: $(STAMP)
	$(PY) -m benchmarks.readme_examples

rtl-test: $(STAMP)
	$(PY) -m pytest -q tests/hw/rtl -m "not slow" --durations=10

rtl-test-all: $(STAMP)
	$(PY) -m pytest -q tests/hw/rtl --durations=15

synth: $(STAMP)
	$(PY) -m hw.rtl.synth

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean-cache:
	rm -rf datasets/cache
