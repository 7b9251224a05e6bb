# Two entry points that set everything up themselves on a fresh machine:
#   make demo   adapt the embedded default model to the example corpus (checkpoint chosen on the dev
#               pairs), then compare it with the base on the held-out test pairs
#   make test   lint, type check (mypy) + the product's test suite (what CI runs first)
#   make research  lint + the research wing's tests: its studies regenerate from their stored outputs (CI runs it
#               after make test; research/README.md)
# TORCH picks the PyTorch requirement installed first; the pinned CPU build keeps CPU-only machines
# from downloading several GB of CUDA wheels. On a GPU machine: make test TORCH=torch
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(subst =,_,$(TORCH))

.PHONY: install demo test research bench-check bench-eval clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/sentadapt adapt examples/it-support-corpus.txt --recipe consert \
		--base sentence-transformers/all-MiniLM-L6-v2 --dev examples/it-support-dev.tsv \
		--output runs/demo --batch-size 32 --max-steps 30 --eval-every 10 --overwrite --plot
	$(BIN)/sentadapt eval sentence-transformers/all-MiniLM-L6-v2 runs/demo --pairs examples/it-support-test.tsv

# The parity tests (float32 results of two code paths) run a second time on ATen's portable kernels
# (ATEN_CPU_CAPABILITY=default, no AVX): a tolerance tighter than two correct CPUs differ by fails here
# rather than on a user's machine (tests/conftest.py states the rule).
# --dist worksteal: a worker that runs out of tests takes half of the other's queue. The slow subprocess tests (faults,
# overwrite, two processes) sit together in tests/run and tests/train, and xdist's default `load` left one worker
# running them alone at the end: 309.8 s against 240.6 s for the same suite, measured back to back on a 2-core machine.
test: $(STAMP)
	$(BIN)/ruff check sentadapt tests bench tools
	$(BIN)/mypy sentadapt
	$(BIN)/python -m pytest -q -n 2 --dist worksteal
	ATEN_CPU_CAPABILITY=default $(BIN)/python -m pytest -q -m parity

# The research wing (research/README.md) and the benchmark harnesses (bench/tests): the consumers outside the product,
# tested in one session with the product's fixtures (tests/conftest.py) as a plugin.
research: $(STAMP)
	$(BIN)/ruff check research
	$(BIN)/python -m pytest -q -n 2 --dist worksteal -p tests.conftest research/tests bench/tests

# The benchmark harnesses' tests alone (make research runs them too).
bench-check: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist worksteal -p tests.conftest bench/tests

bench-eval: $(STAMP)
	$(BIN)/python -m bench.bench_eval

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
