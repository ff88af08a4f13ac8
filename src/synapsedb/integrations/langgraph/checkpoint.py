"""``SynapseSaver``: LangGraph's ``BaseCheckpointSaver`` on SynapseDB, with time travel.

The mapping (docs/integrations/langgraph.md), for a thread ``T`` (entity ``lgt:<thread_id>``):

- one small **index fact** per checkpoint on ``T`` (key ``ck:<len(ns)>:<ns><checkpoint_id>``):
  thread, checkpoint namespace, id, parent id, serialized metadata and ``run_id``. Listing a
  thread reads these only; a **latest** fact per checkpoint namespace (``hd:<ns>``, set by
  compare-and-set) names the newest checkpoint, so reading it is two lookups;
- the **checkpoint** itself (``serde.dumps_typed``, channel values inline) on the data entity
  ``lgd:T`` (chunked over several facts when large, :mod:`.blobs`);
- the **pending writes** of a checkpoint on their own entity ``lgw:<sha256>``, one fact per
  ``(task_id, idx)``; a regular write is set with ``if_version=0`` (only if absent), so a
  repeated ``put_writes`` changes nothing, while the special channels (errors, interrupts)
  overwrite, as in LangGraph's own savers.

Every fact is versioned, so ``get_tuple_as_of(config, as_of)`` and ``list(..., as_of=T)`` answer
what the thread held at any past moment, even after ``delete_thread`` (which tombstones; with
``erase_on_delete=True`` it purges instead, and nothing is left to travel back to).
Async methods run the sync ones in a worker thread.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    SerializerProtocol,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)

from ...errors import NotFoundError, ValidationError, VersionConflictError
from ...times import TimeLike
from .blobs import DEFAULT_CHUNK_CHARS, chunk_keys, is_chunk_key, read_blob, write_blob
from .naming import digest_key, is_thread_entity, thread_entity, writes_entity

__all__ = ["SynapseSaver"]


class SynapseSaver(BaseCheckpointSaver[int]):
    """LangGraph checkpoints in a SynapseDB namespace.

    ``db`` is ``synapsedb.open(path)`` or ``synapsedb.connect(url)``; ``namespace`` the
    SynapseDB namespace (one per application; the store should have its own). ``agent`` is
    recorded as the writer. ``erase_on_delete`` makes ``delete_thread``, ``delete_for_runs``
    and ``prune`` erase data from the files instead of leaving tombstones that ``as_of`` reads
    can still see. ``chunk_chars`` is the base64 stored per fact (below the server's
    ``max_value_bytes``).
    """

    def __init__(
        self,
        db: Any,
        namespace: str = "langgraph-checkpoints",
        *,
        serde: SerializerProtocol | None = None,
        agent: str | None = "langgraph",
        erase_on_delete: bool = False,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
    ) -> None:
        super().__init__(serde=serde)
        if not hasattr(db, "namespace") or asyncio.iscoroutinefunction(getattr(db, "close", None)):
            raise ValidationError(
                "db: expected a database from synapsedb.open() or synapsedb.connect() (the "
                "async methods run it in a worker thread)",
                field="db",
            )
        if not isinstance(erase_on_delete, bool):
            raise ValidationError(
                "erase_on_delete: expected true or false", field="erase_on_delete"
            )
        if isinstance(chunk_chars, bool) or not isinstance(chunk_chars, int) or chunk_chars < 1024:
            raise ValidationError(
                f"chunk_chars: expected an integer >= 1024, got {chunk_chars!r}",
                field="chunk_chars",
                limit=1024,
            )
        self._ns = db.namespace(namespace, agent=agent)
        self.namespace = namespace
        self.erase_on_delete = erase_on_delete
        self.chunk_chars = chunk_chars

    def __repr__(self) -> str:
        return f"<SynapseSaver {self.namespace!r}>"

    # -- reads ----------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._get_tuple(config, None)

    def get_tuple_as_of(self, config: RunnableConfig, as_of: TimeLike) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (or the thread's latest in its checkpoint namespace)
        as SynapseDB held it at system time ``as_of``, with the pending writes it had then."""
        return self._get_tuple(config, as_of)

    def _get_tuple(self, config: RunnableConfig, as_of: TimeLike | None) -> CheckpointTuple | None:
        tid, ns_name = _thread(config), _checkpoint_ns(config)
        thread = thread_entity(tid)
        cid = get_checkpoint_id(config)
        if cid is not None:
            if not isinstance(cid, str):
                raise ValidationError(
                    "checkpoint_id: expected a string", field="configurable.checkpoint_id"
                )
            try:
                head = self._ns.get(thread, digest_key("ck", ns_name, cid), as_of=as_of).value
            except NotFoundError:
                return None
        else:
            try:  # the latest checkpoint's id, kept on the thread by every put
                latest = self._ns.get(thread, digest_key("hd", ns_name), as_of=as_of).value
                head = self._ns.get(thread, digest_key("ck", ns_name, latest), as_of=as_of).value
            except NotFoundError:
                return None
        return self._tuple(thread, head, as_of)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
        as_of: TimeLike | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by id) per thread: of ``config``'s thread (and its
        ``checkpoint_ns`` and ``checkpoint_id`` when given) or of every thread, whose metadata
        holds every ``filter`` item, older than ``before``, at most ``limit``; ``as_of`` lists
        them as they were at that moment."""
        if filter is not None and not isinstance(filter, dict):
            raise ValidationError(
                "filter: expected an object of metadata key: value", field="filter"
            )
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ValidationError(f"limit: expected an integer, got {limit!r}", field="limit")
        before_id = get_checkpoint_id(before) if before else None
        if config is not None:
            threads = [thread_entity(_thread(config))]
            ns_name = config["configurable"].get("checkpoint_ns")
            only_id = get_checkpoint_id(config)
        else:
            threads = [e for e in self._ns.entities(as_of=as_of) if is_thread_entity(e)]
            ns_name, only_id = None, None
        left = limit
        for thread in threads:
            heads = sorted(self._heads(thread, as_of), key=lambda h: str(h["id"]), reverse=True)
            for head in heads:
                if ns_name is not None and head["ns"] != ns_name:
                    continue
                if only_id and head["id"] != only_id:
                    continue
                if before_id and str(head["id"]) >= before_id:
                    continue
                metadata = self._metadata(head)
                if filter and not all(metadata.get(k) == v for k, v in filter.items()):
                    continue
                if left is not None and left <= 0:
                    return
                if left is not None:
                    left -= 1
                found = self._tuple(thread, head, as_of, metadata)
                if found is not None:
                    yield found

    def _heads(self, thread: str, as_of: TimeLike | None) -> builtins.list[dict[str, Any]]:
        return [
            f.value
            for f in self._ns.facts(thread, as_of=as_of)
            if f.key.startswith("ck") and isinstance(f.value, dict)
        ]

    def _metadata(self, head: dict[str, Any]) -> dict[str, Any]:
        kind, data = head["meta"]
        return dict(self.serde.loads_typed((kind, _b64(data))))

    def _tuple(
        self,
        thread: str,
        head: dict[str, Any],
        as_of: TimeLike | None,
        metadata: dict[str, Any] | None = None,
    ) -> CheckpointTuple | None:
        tid, ns_name, cid = str(head["thread"]), str(head["ns"]), str(head["id"])
        data_key = digest_key("cp", ns_name, cid)
        try:
            data_head = self._ns.get(_data_entity(thread), data_key, as_of=as_of).value
        except NotFoundError:
            return None  # deleted between the listing and this read
        checkpoint: Checkpoint = self.serde.loads_typed(
            read_blob(self._ns, _data_entity(thread), data_key, data_head, as_of)
        )
        versions = checkpoint.get("channel_versions", {})
        values = checkpoint.get("channel_values", {})
        checkpoint = {
            **checkpoint,
            "channel_values": {k: v for k, v in values.items() if k in versions},
        }
        parent = head.get("parent")
        return CheckpointTuple(
            config=_config(tid, ns_name, cid),
            checkpoint=checkpoint,
            metadata=metadata if metadata is not None else self._metadata(head),  # type: ignore[arg-type]
            parent_config=_config(tid, ns_name, parent) if parent else None,
            pending_writes=self._writes(writes_entity(thread, ns_name, cid), as_of),
        )

    def _writes(self, entity: str, as_of: TimeLike | None) -> builtins.list[tuple[str, str, Any]]:
        rows = []
        for fact in self._ns.facts(entity, as_of=as_of):
            if is_chunk_key(fact.key) or not isinstance(fact.value, dict):
                continue
            w = fact.value
            value = self.serde.loads_typed(read_blob(self._ns, entity, fact.key, w, as_of))
            rows.append(
                (
                    writes_sort_key(str(w["path"]), str(w["task"]), int(w["idx"])),
                    (str(w["task"]), str(w["channel"]), value),
                )
            )
        rows.sort(key=lambda r: r[0])
        return [r[1] for r in rows]

    # -- writes ---------------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        tid, ns_name = _thread(config), _checkpoint_ns(config)
        cid = checkpoint.get("id") if isinstance(checkpoint, dict) else None
        if not isinstance(cid, str) or not cid:
            raise ValidationError(
                "checkpoint.id: expected a non-empty string", field="checkpoint.id"
            )
        thread = thread_entity(tid)
        parent = config["configurable"].get("checkpoint_id")
        meta = get_checkpoint_metadata(config, metadata)
        write_blob(
            self._ns,
            _data_entity(thread),
            digest_key("cp", ns_name, cid),
            self.serde.dumps_typed(checkpoint),
            self.chunk_chars,
        )
        mkind, mdata = self.serde.dumps_typed(meta)
        run_id = meta.get("run_id")
        head = {
            "thread": tid,
            "ns": ns_name,
            "id": cid,
            "parent": parent,
            "meta": [mkind, _text(mdata)],
            "run": str(run_id) if run_id is not None else None,
        }
        self._ns.set(thread, digest_key("ck", ns_name, cid), head)
        self._advance_latest(thread, ns_name, cid)
        return _config(tid, ns_name, cid)

    def _advance_latest(self, thread: str, ns_name: str, cid: str) -> None:
        """Point the thread's latest checkpoint (per checkpoint namespace) at ``cid`` unless a
        newer one is there; compare-and-set, so concurrent puts keep the newest."""
        key = digest_key("hd", ns_name)
        while True:
            try:
                current = self._ns.get(thread, key)
            except NotFoundError:
                current = None
            if current is not None and str(current.value) >= cid:
                return
            try:
                self._ns.set(thread, key, cid, if_version=0 if current is None else current.version)
                return
            except VersionConflictError:
                continue

    def _reset_latest(self, thread: str, names: set[str]) -> None:
        """After checkpoints were dropped: the latest of each checkpoint namespace again."""
        heads = self._heads(thread, None)
        for ns_name in names:
            ids = [str(h["id"]) for h in heads if h["ns"] == ns_name]
            if ids:
                self._ns.set(thread, digest_key("hd", ns_name), max(ids))
            else:
                self._delete_fact(thread, digest_key("hd", ns_name))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        tid, ns_name = _thread(config), _checkpoint_ns(config)
        cid = config["configurable"].get("checkpoint_id")
        if not isinstance(cid, str) or not cid:
            raise ValidationError(
                "checkpoint_id: put_writes needs the checkpoint's id",
                field="configurable.checkpoint_id",
            )
        if not isinstance(task_id, str) or not isinstance(task_path, str):
            raise ValidationError(
                "task_id: expected strings for task_id and task_path", field="task_id"
            )
        entity = writes_entity(thread_entity(tid), ns_name, cid)
        for i, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, i)
            extra = {"task": task_id, "idx": idx, "channel": channel, "path": task_path}
            write_blob(
                self._ns,
                entity,
                digest_key("wr", task_id, str(idx)),
                self.serde.dumps_typed(value),
                self.chunk_chars,
                extra,
                if_version=0 if idx >= 0 else None,
            )

    # -- deletes and copies ---------------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        thread = thread_entity(thread_id)
        heads = self._heads(thread, None)
        self._forget(thread)
        self._forget(_data_entity(thread))
        for head in heads:
            self._forget(writes_entity(thread, str(head["ns"]), str(head["id"])))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        runs = {str(r) for r in run_ids}
        if not runs:
            return
        for thread in [e for e in self._ns.entities() if is_thread_entity(e)]:
            dropped = set()
            for head in self._heads(thread, None):
                if head.get("run") in runs:
                    self._drop(thread, head)
                    dropped.add(str(head["ns"]))
            self._reset_latest(thread, dropped)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        src, dst = thread_entity(source_thread_id), thread_entity(target_thread_id)
        target = str(target_thread_id)
        for head in sorted(self._heads(src, None), key=lambda h: str(h["id"])):
            ns_name, cid = str(head["ns"]), str(head["id"])
            key = digest_key("cp", ns_name, cid)
            try:
                data = self._ns.get(_data_entity(src), key).value
            except NotFoundError:
                continue
            typed = read_blob(self._ns, _data_entity(src), key, data, None)
            write_blob(self._ns, _data_entity(dst), key, typed, self.chunk_chars)
            w_src, w_dst = writes_entity(src, ns_name, cid), writes_entity(dst, ns_name, cid)
            for fact in self._ns.facts(w_src):
                if is_chunk_key(fact.key):
                    continue
                extra = {k: v for k, v in fact.value.items() if k not in ("t", "b", "n", "nonce")}
                typed = read_blob(self._ns, w_src, fact.key, fact.value, None)
                write_blob(self._ns, w_dst, fact.key, typed, self.chunk_chars, extra)
            self._ns.set(dst, digest_key("ck", ns_name, cid), {**head, "thread": target})
            self._advance_latest(dst, ns_name, cid)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if strategy not in ("keep_latest", "delete"):
            raise ValidationError(
                f"strategy: expected 'keep_latest' or 'delete', got {strategy!r}",
                field="strategy",
            )
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            thread = thread_entity(thread_id)
            latest: dict[str, dict[str, Any]] = {}
            heads = self._heads(thread, None)
            for head in heads:
                best = latest.get(head["ns"])
                if best is None or str(head["id"]) > str(best["id"]):
                    latest[head["ns"]] = head
            keep = {id(h) for h in latest.values()}
            for head in heads:
                if id(head) not in keep:
                    self._drop(thread, head)
            self._reset_latest(thread, set(latest))

    def _drop(self, thread: str, head: dict[str, Any]) -> None:
        """Remove one checkpoint: its index fact, its data and its writes."""
        ns_name, cid = str(head["ns"]), str(head["id"])
        self._delete_fact(thread, digest_key("ck", ns_name, cid))
        data_key = digest_key("cp", ns_name, cid)
        try:
            data = self._ns.get(_data_entity(thread), data_key).value
        except NotFoundError:
            data = {}
        for key in [data_key, *chunk_keys(data_key, data)]:
            self._delete_fact(_data_entity(thread), key)
        self._forget(writes_entity(thread, ns_name, cid))

    def _delete_fact(self, entity: str, key: str) -> None:
        with contextlib.suppress(NotFoundError):
            self._ns.delete(entity, key)

    def _forget(self, entity: str) -> None:
        self._ns.forget(entity=entity, purge=self.erase_on_delete)

    # -- async ----------------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def aget_tuple_as_of(
        self, config: RunnableConfig, as_of: TimeLike
    ) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple_as_of, config, as_of)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
        as_of: TimeLike | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        def run() -> builtins.list[CheckpointTuple]:
            return list(self.list(config, filter=filter, before=before, limit=limit, as_of=as_of))

        for item in await asyncio.to_thread(run):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _thread(config: Any) -> str:
    conf = config.get("configurable") if isinstance(config, dict) else None
    if not isinstance(conf, dict) or "thread_id" not in conf:
        raise ValidationError(
            "configurable.thread_id: required in the config", field="configurable.thread_id"
        )
    thread_entity(conf["thread_id"])  # checks it
    return str(conf["thread_id"])


def _checkpoint_ns(config: RunnableConfig) -> str:
    ns_name = config["configurable"].get("checkpoint_ns", "") or ""
    if not isinstance(ns_name, str):
        raise ValidationError(
            "configurable.checkpoint_ns: expected a string", field="configurable.checkpoint_ns"
        )
    return ns_name


def _config(thread_id: str, ns_name: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns_name,
            "checkpoint_id": checkpoint_id,
        }
    }


def _data_entity(thread: str) -> str:
    return "lgd:" + thread


def _text(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _b64(text: str) -> bytes:
    return base64.b64decode(text)
