"""One adapter per system under test, all with the same small interface.

Every system gets the same rows: a 384-d unit vector, a text ``note {row}: ...`` and a metadata
``bucket`` (``(row // 100) % 100``, so a bucket filter keeps 1% of the rows). Adapters return
row numbers so that results can be compared with the exact answer. Imports of the peer
libraries happen inside the adapters, so this module loads without them.

Servers (SynapseDB over HTTP, Chroma's server) are started by the adapter on a free loopback
port and stopped by ``close``. Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384
BUCKETS = 100

# No product telemetry from any peer, set before any of them is imported.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ["ANONYMIZED_TELEMETRY"] = "False"


def bucket(row: int) -> int:
    return (row // 100) % BUCKETS


def text(row: int) -> str:
    return f"note {row}: customer {row % 1000} asked about order #{row}"


def row_of(content: str) -> int:
    """The row number back from a memory's text."""
    return int(content[5 : content.index(":")])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s")


class System:
    """Base adapter. ``pids`` are the processes whose resident memory counts (this one plus any
    server it started)."""

    name = "?"
    servers: list[subprocess.Popen[bytes]]

    def __init__(self) -> None:
        self.servers = []

    def open(self, root: Path) -> None:
        raise NotImplementedError

    def ingest(self, rows: Sequence[int], vecs: np.ndarray, ns: str = "bench") -> None:
        """Add the given rows (one batch) to namespace/collection/user ``ns``."""
        raise NotImplementedError

    def ready(self) -> None:
        """Block until background indexing (if any) has caught up."""

    def query(
        self, vec: np.ndarray, k: int, where: int | None = None, ns: str = "bench"
    ) -> list[int]:
        raise NotImplementedError

    def pids(self) -> list[int]:
        return [os.getpid(), *(p.pid for p in self.servers)]

    def reopen(self, vec: np.ndarray) -> dict[str, float] | None:
        """Close, open again and answer one query with ``vec``; seconds of each step, or None
        where the benchmark does not measure a reopen."""
        return None

    def close(self) -> None:
        for p in self.servers:
            p.terminate()
        for p in self.servers:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        self.servers = []


# -- SynapseDB ---------------------------------------------------------------------------------


def _synapse_items(rows: Sequence[int], vecs: np.ndarray, as_list: bool) -> list[dict]:
    return [
        {
            "entity": f"user:{r % 1000}",
            "content": text(r),
            "embedding": v.tolist() if as_list else v,
            "metadata": {"bucket": bucket(r)},
        }
        for r, v in zip(rows, vecs, strict=True)
    ]


class SynapseEmbedded(System):
    """synapsedb.open(...) in this process, default settings (durability fsync), caller vectors."""

    name = "synapsedb"

    def open(self, root: Path) -> None:
        import synapsedb

        self.path = root / "synapse"
        self.db = synapsedb.open(self.path, embedder=None)

    def ingest(self, rows: Sequence[int], vecs: np.ndarray, ns: str = "bench") -> None:
        self.db.namespace(ns).write_many(_synapse_items(rows, vecs, as_list=False))

    def ready(self) -> None:
        self.db.wait_for_indexes()

    def reopen(self, vec: np.ndarray) -> dict[str, float] | None:
        """close() (which saves the HNSW graph), synapsedb.open() (lazy: namespace names
        only), then the first query, which loads the namespace and its saved graph.
        pending_rows: rows still to index then (graph and deferred keyword index)."""
        import synapsedb

        t0 = time.perf_counter()
        self.db.close()
        t1 = time.perf_counter()
        self.db = synapsedb.open(self.path, embedder=None)
        t2 = time.perf_counter()
        hits = self.query(vec, 10)
        t3 = time.perf_counter()
        assert len(hits) == 10, hits
        return {
            "close_s": t1 - t0,
            "open_s": t2 - t1,
            "first_query_s": t3 - t2,
            "pending_rows": float(self.db.indexing_pending),
        }

    def query(
        self, vec: np.ndarray, k: int, where: int | None = None, ns: str = "bench"
    ) -> list[int]:
        res = self.db.namespace(ns).query(
            embedding=vec,
            k=k,
            mode="vector",
            dedup=False,
            filter=None if where is None else {"bucket": where},
        )
        return [row_of(h.content) for h in res]

    def kv_set(self, i: int) -> None:
        self.db.namespace("kv").set(f"user:{i % 1000}", "plan", {"tier": i % 3})

    def kv_get(self, i: int) -> None:
        self.db.namespace("kv").get(f"user:{i % 1000}", "plan")

    def close(self) -> None:
        self.db.close()
        super().close()


def start_synapse_server(root: Path, port: int, core: str | None = None) -> subprocess.Popen[bytes]:
    """``python -m synapsedb serve`` on 127.0.0.1:port, vectors from the caller."""
    cmd = [sys.executable, "-m", "synapsedb", "serve", "--data", str(root), "--port", str(port)]
    if core is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", core, *cmd]
    return subprocess.Popen(
        cmd,
        env={**os.environ, "SYNAPSEDB_EMBEDDER": "none"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class SynapseHTTP(System):
    """The SynapseDB server in its own process, used through synapsedb.connect (HTTP/JSON)."""

    name = "synapsedb-http"

    def open(self, root: Path) -> None:
        import httpx

        import synapsedb

        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.servers.append(start_synapse_server(root / "synapse-http", port))
        wait_until(lambda: httpx.get(f"{self.url}/readyz").status_code == 200, 60, "server")
        self.db = synapsedb.connect(self.url, timeout=300)

    def ingest(self, rows: Sequence[int], vecs: np.ndarray, ns: str = "bench") -> None:
        self.db.namespace(ns).write_many(_synapse_items(rows, vecs, as_list=True))

    def ready(self) -> None:
        import httpx

        while httpx.get(f"{self.url}/readyz").json().get("indexing_rows_pending"):
            time.sleep(0.2)

    def query(
        self, vec: np.ndarray, k: int, where: int | None = None, ns: str = "bench"
    ) -> list[int]:
        res = self.db.namespace(ns).query(
            embedding=vec.tolist(),
            k=k,
            mode="vector",
            dedup=False,
            filter=None if where is None else {"bucket": where},
        )
        return [row_of(h.content) for h in res]

    def kv_set(self, i: int) -> None:
        self.db.namespace("kv").set(f"user:{i % 1000}", "plan", {"tier": i % 3})

    def kv_get(self, i: int) -> None:
        self.db.namespace("kv").get(f"user:{i % 1000}", "plan")

    def close(self) -> None:
        self.db.close()
        super().close()


# -- Chroma ------------------------------------------------------------------------------------


class Chroma(System):
    """chromadb.PersistentClient in this process; one collection per namespace, cosine space."""

    name = "chroma"

    def open(self, root: Path) -> None:
        import chromadb
        from chromadb.config import Settings

        self.client = chromadb.PersistentClient(
            path=str(root / "chroma"), settings=Settings(anonymized_telemetry=False)
        )
        self.cols: dict[str, Any] = {}

    def col(self, ns: str) -> Any:
        c = self.cols.get(ns)
        if c is None:
            c = self.cols[ns] = self.client.get_or_create_collection(
                ns, metadata={"hnsw:space": "cosine"}, embedding_function=None
            )
        return c

    def ingest(self, rows: Sequence[int], vecs: np.ndarray, ns: str = "bench") -> None:
        self.col(ns).add(
            ids=[str(r) for r in rows],
            embeddings=np.ascontiguousarray(vecs),
            documents=[text(r) for r in rows],
            metadatas=[{"bucket": bucket(r)} for r in rows],
        )

    def query(
        self, vec: np.ndarray, k: int, where: int | None = None, ns: str = "bench"
    ) -> list[int]:
        res = self.col(ns).query(
            query_embeddings=vec[None, :],
            n_results=k,
            where=None if where is None else {"bucket": where},
            include=["distances"],
        )
        return [int(i) for i in res["ids"][0]]


class ChromaHTTP(Chroma):
    """``chroma run`` (Chroma's own server binary) on loopback, chromadb.HttpClient."""

    name = "chroma-http"

    def open(self, root: Path) -> None:
        import chromadb
        from chromadb.config import Settings

        exe = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
        port = free_port()
        (root / "chroma-http").mkdir(parents=True, exist_ok=True)
        self.servers.append(
            subprocess.Popen(
                [
                    exe,
                    "run",
                    "--path",
                    str(root / "chroma-http"),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        settings = Settings(anonymized_telemetry=False)

        def up() -> bool:
            self.client = chromadb.HttpClient(host="127.0.0.1", port=port, settings=settings)
            self.client.heartbeat()
            return True

        wait_until(up, 60, "chroma server")
        self.cols = {}


# -- mem0 --------------------------------------------------------------------------------------


class LookupEmbedder:
    """Stand-in for mem0's embedder: returns the vector every other system got for this text.

    mem0 calls ``embed(text, memory_action)``; the table maps the memory texts (and the query
    texts) to the shared vectors, so mem0 pays no embedding cost and sees the same numbers.
    ``fallback`` (e.g. SynapseDB's MiniLM) embeds texts that are not in the table.
    """

    def __init__(self, fallback: Callable[[str], np.ndarray] | None = None) -> None:
        self.table: dict[str, np.ndarray] = {}
        self.fallback = fallback
        self.config = None

    def put(self, text: str, vec: np.ndarray) -> None:
        self.table[text.strip()] = vec  # mem0 strips queries before embedding them

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        v = self.table.get(text.strip())
        if v is None:
            if self.fallback is None:
                raise KeyError(f"no vector for {text[:40]!r}")
            v = self.fallback(text)
        return v.tolist()


def mem0_memory(root: Path, embedder: LookupEmbedder) -> Any:
    """mem0 OSS ``Memory`` with its default vector store (embedded Qdrant on local disk), no LLM.

    The LLM block is a stand-in: an OpenAI-style config with a dummy key aimed at a closed
    loopback port, so that any accidental LLM call fails at once instead of leaving the box.
    With ``infer=False`` mem0 never calls it. The OpenAI embedder mem0 builds is replaced by
    ``embedder`` before any use.
    """
    os.environ.setdefault("OPENAI_API_KEY", "sk-offline-dummy-key-never-sent")
    from mem0 import Memory

    dead = "http://127.0.0.1:9/v1"
    m = Memory.from_config(
        {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "path": str(root / "qdrant"),
                    "embedding_model_dims": DIM,
                    "collection_name": "bench",
                },
            },
            "embedder": {
                "provider": "openai",
                "config": {
                    "embedding_dims": DIM,
                    "api_key": "sk-offline-dummy",
                    "openai_base_url": dead,
                },
            },
            "llm": {
                "provider": "openai",
                "config": {
                    "model": "offline-stand-in-never-called",
                    "api_key": "sk-offline-dummy",
                    "openai_base_url": dead,
                },
            },
            "history_db_path": str(root / "mem0-history.db"),
        }
    )
    m.embedding_model = embedder
    return m


class Mem0(System):
    """mem0 OSS Memory, add(..., infer=False), search(..., threshold=0.0): plain top k like the
    other systems (mem0's default 0.1 drops hits under that score); a namespace is a user_id."""

    name = "mem0"

    def open(self, root: Path) -> None:
        self.emb = LookupEmbedder()
        self.m = mem0_memory(root, self.emb)
        self.nq = 0

    def ingest(self, rows: Sequence[int], vecs: np.ndarray, ns: str = "bench") -> None:
        # One add() per run of equal bucket (metadata is per call); rows come in blocks of 100.
        start = 0
        while start < len(rows):
            b = bucket(rows[start])
            end = start
            msgs = []
            while end < len(rows) and bucket(rows[end]) == b:
                t = text(rows[end])
                self.emb.put(t, vecs[end])
                msgs.append({"role": "user", "content": t})
                end += 1
            self.m.add(msgs, user_id=ns, metadata={"bucket": b}, infer=False)
            start = end

    def query(
        self, vec: np.ndarray, k: int, where: int | None = None, ns: str = "bench"
    ) -> list[int]:
        q = f"query {self.nq}"
        self.nq += 1
        self.emb.put(q, vec)
        filters: dict[str, Any] = {"user_id": ns}
        if where is not None:
            filters["bucket"] = where
        res = self.m.search(q, top_k=k, filters=filters, threshold=0.0)
        del self.emb.table[q]
        return [row_of(r["memory"]) for r in res["results"]]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.m.vector_store.client.close()
        super().close()


# -- the floor: a raw HNSW index and an exact scan ---------------------------------------------


class Hnswlib(System):
    """hnswlib 0.8 directly (M 16, ef_construction 200, ef 100: SynapseDB's defaults), inner
    product on unit vectors; filter = hnswlib's Python filter callback. One index per namespace.
    """

    name = "hnswlib"

    def open(self, root: Path) -> None:
        self.idx: dict[str, Any] = {}
        self.cap: dict[str, int] = {}

    def ingest(self, rows: Sequence[int], vecs: np.ndarray, ns: str = "bench") -> None:
        import hnswlib

        ix = self.idx.get(ns)
        need = len(rows) + (ix.get_current_count() if ix is not None else 0)
        if ix is None:
            ix = self.idx[ns] = hnswlib.Index(space="ip", dim=DIM)
            self.cap[ns] = max(need, 100)
            ix.init_index(max_elements=self.cap[ns], ef_construction=200, M=16)
            ix.set_ef(100)
        elif need > self.cap[ns]:
            self.cap[ns] = max(need, 2 * self.cap[ns])
            ix.resize_index(self.cap[ns])
        ix.add_items(np.ascontiguousarray(vecs), np.asarray(rows, dtype=np.int64))

    def query(
        self, vec: np.ndarray, k: int, where: int | None = None, ns: str = "bench"
    ) -> list[int]:
        ix = self.idx[ns]
        k = min(k, ix.get_current_count())
        if where is None:
            labels, _ = ix.knn_query(vec, k=k)
            return labels[0].tolist()
        while k > 0:  # hnswlib raises when the filtered search finds fewer than k
            try:
                labels, _ = ix.knn_query(vec, k=k, filter=lambda r: (r // 100) % BUCKETS == where)
                return labels[0].tolist()
            except RuntimeError:
                k //= 2
        return []


class Exact(System):
    """numpy: one float32 matrix per namespace, X @ q and argpartition (exact; the floor)."""

    name = "numpy"

    def open(self, root: Path) -> None:
        self.mats: dict[str, list[np.ndarray]] = {}
        self.rows: dict[str, list[np.ndarray]] = {}
        self.cache: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def ingest(self, rows: Sequence[int], vecs: np.ndarray, ns: str = "bench") -> None:
        self.mats.setdefault(ns, []).append(np.array(vecs, dtype=np.float32))
        self.rows.setdefault(ns, []).append(np.asarray(rows, dtype=np.int64))
        self.cache.pop(ns, None)

    def _mat(self, ns: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        c = self.cache.get(ns)
        if c is None:
            x = np.concatenate(self.mats[ns]) if len(self.mats[ns]) > 1 else self.mats[ns][0]
            r = np.concatenate(self.rows[ns]) if len(self.rows[ns]) > 1 else self.rows[ns][0]
            self.mats[ns], self.rows[ns] = [x], [r]
            c = self.cache[ns] = (x, r, (r // 100) % BUCKETS)
        return c

    def ready(self) -> None:
        for ns in list(self.mats):
            self._mat(ns)

    def query(
        self, vec: np.ndarray, k: int, where: int | None = None, ns: str = "bench"
    ) -> list[int]:
        x, r, b = self._mat(ns)
        if where is not None:
            sel = np.flatnonzero(b == where)
            x, r = x[sel], r[sel]
        s = x @ vec
        k = min(k, s.shape[0])
        top = np.argpartition(-s, k - 1)[:k] if s.shape[0] > k else np.arange(k)
        return r[top[np.argsort(-s[top])]].tolist()


SYSTEMS: dict[str, type[System]] = {
    "synapsedb": SynapseEmbedded,
    "synapsedb-http": SynapseHTTP,
    "chroma": Chroma,
    "chroma-http": ChromaHTTP,
    "mem0": Mem0,
    "hnswlib": Hnswlib,
    "numpy": Exact,
}

LABELS = {
    "synapsedb": "SynapseDB embedded",
    "synapsedb-http": "SynapseDB HTTP",
    "chroma": "Chroma in-process",
    "chroma-http": "Chroma HTTP server",
    "mem0": "mem0 OSS (infer=False)",
    "hnswlib": "hnswlib (raw index)",
    "numpy": "numpy exact (floor)",
    "redis": "redis-server 7",
}
