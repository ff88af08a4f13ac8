"""Where answers came from and who did what (the ``_Provenance`` mixin): ``record_answer``,
``lineage`` and ``audit``, over the query log and version history kept by
:mod:`synapsedb.engine.lineage`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ValidationError
from ..times import TimeLike, to_us
from ..types import AuditEntry, Lineage
from ..validation import check_agent, check_entity, check_id, check_id_list
from .handle import NamespaceHandle
from .inputs import MAX_LIMIT, check_limit
from .lineage import RecordAnswer, audit, lineage

__all__: list[str] = []

MAX_ANSWER_ENTITIES = 16  # entities one answer may be about


def check_entities(value: Any) -> list[str]:
    """``record_answer``'s entities: a list of entity names (duplicates dropped), or 400."""
    if value is None:
        return []
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ValidationError("entities: expected a list of entity names", field="entities")
    if len(value) > MAX_ANSWER_ENTITIES:
        raise ValidationError(
            f"entities: {len(value)} entities, over the limit of {MAX_ANSWER_ENTITIES}",
            field="entities",
            limit=MAX_ANSWER_ENTITIES,
        )
    names = [check_entity(e, f"entities[{i}]") for i, e in enumerate(value)]
    return list(dict.fromkeys(names))


class _Provenance(NamespaceHandle):
    """``record_answer``, ``lineage`` and ``audit``."""

    __slots__ = ()

    def record_answer(
        self,
        answer_id: str,
        query_ids: Sequence[str],
        *,
        agent: str | None = None,
        text: str | None = None,
        cited: Sequence[str] | None = None,
        entities: Sequence[str] | None = None,
    ) -> Lineage:
        answer_id = check_id(answer_id, "answer_id")
        qids = check_id_list(query_ids, "query_ids", MAX_LIMIT)
        cites = check_id_list(cited or [], "cited", MAX_LIMIT)
        if text is not None and not isinstance(text, str):
            raise ValidationError("text: expected a string", field="text")
        about = check_entities(entities)
        op = RecordAnswer(
            self.name,
            answer_id,
            qids,
            cites,
            self._agent_for(agent),
            text,
            self._core.storage,
            about,
        )
        self._core.submit(op)
        return self.lineage(answer_id)

    def lineage(self, answer_id: str) -> Lineage:
        return lineage(
            self._core.storage,
            self._core.state(self.name),
            self.name,
            check_id(answer_id, "answer_id"),
        )

    def audit(
        self,
        entity: str | None = None,
        *,
        agent: str | None = None,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        limit: int = 1000,
    ) -> list[AuditEntry]:
        self._core.flush_log()
        return audit(
            self._core.storage,
            self._core.state(self.name),
            self.name,
            entity=None if entity is None else check_entity(entity),
            agent=None if agent is None else check_agent(agent),
            since_us=0 if since is None else to_us(since, "since"),
            until_us=(1 << 62) if until is None else to_us(until, "until"),
            limit=check_limit(limit),
            subject_of=self._core.subject_of,
        )
