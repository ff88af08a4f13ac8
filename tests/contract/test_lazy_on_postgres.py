"""Loading namespaces on first need on PostgreSQL, with another process writing: the follower
applying the other process's rows to a namespace this one has not loaded yet loads it first,
and every row is then served exactly once. Each Database has its own data directory and
PostgresStorage, as a separate process would. The background loading thread of the second
one is held off (``Loader.start`` a no-op) so the namespace stays unloaded until then."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb.engine.lazy import Loader

from .conftest import PostgresBackend
from .test_processes_on_postgres import eventually


@pytest.fixture
def url(postgres_dsn: str) -> str:
    pg = PostgresBackend(postgres_dsn)
    return f"{pg.dsn}{'&' if '?' in pg.dsn else '?'}schema={pg.schema}"


def _open(url: str, path: Path, **options: Any) -> synapsedb.Database:
    return synapsedb.open(path, storage=url, llm=None, embedder=None,
                          background_maintenance=False, **options)  # fmt: skip


def test_the_follower_leaves_a_namespace_not_in_memory_to_its_load(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _open(url, tmp_path / "a") as a:
        ma = a.namespace("acme")
        first = ma.write("u", {"content": "first note", "embedding": [1.0, 0.0]})
        ma.set("u", "plan", "basic")
        a.namespace("other").set("u", "k", 1)
        monkeypatch.setattr(Loader, "start", lambda self: None)
        with _open(url, tmp_path / "b") as b:
            assert b.core.loading_pending == 2  # acme and other: not loaded
            # another process writes into acme; b's follower skips it (not in memory here:
            # its load reads those rows), so following loads nothing a request did not need
            second = ma.write("u", {"content": "second note", "embedding": [0.0, 1.0]})
            ma.update(first.id, {"content": "first note, edited"})
            ma.set("u", "plan", "gold", if_version=1)
            ma.append("u", "called")
            b.core.catch_up()  # (the listener may have done it already)
            assert b.core.loading_pending == 2  # the follower loaded nothing
            mb = b.namespace("acme")
            mems = eventually(lambda: mb.memories("u"), lambda ms: len(ms) == 3)
            assert sorted(m.content for m in mems) == [
                "called", "first note, edited", "second note"]  # fmt: skip
            assert [v.version for v in mb.history(first.id)] == [1, 2]  # no version twice
            assert mb.get("u", "plan").version == 2 and mb.get("u", "plan").value == "gold"
            assert [e.content for e in mb.events("u")] == ["called"]
            assert {h.id for h in mb.query(embedding=[0.0, 1.0], k=5).hits} >= {second.id}
            # b writes on what it loaded and followed: versions stay exact across processes
            assert mb.set("u", "plan", "platinum", if_version=2).version == 3
            assert eventually(lambda: ma.get("u", "plan").version, lambda v: v == 3) == 3
            assert b.core.loading_pending == 1  # other: still not loaded
            assert b.namespaces() == ["acme", "other"]


def test_lazy_and_eager_opens_serve_the_same_on_postgres(url: str, tmp_path: Path) -> None:
    with _open(url, tmp_path / "w") as w:
        for name in ("a", "b"):
            ns = w.namespace(name)
            m = ns.write("u", {"content": f"{name} note", "embedding": [1.0, 0.5]})
            ns.update(m.id, {"content": f"{name} note 2"})
            ns.set("u", "k", name)
    got = {}
    for load in ("lazy", "eager"):
        with _open(url, tmp_path / load, load=load) as db:
            got[load] = {
                name: ([(m.content, m.version) for m in db.namespace(name).memories("u")],
                       db.namespace(name).get("u", "k").value)
                for name in db.namespaces()
            }  # fmt: skip
    assert got["lazy"] == got["eager"] == {"a": ([("a note 2", 2)], "a"),
                                           "b": ([("b note 2", 2)], "b")}  # fmt: skip
