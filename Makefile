# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-repeat test-all test-dgl bench lint results readme clean-cache rtl-test rtl-test-all synth

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

# DGL interop in its own environment (never part of `make test` or CI): DGL 2.1's PyPI wheels need torch 2.2.1
# (its graphbolt libraries cover torch 2.0.0-2.2.1), torchdata 0.7.1, numpy < 2, and pyyaml and pydantic (which
# `import dgl` needs but DGL's wheel does not declare); about 5 GB with torch's CUDA libraries. The project goes in
# without its dependency pins (it asks for torch >= 2.4 in the main install). docs/dgl.md.
DGL_VENV ?= .venv-dgl
DGL_PY := $(DGL_VENV)/bin/python
DGL_STAMP := $(DGL_VENV)/.installed
$(DGL_STAMP):  # built once (5 GB of downloads); `rm -rf .venv-dgl` rebuilds it
	$(PYTHON) -m venv $(DGL_VENV)
	$(DGL_PY) -m pip install -q --upgrade pip
	$(DGL_PY) -m pip install -q torch==2.2.1 dgl==2.1.0 torchdata==0.7.1 "numpy<2" "pandas<2.3" pyyaml pydantic
	$(DGL_PY) -m pip install -q "torch-geometric>=2.8,<2.9" "scipy>=1.11" "pymetis>=2023.1" "tqdm>=4.66" \
	    "matplotlib>=3.8" "pytest>=8" "hypothesis>=6.100"
	$(DGL_PY) -m pip install -q --no-deps -e .
	touch $(DGL_STAMP)

test-dgl: $(DGL_STAMP)
	DGLBACKEND=pytorch $(DGL_PY) -m pytest -q tests/dgl -p no:cacheprovider

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
