"""Forgetting and upkeep of a namespace (the ``_Retention`` mixin): ``forget`` (tombstones or
erasure), ``maintain`` (tier moves by salience, TTL expiry, access statistics) and the
namespace's lifecycle settings (``config``, ``configure``)."""

from __future__ import annotations

from typing import Any

from ..errors import ValidationError
from ..times import to_datetime
from ..types import Forgotten, MaintenanceReport, NamespaceConfig
from ..validation import check_entity
from .handle import NamespaceHandle
from .inputs import check_memory_id
from .lifecycle import ConfigureNamespace, MoveTiers, check_config, plan_moves
from .ops import DeleteMemory, ForgetEntity, PurgeExpired

__all__: list[str] = []


class _Retention(NamespaceHandle):
    """``forget``, ``maintain``, ``config`` and ``configure``."""

    __slots__ = ()

    def forget(
        self,
        id: str | None = None,
        *,
        entity: str | None = None,
        purge: bool = False,
        agent: str | None = None,
    ) -> Forgotten:
        who = self._agent_for(agent)
        if not isinstance(purge, bool):
            raise ValidationError("purge: expected true or false", field="purge")
        if (id is None) == (entity is None):
            raise ValidationError("forget: pass a memory id or entity=, not both", field="id")
        if id is not None:
            if purge:
                raise ValidationError(
                    "purge: erasure works on a whole entity; use forget(entity=..., purge=True)",
                    field="purge",
                )
            tomb = self._core.submit(DeleteMemory(self.name, check_memory_id(id), None, who))
            return Forgotten(id, False, 1, 0, 0, 0, to_datetime(tomb.sys_us))
        entity = check_entity(entity)
        state = self._core.state(self.name)
        cold = sorted(state.cold_by_entity.get(entity, ())) if state is not None else []
        if cold and not purge:  # tombstones need the memories hot (a purge reaches disk anyway)
            self._before_write(1, cold)
        cold_versions = (
            len(self._core.storage.read_memory_chains(self.name, cold)) if cold and purge else 0
        )
        op = ForgetEntity(
            self.name, entity, purge, who, self._core.subject_of(entity), self._core.subject_of
        )
        counts = self._core.submit(op)
        pending = False
        if purge:
            counts["memories"] += len(cold)
            counts["versions"] += cold_versions
            self._core.embedding.forget_texts(self.name, entity)
            pending = self._core.erasure_pending
        return Forgotten(
            entity,
            purge,
            counts["memories"],
            counts["versions"],
            counts["facts"],
            counts["events"],
            to_datetime(self._core.now_us()),
            pending,
        )

    def maintain(self, *, dry_run: bool = False) -> MaintenanceReport:
        if not isinstance(dry_run, bool):
            raise ValidationError("dry_run: expected true or false", field="dry_run")
        state = self._core.state(self.name)
        moves = plan_moves(state, state.config, self._core.now_us()) if state is not None else []
        if not dry_run and state is not None and (moves or state.access_dirty):
            state.access_dirty = False  # (a concurrent access re-sets it: persisted next time)
            access = [(self.name, m, c, t) for m, (c, t) in list(state.access.items())]
            self._core.submit(MoveTiers(self.name, moves, access))
        mems: list[str] = []
        facts: list[tuple[str, str]] = []
        has_ttl = state is not None and (
            state.catalog.n_ttl > 0
            or bool(state.cold_expiry)
            or any(c[-1].expires_us for c in list(state.facts.values()))
        )
        if has_ttl:  # nothing can expire in a namespace without TTLs: no commit for it
            grace_us = self._core.settings.ttl_grace_s * 1_000_000
            mems, facts = self._core.submit(PurgeExpired(self.name, grace_us, dry_run))
        report = MaintenanceReport(
            self.name,
            dry_run,
            to_datetime(self._core.now_us()),
            sorted(mems),
            sorted(facts),
            demoted=[(m, s, r) for m, t, s, r in moves if t == "cold"],
            promoted=[(m, r) for m, t, _s, r in moves if t == "hot"],
        )
        if not dry_run:
            self._core.observers.emit(self._core.observers.maintain, report)
        return report

    @property
    def config(self) -> NamespaceConfig:
        state = self._core.state(self.name)
        return state.config if state is not None else NamespaceConfig()

    def configure(self, **changes: Any) -> NamespaceConfig:
        cfg = check_config(self.config, changes)
        return self._core.submit(ConfigureNamespace(self.name, cfg))
