"""Crash-test child: write to a data directory from several threads until killed.

Usage: ``python crash_child.py <data-dir> <seed>``

Opens the directory with the default durability (``fsync``) and writes continuously from
``THREADS`` threads: single memory writes (8-d embeddings, metadata), ``write_many`` batches,
updates, deletes, KV sets (some with compare-and-set) and stream appends. Only after a call
RETURNS does it print one line per acknowledged change, and flush:

    M <ns> <id> <version> <deleted 0|1> <hash>       a memory version
    F <ns> <entity> <key> <version> <hash>           a KV fact version
    E <ns> <stream> <event-id> <memory-id|-> <hash>  a stream event

``hash`` is :func:`memory_hash` / :func:`fact_hash` / :func:`event_hash` of what was
acknowledged. The parent (``test_crash.py``) SIGKILLs this process at a random moment and
checks that every acknowledged change survived. Any unexpected error exits with status 2.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import threading
import time
import traceback
from typing import Any

import orjson

NAMESPACES = ("crash-a", "crash-b")
THREADS = 4
DIM = 8
POOL = 12  # ids p0..p11 shared by every thread and every run on a directory
POOL_IDS = frozenset(f"p{i}" for i in range(POOL))
ENTITIES = 6
KEYS = 5
STREAMS = 3
MAX_SECONDS = 120.0  # never outlive a parent that died without killing us


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()[:20]


def _json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def memory_hash(content: str, metadata: dict[str, Any], embedding: Any) -> str:
    import numpy as np

    vec = b"" if embedding is None else np.asarray(embedding, dtype=np.float32).tobytes()
    return _digest(content.encode(), _json(metadata), vec)


def fact_hash(value: Any) -> str:
    return _digest(_json(value))


def event_hash(content: str, data: dict[str, Any] | None) -> str:
    return _digest(content.encode(), _json(data))


def pool_entity(i: int) -> str:
    return f"user:{i % ENTITIES}"


class Worker:
    def __init__(self, db: Any, seed: int, tid: int, out: Any, lock: threading.Lock) -> None:
        self.db = db
        self.seed = seed
        self.tid = tid
        self.rng = random.Random(f"{seed}-{tid}")
        self.out = out
        self.lock = lock
        self.n = 0
        self.own: dict[str, list[str]] = {ns: [] for ns in NAMESPACES}  # ids written here

    def ack(self, lines: list[str]) -> None:
        if lines:
            with self.lock:
                self.out.write("".join(lines))
                self.out.flush()

    def tag(self) -> str:
        self.n += 1
        return f"{self.seed}.{self.tid}.{self.n}"

    def vec(self) -> list[float]:
        return [round(self.rng.uniform(-1, 1), 4) for _ in range(DIM)]

    def item(self, tag: str, **extra: Any) -> tuple[str, dict[str, Any]]:
        """(entity, memory): a new memory or, half the time, a new version of a pool id."""
        payload: dict[str, Any] = {
            "content": f"memory {tag} " + "x" * self.rng.randrange(0, 200),
            "metadata": {"tag": tag, "seed": self.seed, "thread": self.tid, **extra},
            "embedding": self.vec(),
            "salience": round(self.rng.random(), 3),
        }
        if self.rng.random() < 0.5:
            i = self.rng.randrange(POOL)
            payload["id"] = f"p{i}"
            return pool_entity(i), payload
        return f"user:{self.rng.randrange(ENTITIES)}", payload

    def remember(self, ns: str, written: list[Any]) -> None:
        """Keep the new ids this thread made (not pool ids): only this thread deletes them."""
        self.own[ns].extend(m.id for m in written if m.id not in POOL_IDS)

    def mem_line(self, ns: str, m: Any) -> str:
        h = memory_hash(m.content, m.metadata, m.embedding)
        return f"M {ns} {m.id} {m.version} {int(m.deleted)} {h}\n"

    def step(self) -> None:
        from synapsedb import NotFoundError, VersionConflictError

        rng = self.rng
        ns = rng.choice(NAMESPACES)
        mem = self.db.namespace(ns, agent=f"crash-{self.tid}")
        r = rng.random()
        tag = self.tag()
        if r < 0.25:  # one memory
            entity, payload = self.item(tag)
            m = mem.write(entity, payload)
            self.remember(ns, [m])
            self.ack([self.mem_line(ns, m)])
        elif r < 0.40:  # a batch: all or nothing; the metadata lets the parent check that
            size = rng.randrange(2, 13)
            items = [self.item(f"{tag}.{i}", batch=tag, size=size) for i in range(size)]
            got = mem.write_many(items)
            self.remember(ns, got)
            self.ack([self.mem_line(ns, m) for m in got])
        elif r < 0.55:  # update a pool id or one of ours (it may not exist yet)
            ids = self.own[ns]
            mid = rng.choice(ids) if ids and rng.random() < 0.5 else f"p{rng.randrange(POOL)}"
            changes: dict[str, Any] = {"content": f"updated {tag}", "metadata": {"tag": tag}}
            if rng.random() < 0.5:
                changes["embedding"] = self.vec()
            # A content-only update may be embedded automatically before it is queued while
            # another thread's 8-d caller vectors fix the namespace's space: the engine must
            # then store it without the automatic vector (a regression of a real race).
            try:
                m = mem.update(mid, changes)
            except NotFoundError:
                return
            self.ack([self.mem_line(ns, m)])
        elif r < 0.60:  # delete one of ours (pool ids stay alive)
            ids = self.own[ns]
            if not ids:
                return
            mid = ids.pop(rng.randrange(len(ids)))
            m = mem.delete(mid)  # only this thread knows the id: it must still be there
            self.ack([self.mem_line(ns, m)])
        elif r < 0.80:  # a KV fact, sometimes compare-and-set
            entity, key = f"user:{rng.randrange(ENTITIES)}", f"k{rng.randrange(KEYS)}"
            value = {"tag": tag, "n": rng.randrange(1000), "list": [rng.random() < 0.5] * 3}
            if rng.random() < 0.3:
                try:
                    current = mem.get(entity, key).version
                except NotFoundError:
                    current = 0
                try:
                    f = mem.set(entity, key, value, if_version=current)
                except VersionConflictError:  # another thread got there first
                    return
            else:
                f = mem.set(entity, key, value)
            self.ack([f"F {ns} {f.entity} {f.key} {f.version} {fact_hash(f.value)}\n"])
        else:  # a stream event, searchable (an event memory too) or not
            stream = f"s{rng.randrange(STREAMS)}"
            data = {"tag": tag, "n": rng.randrange(1000)}
            searchable = rng.random() < 0.5
            event: dict[str, Any] = {"content": f"event {tag}", "data": data}
            if searchable:
                event["embedding"] = self.vec()
            entity = f"user:{rng.randrange(ENTITIES)}"
            e = mem.append(entity, event, stream=stream, searchable=searchable)
            h = event_hash(e.content, e.data)
            self.ack([f"E {ns} {e.stream} {e.id} {e.memory_id or '-'} {h}\n"])

    def run(self) -> None:
        try:
            while True:
                self.step()
        except BaseException:
            sys.stderr.write(f"crash_child thread {self.tid} failed:\n{traceback.format_exc()}")
            sys.stderr.flush()
            os._exit(2)


def main(argv: list[str]) -> None:
    import synapsedb

    path, seed = argv[1], int(argv[2])
    db = synapsedb.open(path)  # durability="fsync": acknowledged means on disk
    lock = threading.Lock()
    workers = [Worker(db, seed, tid, sys.stdout, lock) for tid in range(THREADS)]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for t in threads:
        t.start()
    time.sleep(MAX_SECONDS)
    sys.stderr.write("crash_child: not killed in time, exiting\n")
    sys.stderr.flush()
    os._exit(3)


if __name__ == "__main__":
    main(sys.argv)
