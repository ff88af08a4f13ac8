"""The namespace handle: every read and write of memories, KV facts and streams.

Everything lives inside exactly one namespace; nothing crosses namespaces. Reads take
``as_of=`` (ISO-8601, epoch seconds or datetime) and then return exactly what was visible at
that system time: later versions hidden, earlier versions as they were, things deleted later
still there, things created later absent.

One rule keeps ``get``, ``delete`` and ``history`` short: one positional argument is a memory
id; an entity and a key address a KV fact.

:class:`Namespace` is assembled from parts, one concept per module: writes of memories, facts
and events (``writes``), reads and time travel (``reads``), argument parsing (``inputs``),
forgetting and upkeep (``retention``), lineage, audit and snapshots (``provenance``), and
here retrieval, export/import and the memory loop. Every part reaches the engine through the
database's :class:`~synapsedb.engine.core.EngineCore`, bound once per handle.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ValidationError
from ..times import TimeLike
from ..types import QueryResult, Recalled, Remembered
from .core import MemoryLoopSeam
from .importing import ImportNamespace, import_batch
from .inputs import MAX_LIMIT
from .provenance import _Provenance
from .reads import _Reads
from .retention import _Retention
from .retrieval import run_query
from .transfer import export_records
from .writes import _Writes

if TYPE_CHECKING:
    from .database import Database

__all__ = ["MAX_LIMIT", "Namespace"]


class Namespace(_Writes, _Reads, _Retention, _Provenance):
    """Handle on one namespace of a :class:`~synapsedb.engine.database.Database`.

    It binds the database's :class:`~synapsedb.engine.core.EngineCore` once, here, and every
    method calls the core directly."""

    __slots__ = ("_agent", "_core", "_db", "name")

    def __init__(self, db: Database, name: str, agent: str | None) -> None:
        self._db = db  # the query path (retrieval.run_query) still takes the database
        self._core = db.core
        self.name = name
        self._agent = agent

    def __repr__(self) -> str:
        return f"<synapsedb.Namespace {self.name!r}>"

    # -- retrieval ------------------------------------------------------------------------------

    def query(
        self,
        text: str | None = None,
        *,
        embedding: Sequence[float] | None = None,
        entity: str | None = None,
        filter: Mapping[str, Any] | None = None,
        k: int = 10,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        as_of: TimeLike | None = None,
        valid_at: TimeLike | None = None,
        min_score: float | None = None,
        types: Iterable[str] | None = None,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        dedup: bool = True,
        explain: bool = False,
        agent: str | None = None,
        tiers: Sequence[str] | None = None,
        include_ended: bool = False,
    ) -> QueryResult:
        """Find memories by meaning and keywords, inside filters, as of any moment.

        ``text`` is embedded (when an embedder is configured) and matched by BM25; an
        ``embedding`` given by the caller is used as is. An entity named in the text (a token
        like ``user:4321`` that exists in the namespace) scopes the search to that entity and is
        not searched as text; ``entity=`` wins. ``filter`` uses the filter language
        (docs/concepts.md); ``types``, ``since`` <= ts < ``until`` are shorthands. Near-identical
        hits (cosine >= 0.95, or the same text) collapse into the best one (``duplicates``).
        ``as_of`` is what was known then (system time); ``valid_at`` keeps the memories true
        then (valid time: ``valid_from`` <= T < ``valid_to``, an absent bound open). Without
        ``valid_at``, a memory whose valid time ended (``valid_to`` at or before the read's
        time: replaced by an update) is left out; ``include_ended=True`` keeps it.
        """
        return run_query(
            self._core, self.name, self._time(as_of), text=text, embedding=embedding,
            entity=entity, filter=filter, k=k, mode=mode, min_score=min_score, types=types,
            since=since, until=until, dedup=dedup, explain=explain, valid_at=valid_at,
            agent=self._agent_for(agent), tiers=tiers, include_ended=include_ended,
        )  # fmt: skip

    def export(self) -> Iterator[dict[str, Any]]:
        """Every stored row of the namespace as JSON-ready records, for ``import_records`` on
        another database (or server): nothing is lost, history and lineage included."""
        self._core.flush_log()
        return export_records(self._core.storage, self.name)

    def import_records(self, records: Iterable[dict[str, Any]]) -> int:
        """Write an ``export()`` stream into this namespace, which must be empty, in one
        transaction (all or nothing). Returns the number of memory versions imported."""
        data = import_batch(self.name, records, self._core.settings, self._core.now_us())
        return int(self._core.submit(ImportNamespace(self.name, data)))

    # -- the memory loop (synapsedb.memory_loop, through the Database.memory_loop seam) ----------

    def remember(
        self,
        messages: Any,
        *,
        entity: str,
        session: str | None = None,
        agent: str | None = None,
        memories: Sequence[Mapping[str, Any]] | None = None,
        wait: bool = False,
    ) -> Remembered:
        """Store conversation turns in the session's stream and extract typed memories from
        them (``fact``, ``preference``, ``procedure``, ``episode``) with the configured LLM:
        queued and run in the background, or inline with ``wait=True``. Each extracted memory
        is resolved against the entity's similar memories as ADD/UPDATE/DELETE/NOOP
        (docs/memory-loop.md). ``memories`` are memories the caller extracted itself."""
        return self._loop().remember(self, messages, entity=entity, session=session,
                                     agent=self._agent_for(agent), memories=memories,
                                     wait=wait)  # fmt: skip

    def recall(
        self,
        messages_or_text: Any,
        *,
        entity: str | None = None,
        budget_tokens: int | None = None,
        k: int | None = None,
        threshold: float | None = None,
        rewrite: str | None = None,
        agent: str | None = None,
    ) -> Recalled:
        """The memories a conversation's last user turn needs, over a similarity threshold,
        rendered as a context block within ``budget_tokens`` (docs/memory-loop.md)."""
        return self._loop().recall(self, messages_or_text, entity=entity,
                                   budget_tokens=budget_tokens, k=k, threshold=threshold,
                                   rewrite=rewrite, agent=self._agent_for(agent))  # fmt: skip

    def _loop(self) -> MemoryLoopSeam:
        loop = self._core.memory_loop
        if loop is None:
            raise ValidationError(
                "remember/recall: this database has no memory loop; open it with "
                "synapsedb.open() or set db.memory_loop = synapsedb.memory_loop.MemoryLoop(...)",
                field="memory_loop",
            )
        return loop
