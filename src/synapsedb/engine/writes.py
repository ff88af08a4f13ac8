"""Writes of a namespace: memories, KV facts and stream events (the ``_Writes`` mixin).

Every write checks its arguments first (so bad input changes nothing), then passes the
namespace's write rate limit, brings the cold memories it changes back to hot, fills in
embeddings, and commits one op through the database's single writer.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

from ..errors import ValidationError
from ..types import Event, Fact, Memory
from ..validation import (
    check_entity,
    check_key,
    check_ttl,
    check_version,
    dump_json,
    memory_input,
    memory_patch,
)
from .handle import NamespaceHandle
from .inputs import BatchItems, check_memory_id, event_fields, memory_batch
from .ops import AppendEvent, DeleteFact, DeleteMemory, SetFact, UpdateMemory, WriteMemories

__all__: list[str] = []


class _Writes(NamespaceHandle):
    """``write``, ``write_many``, ``update``, ``delete``, ``set`` and ``append``."""

    __slots__ = ()

    # -- memories ---------------------------------------------------------------------------------

    def write(
        self, entity: str, memory: str | Mapping[str, Any], *, agent: str | None = None
    ) -> Memory:
        item = memory_input(entity, memory, self._core.settings, agent=self._agent_for(agent))
        self._before_write(1, (item.id,))
        self._core.embedding.fill(self._core.state(self.name), [item])
        (rec,) = self._core.submit(WriteMemories(self.name, [item], [""]))
        return rec.to_public()

    def write_many(
        self,
        items: Sequence[Mapping[str, Any] | tuple[str, str | Mapping[str, Any]]],
        *,
        agent: str | None = None,
    ) -> list[Memory]:
        # Python's cyclic garbage collector is paused while the batch is built and applied (its
        # previous state is restored): a batch allocates several objects per memory, and
        # letting the collector rescan every stored record a dozen times per batch cost ~10%
        # of throughput.
        with _gc_paused():
            return self._write_many(items, agent)

    def _write_many(self, items: BatchItems, agent: str | None) -> list[Memory]:
        inputs, prefixes = memory_batch(items, self._core.settings, lambda: self._agent_for(agent))
        if not inputs:
            return []
        self._before_write(len(inputs), (it.id for it in inputs))
        self._core.embedding.fill(self._core.state(self.name), inputs)
        recs = self._core.submit(WriteMemories(self.name, inputs, prefixes))
        return [r.to_public() for r in recs]

    def update(
        self,
        id: str,
        changes: Mapping[str, Any],
        *,
        if_version: int | None = None,
        agent: str | None = None,
    ) -> Memory:
        patch = memory_patch(changes, self._core.settings)
        self._before_write(1, (check_memory_id(id),))
        if "content" in patch and "vec" not in patch:  # keep the vector in step with the text
            state = self._core.state(self.name)
            vec = self._core.embedding.embed_text(state, patch["content"])
            if vec is not None:
                patch["vec"], patch["vec_source"] = vec, self._core.embedding.source_in(state)
        op = UpdateMemory(
            self.name,
            check_memory_id(id),
            patch,
            check_version(if_version, "if_version"),
            self._agent_for(agent),
        )
        return self._core.submit(op).to_public()

    @overload
    def delete(
        self, id: str, /, *, if_version: int | None = None, agent: str | None = None
    ) -> Memory: ...
    @overload
    def delete(
        self, entity: str, key: str, /, *, if_version: int | None = None, agent: str | None = None
    ) -> Fact: ...
    def delete(
        self,
        target: str,
        key: str | None = None,
        /,
        *,
        if_version: int | None = None,
        agent: str | None = None,
    ) -> Memory | Fact:
        expected = check_version(if_version, "if_version")
        who = self._agent_for(agent)
        if key is not None:
            op = DeleteFact(self.name, check_entity(target), check_key(key), expected, who)
            return self._core.submit(op).to_public()
        mid = check_memory_id(target)
        self._before_write(1, (mid,))
        return self._core.submit(DeleteMemory(self.name, mid, expected, who)).to_public()

    # -- KV facts -------------------------------------------------------------------------------

    def set(
        self,
        entity: str,
        key: str,
        value: Any,
        *,
        if_version: int | None = None,
        ttl: float | None = None,
        agent: str | None = None,
    ) -> Fact:
        entity, key = check_entity(entity), check_key(key)
        value_json = dump_json(value, "value", self._core.settings.max_value_bytes)
        self._before_write(1)
        op = SetFact(
            self.name,
            entity,
            key,
            value_json,
            check_version(if_version, "if_version"),
            check_ttl(ttl),
            self._agent_for(agent),
        )
        return self._core.submit(op).to_public()

    # -- streams --------------------------------------------------------------------------------

    def append(
        self,
        entity: str,
        event: str | Mapping[str, Any],
        *,
        stream: str | None = None,
        agent: str | None = None,
        searchable: bool = True,
    ) -> Event:
        settings = self._core.settings
        entity = check_entity(entity)
        stream = entity if stream is None else check_entity(stream, "stream")
        if not isinstance(searchable, bool):
            raise ValidationError("searchable: expected true or false", field="searchable")
        event, data_json = event_fields(event, settings)
        item = memory_input(entity, event, settings, agent=self._agent_for(agent))
        self._before_write(1)
        if searchable:
            self._core.embedding.fill(self._core.state(self.name), [item])
        erec, _ = self._core.submit(AppendEvent(self.name, stream, item, data_json, searchable))
        return erec.to_public()


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
