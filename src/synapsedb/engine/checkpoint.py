"""Checkpoints: a namespace's catalog and memory versions in one file, read back instead of
replaying its log.

A checkpoint (``indexes/<namespace>.ckpt``, a :mod:`~synapsedb.index.packfile`) holds what
replaying the namespace's memory versions up to a system time, its *mark*, builds: the catalog's
typed columns (about 63 bytes a row), its float32 vectors, its metadata postings and code
dictionaries; one record per version (tombstones and erased ones too) with every field but the
texts, the texts in one blob, the memory ids with a hash index, each entity's ids; the
namespace's cold memories and its live count and size. Opening a namespace from it reads the
small sections whole and maps the large ones (the vectors, copy-on-write; the version table and
the texts, read-only), builds records only for what is asked (engine/stored.py), and replays
from the log only the versions after the mark.

A checkpoint is used only while the log still agrees with it: the :class:`CheckpointMark` read
from the same snapshot as those versions (their count up to the mark, how many are erased, the
last one's key, the namespace's tier moves and erasure audit rows) must equal the one stored
in it. Anything else (a version imported with an older time, an erasure, a tier move, a torn
or foreign file, another format) makes the open replay the whole log, as without one. The
engine deletes a namespace's checkpoint before committing an erasure to it and whenever it
reloads the namespace from the log, so erased text never stays in a checkpoint file.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..index.catalog import INF, Catalog, Codes
from ..index.packfile import BLOCK, Pack, PackError, write_pack
from ..index.timeline import Timelines
from ..storage.base import CheckpointMark
from .state import NamespaceState
from .stored import (
    DELETED,
    ERASED,
    HAS_AGENT,
    HAS_EXPIRY,
    HAS_TTL,
    PINNED,
    VERSION,
    Chains,
    EntityIds,
    RowRecords,
    Versions,
    id_hash,
)

__all__ = ["FORMAT", "MAP_BYTES", "Checkpoint", "Restored", "path_of", "read", "save"]

log = logging.getLogger("synapsedb.checkpoint")

FORMAT = "synapsedb-checkpoint-1"
# a section larger than this is mapped rather than read (100,000 namespaces of 100 memories
# each read whole: one read each, no mapping held)
MAP_BYTES = 8 << 20
# room for rows added after an open, left as a hole after the vectors: a fraction of them
SPARE = 0.25

_COLUMNS = (
    "from_us",
    "to_us",
    "exp_us",
    "ts_us",
    "salience",
    "entity",
    "type",
    "agent",
    "pinned",
    "has_vec",
    "inv_norm",
    "live",
    "label",
)


def path_of(directory: Path, ns: str) -> Path:
    return directory / f"{ns}.ckpt"


def _strings(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``names`` as one utf-8 blob and the offsets of each (one more than names)."""
    encoded = [name.encode() for name in names]
    off = np.zeros(len(encoded) + 1, np.int64)
    if encoded:
        np.cumsum([len(e) for e in encoded], out=off[1:])
    return np.frombuffer(b"".join(encoded), np.uint8), off


def _unstrings(blob: np.ndarray, off: np.ndarray) -> list[str]:
    data = bytes(blob)
    bounds = off.tolist()
    return [data[bounds[i] : bounds[i + 1]].decode() for i in range(len(bounds) - 1)]


# -- writing ------------------------------------------------------------------------------------


def _version_table(state: NamespaceState, n_rows: int) -> dict[str, np.ndarray]:
    """The version table and id sections of ``state`` (see the module docstring)."""
    cat = state.catalog
    entities = list(state.entity_mems)
    ent_code = {e: i for i, e in enumerate(entities)}
    types, agents = Codes(), Codes()
    for name in cat.types.names:
        types.code(name)
    for name in cat.agents.names:
        agents.code(name)
    table_rows: list[tuple[Any, ...]] = []
    texts: list[bytes] = []
    ids: list[str] = []
    id_entity: list[int] = []
    id_chain = [0]
    row_version = np.full(n_rows, -1, np.int32)
    at = 0
    for mid, chain in state.mems.items():
        code = len(ids)
        ids.append(mid)
        id_entity.append(ent_code[chain[0].entity])
        for rec in chain:
            content, meta = rec.content.encode(), rec.meta_json.encode()
            flags = (
                (DELETED if rec.deleted else 0)
                | (ERASED if rec.erased else 0)
                | (PINNED if rec.pinned else 0)
                | (HAS_TTL if rec.ttl is not None else 0)
                | (HAS_EXPIRY if rec.expires_us is not None else 0)
                | (HAS_AGENT if rec.agent is not None else 0)
            )
            row = rec.row if 0 <= rec.row < n_rows else -1
            if row >= 0 and not rec.deleted:
                row_version[row] = len(table_rows)
            table_rows.append(
                (
                    code,
                    rec.version,
                    rec.sys_us,
                    rec.created_us,
                    row,
                    flags,
                    0.0 if rec.ttl is None else rec.ttl,
                    0 if rec.expires_us is None else rec.expires_us,
                    types.code(rec.type),
                    -1 if rec.agent is None else agents.code(rec.agent),
                    rec.salience,
                    rec.ts_us,
                    at,
                    at + len(content),
                    at + len(content) + len(meta),
                )
            )
            texts += (content, meta)
            at += len(content) + len(meta)
        id_chain.append(len(table_rows))
    if (row_version < 0).any():
        raise ValueError("a catalog row that no version holds")
    id_blob, id_off = _strings(ids)
    hashes = np.array([id_hash(mid) for mid in ids], np.uint32)
    by_hash = np.argsort(hashes, kind="stable").astype(np.int32)
    ent_ids: list[int] = []
    ent_off = [0]
    id_code = {mid: i for i, mid in enumerate(ids)}
    for e in entities:
        ent_ids += [id_code[mid] for mid in state.entity_mems[e]]
        ent_off.append(len(ent_ids))
    names = {"entities": entities, "types": types.names, "agents": agents.names}
    out = {
        "versions": np.array(table_rows, dtype=VERSION),
        "texts": np.frombuffer(b"".join(texts), np.uint8),
        "ids": id_blob,
        "id_off": id_off,
        "id_chain": np.array(id_chain, np.int64),
        "id_entity": np.array(id_entity, np.int32),
        "hashes": hashes[by_hash],
        "by_hash": by_hash,
        "row_version": row_version,
        "entity_off": np.array(ent_off, np.int64),
        "entity_ids": np.array(ent_ids, np.int32),
    }
    for key, values in names.items():
        out[f"{key}_blob"], out[f"{key}_off"] = _strings(values)
    return out


def _postings(cat: Catalog, n: int) -> dict[str, np.ndarray]:
    keys: list[Any] = []
    off = [0]
    parts: list[np.ndarray] = []
    total = 0
    for (path, role), bucket in list(cat.meta_post.items()):
        for key, rows in list(bucket.items()):
            idx = np.frombuffer(rows, dtype=np.int32)
            idx = idx[: int(idx.searchsorted(np.int32(min(n, 2**31 - 1))))]
            if not idx.shape[0]:
                continue
            keys.append([list(path), role, None if key is None else list(key)])
            parts.append(idx.copy())
            total += idx.shape[0]
            off.append(total)
    return {
        "post_keys": np.frombuffer(orjson.dumps(keys), np.uint8),
        "post_off": np.array(off, np.int64),
        "post_rows": np.concatenate(parts) if parts else np.zeros(0, np.int32),
    }


def _vector_chunks(cat: Catalog, n: int) -> Iterator[bytes | np.ndarray]:
    """The first ``n`` rows of the vectors, a block at a time: rows the catalog maps from a
    file are read from the file (not through the mapping, which would make them resident)."""
    assert cat.vectors is not None
    start = 0
    mapped = cat.vec_rows
    if mapped is not None:
        while start < min(n, mapped.rows):
            stop = min(n, mapped.rows, start + max(1, BLOCK // mapped.row_bytes))
            yield mapped.read(start, stop)
            start = stop
    step = max(1, BLOCK // (4 * cat.vectors.shape[1]))
    for lo in range(start, n, step):
        yield cat.vectors[lo : min(n, lo + step)]


def save(path: Path, state: NamespaceState, mark_us: int, mark: CheckpointMark) -> None:
    """Write ``state`` as the checkpoint at ``mark_us`` (``mark``: the log's mark there).
    The caller keeps writers out of the namespace meanwhile."""
    cat = state.catalog
    n = cat.n
    sections: dict[str, Any] = {name: getattr(cat, name)[:n] for name in _COLUMNS}
    sections.update(_version_table(state, n))
    sections.update(_postings(cat, n))
    for key, codes in (
        ("cat_entities", cat.entities),
        ("cat_types", cat.types),
        ("cat_agents", cat.agents),
        ("labels", cat.labels),
    ):
        sections[f"{key}_blob"], sections[f"{key}_off"] = _strings(codes.names)
    cold = [[mid, entity, state.cold_expiry.get(mid)] for mid, entity in state.cold.items()]
    sections["cold"] = np.frombuffer(orjson.dumps(cold), np.uint8)
    dim = cat.dim if cat.vectors is not None else None
    spare = 0
    if dim is not None:
        sections["vectors"] = ("<f4", (n, dim), _vector_chunks(cat, n))  # last: room after it
        spare = int(n * SPARE) * 4 * dim
    meta = {
        "format": FORMAT,
        "ns": state.name,
        "mark_us": mark_us,
        "mark": list(mark),
        "rows": n,
        "dim": dim,
        "latest_us": cat.latest_us,
        "live": state.live,
        "hot_bytes": state.hot_bytes,
    }
    write_pack(path, meta, sections, spare_bytes=spare)


# -- reading ------------------------------------------------------------------------------------


@dataclass
class Checkpoint:
    """An open checkpoint file: its mark, and its sections on demand."""

    pack: Pack
    mark_us: int
    mark: CheckpointMark

    def close(self) -> None:
        self.pack.close()


def read(path: Path, ns: str) -> Checkpoint | None:
    """The checkpoint of ``ns`` at ``path`` (its header read and checked), or None when there
    is none or it cannot be used (then the file is deleted)."""
    if not path.exists():
        return None
    try:
        pack = Pack(path)
    except PackError as exc:
        log.warning("dropping checkpoint %s: %s", path, exc)
        path.unlink(missing_ok=True)
        return None
    meta = pack.meta
    try:
        if meta.get("format") != FORMAT or meta.get("ns") != ns:
            raise PackError(f"{path}: not a checkpoint of namespace {ns!r} in {FORMAT}")
        mark = CheckpointMark(*meta["mark"])
        return Checkpoint(pack, int(meta["mark_us"]), mark)
    except (PackError, TypeError, KeyError, ValueError) as exc:
        log.warning("dropping checkpoint %s: %s", path, exc)
        pack.close()
        path.unlink(missing_ok=True)
        return None


@dataclass
class Restored:
    """What a checkpoint gives a namespace's state (loader.py installs it)."""

    mark_us: int
    dim: int | None
    catalog: Catalog
    mems: Chains
    entity_mems: EntityIds
    live: int
    hot_bytes: int
    cold: dict[str, str]
    cold_expiry: dict[str, int]

    def install(self, state: NamespaceState) -> None:
        state.catalog = self.catalog
        state.mems = self.mems
        state.entity_mems = self.entity_mems
        state.live, state.hot_bytes = self.live, self.hot_bytes
        for mid, entity in self.cold.items():
            state.cold[mid] = entity
            state.cold_by_entity.setdefault(entity, set()).add(mid)
        state.cold_expiry.update(self.cold_expiry)


def restore(ck: Checkpoint) -> Restored:
    """The catalog, chains and the rest that ``ck`` holds; PackError when a section is
    damaged."""
    pack = ck.pack
    meta = pack.meta

    def get(name: str) -> np.ndarray:
        if int(pack.sections[name]["nbytes"]) > MAP_BYTES:
            return pack.view(name)
        return pack.array(name)

    def names(key: str) -> list[str]:
        return _unstrings(pack.array(f"{key}_blob"), pack.array(f"{key}_off"))

    n, dim = int(meta["rows"]), meta["dim"]
    cat = Catalog(dim)
    for name in _COLUMNS:
        column = pack.array(name)
        if column.shape[0] != n:
            raise PackError(f"{pack.path}: column {name} holds {column.shape[0]} rows, not {n}")
        setattr(cat, name, column)
    if dim is not None:
        if int(pack.sections["vectors"]["nbytes"]) > MAP_BYTES:
            rows = pack.mapped("vectors", capacity=n)
            cat.vec_rows, cat.vectors = rows, rows.array
        else:
            cat.vectors = pack.array("vectors")
    for key, codes in (
        ("cat_entities", cat.entities),
        ("cat_types", cat.types),
        ("cat_agents", cat.agents),
        ("labels", cat.labels),
    ):
        for name in names(key):
            codes.code(name)
    for code, name in enumerate(cat.labels.names):
        cat.index_label(code, name)
    keys = orjson.loads(pack.blob("post_keys"))
    off, rows_all = pack.array("post_off").tolist(), pack.array("post_rows")
    for i, (path, role, key) in enumerate(keys):
        bucket = cat.meta_post.setdefault((tuple(path), role), {})
        rows_i: array[int] = array("i")
        rows_i.frombytes(rows_all[off[i] : off[i + 1]].tobytes())
        bucket[None if key is None else (key[0], key[1])] = rows_i
    cat.n_ttl = int(np.count_nonzero(cat.exp_us[:n] != INF))
    cat.latest_us = int(meta["latest_us"])
    cat.timelines = Timelines.of_columns(cat.entity[:n], cat.ts_us[:n])
    versions = Versions(
        get("versions"),
        get("texts"),
        get("ids"),
        pack.array("id_off"),
        pack.array("id_chain"),
        pack.array("id_entity"),
        get("hashes"),
        get("by_hash"),
        pack.array("row_version"),
        names("entities"),
        names("types"),
        names("agents"),
    )
    if versions.n_rows != n:
        raise PackError(f"{pack.path}: {versions.n_rows} rows of versions, not {n}")
    recs = RowRecords(versions, cat)
    cat.recs = recs
    cat.n = n
    cat.defer_keywords()
    chains = Chains(versions, recs)
    entity_ids = EntityIds(versions, pack.array("entity_off"), pack.array("entity_ids"))
    cold: dict[str, str] = {}
    cold_expiry: dict[str, int] = {}
    for mid, entity, expires in orjson.loads(pack.blob("cold")):
        cold[mid] = entity
        if expires is not None:
            cold_expiry[mid] = expires
    return Restored(
        ck.mark_us,
        dim,
        cat,
        chains,
        entity_ids,
        int(meta["live"]),
        int(meta["hot_bytes"]),
        cold,
        cold_expiry,
    )
