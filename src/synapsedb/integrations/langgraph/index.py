"""The store's semantic index: one SynapseDB memory per embedded text of an item.

An item put with an index (the store's ``index`` config, or ``index=[paths]`` on the put) gets
one memory of type ``langgraph-index`` per text found at those paths (LangGraph's path syntax:
``text``, ``items[*].name``, ``{a,b}``; ``$`` is the whole value as JSON). Its id is derived
from the namespace, key and position, so a new put replaces the old entries; it lives on the
namespace's ``lgx:`` entity and its metadata names the item (``lg_key``), the path
(``lg_path``) and every prefix of the namespace (``lg_prefixes``), so a search under a prefix
is one filter inside SynapseDB's vector search.

Vectors come from the index's ``embed`` (a LangChain ``Embeddings`` or a function, as for
LangGraph's own stores) or, with ``embed`` left out, from SynapseDB's embedder (the text is
the memory's content).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import IndexConfig
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from ...errors import ValidationError
from .naming import INDEX_PREFIX, STORE_PREFIX, encode_prefix, index_entity, index_memory_id

__all__ = ["INDEX_TYPE", "MAX_CONTENT_CHARS", "Index", "IndexEntry"]

INDEX_TYPE = "langgraph-index"
MAX_CONTENT_CHARS = 8000  # <= 32 KiB of UTF-8 at any character width: SynapseDB's content limit
MAX_K = 1000  # SynapseDB's largest query k
MAX_KEYS_PER_QUERY = 100  # keys named in one query filter (keeps it under the filter size limit)


@dataclass(frozen=True, slots=True)
class IndexEntry:
    path: str
    text: str


class Index:
    """An index config, checked and with its embedder built (None: SynapseDB's own)."""

    def __init__(self, config: IndexConfig) -> None:
        if not isinstance(config, Mapping):
            raise ValidationError(
                "index: expected an object with dims, embed and fields", field="index"
            )
        unknown = set(config) - {"dims", "embed", "fields"}
        if unknown:
            raise ValidationError(
                f"index.{sorted(unknown)[0]}: unknown field; allowed: dims, embed, fields",
                field=f"index.{sorted(unknown)[0]}",
            )
        dims = config.get("dims")
        if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims < 1):
            raise ValidationError(
                f"index.dims: expected a positive integer, got {dims!r}", field="index.dims"
            )
        self.dims = dims
        embed = config.get("embed")
        self.embeddings = None if embed in (None, "synapsedb") else ensure_embeddings(embed)
        fields = config.get("fields") or ["$"]
        self.fields = self._paths(fields, "index.fields")

    @staticmethod
    def _paths(fields: Any, field: str) -> list[tuple[str, Any]]:
        if isinstance(fields, str) or not isinstance(fields, Sequence):
            raise ValidationError(f"{field}: expected a list of paths, got {fields!r}", field=field)
        out: list[tuple[str, Any]] = []
        for i, path in enumerate(fields):
            if not isinstance(path, str) or not path:
                raise ValidationError(
                    f"{field}[{i}]: expected a path string, got {path!r}", field=f"{field}[{i}]"
                )
            out.append((path, path if path == "$" else tokenize_path(path)))
        return out

    def entries(self, value: Mapping[str, Any], paths: list[str] | None) -> list[IndexEntry]:
        """The texts of a value to embed, as InMemoryStore picks them (``path.i`` when a path
        yields several)."""
        chosen = self.fields if paths is None else self._paths(paths, "index")
        out: list[IndexEntry] = []
        for path, tokens in chosen:
            texts = get_text_at_path(value, tokens)
            if len(texts) == 1:
                out.append(IndexEntry(path, texts[0]))
            else:
                out.extend(IndexEntry(f"{path}.{i}", t) for i, t in enumerate(texts))
        return out

    def vectors(self, texts: list[str]) -> list[list[float]] | None:
        if self.embeddings is None or not texts:
            return None
        vecs = self.embeddings.embed_documents(texts)
        if len(vecs) != len(texts):
            raise ValidationError(
                f"index.embed: returned {len(vecs)} vectors for {len(texts)} texts",
                field="index.embed",
            )
        return [list(v) for v in vecs]

    def query_args(self, query: str) -> dict[str, Any]:
        """How SynapseDB is asked: by the caller's query vector, or by the text."""
        if self.embeddings is None:
            return {"text": query}
        return {"embedding": list(self.embeddings.embed_query(query))}


def index_memories(
    entity: str,
    labels: tuple[str, ...],
    key: str,
    entries: list[IndexEntry],
    vectors: list[list[float]] | None,
    ttl_s: float | None,
) -> list[dict[str, Any]]:
    """The ``write_many`` items of an item's index entries."""
    prefixes = [encode_prefix(labels[:n]) for n in range(1, len(labels) + 1)]
    out = []
    for i, entry in enumerate(entries):
        content = entry.text[:MAX_CONTENT_CHARS] if entry.text.strip() else "(empty)"
        mem: dict[str, Any] = {
            "entity": index_entity(entity),
            "id": index_memory_id(entity, key, i),
            "content": content,
            "type": INDEX_TYPE,
            "metadata": {"lg_key": key, "lg_path": entry.path, "lg_prefixes": prefixes},
        }
        if vectors is not None:
            mem["embedding"] = vectors[i]
        if ttl_s is not None:
            mem["ttl"] = ttl_s
        out.append(mem)
    return out


def ranked_hits(
    ns: Any,
    index: Index,
    query: str,
    prefix: tuple[str, ...],
    wanted: Mapping[tuple[str, str], int],
    totals: Mapping[str, int],
    need: int,
) -> Iterator[tuple[float, str, str]]:
    """(score, store entity, key) of the index entries of the ``wanted`` items (store entity,
    key -> number of entries), best first, by cosine similarity. ``totals`` counts the
    entries of every item under the prefix, per entity. Exact: when they all fit in one query
    it is one query (filtered by the prefix). Otherwise the best ``MAX_K`` entries under the
    prefix come first: when they hold ``need`` distinct wanted items, no other item can rank
    above those (its best entry scores at most the last hit's). Only when they do not is
    every entity holding wanted items asked (an entity past the limit by key, in groups that
    fit), and the answers merged."""
    if not any(wanted.values()):
        return
    args = index.query_args(query)
    total = sum(totals.values())
    flt = {"lg_prefixes": {"$contains": encode_prefix(prefix)}} if prefix else None
    hits = list(_query(ns, args, flt, None, min(total, MAX_K)))
    if total > MAX_K and len({(h[1], h[2]) for h in hits if (h[1], h[2]) in wanted}) < need:
        hits = []
        by_entity: dict[str, list[tuple[str, int]]] = {}
        for (entity, key), n in wanted.items():
            if n:
                by_entity.setdefault(entity, []).append((key, n))
        for entity, keys in by_entity.items():
            if totals.get(entity, 0) <= MAX_K:
                hits.extend(_query(ns, args, None, index_entity(entity), totals[entity]))
                continue
            for group in _groups(keys):
                by_key: dict[str, Any] = {"lg_key": {"$in": [k for k, _ in group]}}
                k = sum(n for _, n in group)
                hits.extend(_query(ns, args, by_key, index_entity(entity), k))
    hits.sort(key=lambda h: -h[0])
    yield from (h for h in hits if (h[1], h[2]) in wanted)


def _groups(keys: list[tuple[str, int]]) -> Iterator[list[tuple[str, int]]]:
    group: list[tuple[str, int]] = []
    size = 0
    for key, n in keys:
        if group and (size + n > MAX_K or len(group) >= MAX_KEYS_PER_QUERY):
            yield group
            group, size = [], 0
        group.append((key, min(n, MAX_K)))
        size += min(n, MAX_K)
    if group:
        yield group


def _query(
    ns: Any, args: dict[str, Any], flt: dict[str, Any] | None, entity: str | None, k: int
) -> Iterator[tuple[float, str, str]]:
    result = ns.query(
        mode="vector", filter=flt, entity=entity, types=[INDEX_TYPE], k=k, dedup=False, **args
    )
    for hit in result.hits:
        key = hit.metadata.get("lg_key")
        if isinstance(key, str) and hit.entity.startswith(INDEX_PREFIX):
            yield float(hit.score), STORE_PREFIX + hit.entity[len(INDEX_PREFIX) :], key
