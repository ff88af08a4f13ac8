"""The namespace surface is declared once: the protocols (synapsedb.surface) and the operations
table. These tests fail when a copy drifts: a generated file left stale, a client or async
signature that is not the protocol's, a row whose fields are no arguments of its method, a
method no row serves, a module exporting what it does not have."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest

import synapsedb
import synapsedb.surface
from synapsedb.client import AsyncRemoteNamespace, RemoteNamespace
from synapsedb.client.aio_namespace import AsyncRemoteCache, AsyncRemoteSessions
from synapsedb.client.calls import ROUTED
from synapsedb.client.namespace import RemoteCache, RemoteSessions
from synapsedb.engine import Namespace
from synapsedb.surface import (
    BY_NAME,
    OPERATIONS,
    AsyncCacheAPI,
    AsyncNamespaceAPI,
    AsyncSessionsAPI,
    CacheAPI,
    NamespaceAPI,
    SessionsAPI,
)

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = [
    (NamespaceAPI, AsyncNamespaceAPI, RemoteNamespace, AsyncRemoteNamespace, ""),
    (SessionsAPI, AsyncSessionsAPI, RemoteSessions, AsyncRemoteSessions, "sessions."),
    (CacheAPI, AsyncCacheAPI, RemoteCache, AsyncRemoteCache, "cache."),
]


def generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_surface", ROOT / "tools" / "gen_surface.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_surface"] = module
    spec.loader.exec_module(module)
    return module


def test_the_generated_files_are_what_the_protocols_make() -> None:
    """surface/aio.py and both clients' namespaces are regenerated from the protocols; an
    edit of a protocol without ``python tools/gen_surface.py`` fails here."""
    for path, text in generator().generate().items():
        assert path.read_text() == text, (
            f"{path.relative_to(ROOT)} is stale: run tools/gen_surface.py"
        )


def members(protocol: type) -> dict[str, Any]:
    return {
        n: v
        for n, v in vars(protocol).items()
        if not n.startswith("_") and (callable(v) or isinstance(v, property))
    }


def signature(member: Any) -> inspect.Signature:
    return inspect.signature(member.fget if isinstance(member, property) else member)


@pytest.mark.parametrize(("sync", "asynchronous", "client", "aclient", "prefix"), PROTOCOLS)
def test_every_side_has_the_protocols_signatures(
    sync: type, asynchronous: type, client: type, aclient: type, prefix: str
) -> None:
    """Both clients and the async protocol have each method of the protocol, with its
    parameters (names, kinds, defaults, annotations); async ones are coroutines."""
    names = members(sync)
    assert set(members(asynchronous)) == set(names)
    for name, member in names.items():
        want = signature(member).parameters
        for cls in (asynchronous, client, aclient):
            got = getattr(cls, name)
            assert signature(got).parameters == want, f"{cls.__name__}.{name}"
            if cls is not client and not isinstance(member, property):
                assert inspect.iscoroutinefunction(got), f"{cls.__name__}.{name}"
        if not isinstance(member, property):
            assert inspect.getdoc(member), f"{sync.__name__}.{name} has no docstring"


def test_the_embedded_namespace_is_a_namespace_api(tmp_path: Path) -> None:
    db = synapsedb.open(tmp_path, embedder=None, llm=None)
    try:
        ns = db.namespace("acme")
        for value, protocol in (
            (ns, NamespaceAPI),
            (ns.sessions, SessionsAPI),
            (ns.cache, CacheAPI),
        ):
            assert protocol in type(value).__mro__, protocol.__name__
        assert inspect.getdoc(Namespace.query) == inspect.getdoc(NamespaceAPI.query)
    finally:
        db.close()


def test_every_method_reaches_a_row() -> None:
    """Each protocol method is one row of the table (same name) or routed to rows by the
    client (``get(id)`` and ``get(entity, key)``...)."""
    for sync, _, _, _, prefix in PROTOCOLS:
        for name, member in members(sync).items():
            qualified = prefix + name
            if isinstance(member, property) and name in ("sessions", "cache"):
                continue
            assert qualified in BY_NAME or qualified in ROUTED, qualified


def test_every_field_is_an_argument_of_its_method() -> None:
    """A row named after a method carries only that method's arguments (plus the acting
    agent, which a namespace handle may hold instead)."""
    protocols = {prefix: sync for sync, _, _, _, prefix in PROTOCOLS}
    for op in OPERATIONS:
        prefix, _, name = op.name.rpartition(".")
        protocol = protocols.get(prefix + "." if prefix else "")
        member = getattr(protocol, name, None) if protocol is not None else None
        if member is None or op.call is not None:
            continue
        params = signature(member).parameters
        takes_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
        for field in op.fields:
            if field.at == "agent" and "agent" not in params:
                continue
            assert takes_all or field.argument in params, f"{op.name}: {field.argument}"


def test_rows_are_unique_and_well_formed() -> None:
    assert len({(op.method, op.route) for op in OPERATIONS}) == len(OPERATIONS)
    assert len(BY_NAME) == len(OPERATIONS)
    for op in OPERATIONS:
        paths = {f.name for f in op.where("path")}
        assert paths == {p.strip("{}") for p in op.path.split("/") if p.startswith("{")}, op.name
        assert op.namespaced or op.handler == "own", op.name
        for f in op.where("spread"):
            assert f.encode is not None and f.decode is not None, op.name


def test_the_surface_exports_what_it_has() -> None:
    for name in synapsedb.surface.__all__:
        assert hasattr(synapsedb.surface, name), name


def test_the_architecture_page_names_what_exists() -> None:
    """Every source file docs/architecture.md names exists, and its example is the table's."""
    import re

    page = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.(?:py|md))`", page))
    assert len(named) > 15
    for path in named:
        where = [ROOT / path, ROOT / "src" / "synapsedb" / path, ROOT / "tests" / path]
        where += list((ROOT / "tests").glob(f"*/{path}"))
        assert any(p.exists() for p in where), path
    table = (ROOT / "src" / "synapsedb" / "surface" / "operations.py").read_text()
    example = re.search(r'(Field\("include_ended".*?\)),', page)
    assert example is not None and example.group(1) in table
    row = re.search(r'(Operation\("accesses".*?\),\)\)),', page, re.S)
    assert row is not None and " ".join(row.group(1).split()) in " ".join(table.split())
