"""PostgreSQL backend: the lineage and audit reads (rare, never on the query path), as a
mixin over one method, ``_read(sql, params)``, which runs a read on the backend's reader
connection."""

from __future__ import annotations

from typing import Any, TypeVar

from .base import AnswerRow, ErasureRow, MemoryRow, QueryRow, TierRow, named_rows
from .postgres_load import MEM_COLUMNS

__all__ = ["AuditReads"]

_MEM_READ = MEM_COLUMNS + ", erased"


class AuditReads:
    """The Storage protocol's lineage and audit reads, in SQL."""

    def _read(self, sql: str, params: tuple[Any, ...] | dict[str, Any]) -> list[tuple[Any, ...]]:
        raise NotImplementedError  # pragma: no cover - PostgresStorage runs it

    def fact_namespaces(self, entity: str) -> list[str]:
        """The namespaces that hold (or held) a fact about ``entity``, without loading any."""
        rows = self._read("SELECT DISTINCT ns FROM fact_versions WHERE entity = %s", (entity,))
        return [str(r[0]) for r in rows]

    def read_queries(self, ns: str, ids: list[str]) -> list[QueryRow]:
        """Logged queries by id."""
        if not ids:
            return []
        return _as(
            QueryRow,
            self._read(
                "SELECT id, sys_us, agent, text, request, hits FROM queries "
                "WHERE ns = %s AND id = ANY(%s)",
                (ns, ids),
            ),
        )

    def read_memory_chain(self, ns: str, mid: str) -> list[MemoryRow]:
        return _as(
            MemoryRow,
            self._read(
                f"SELECT {_MEM_READ} FROM memory_versions WHERE ns = %s AND id = %s ORDER BY version",
                (ns, mid),
            ),
        )

    def read_memory_chains(self, ns: str, ids: list[str]) -> list[MemoryRow]:
        out: list[MemoryRow] = []
        for i in range(0, len(ids), 5000):
            out.extend(
                named_rows(
                    MemoryRow,
                    self._read(
                        f"SELECT {_MEM_READ} FROM memory_versions WHERE ns = %s AND id = ANY(%s) "
                        "ORDER BY rowid",
                        (ns, ids[i : i + 5000]),
                    ),
                )
            )
        return out

    def scan_queries(self, ns: str, since_us: int, until_us: int) -> list[QueryRow]:
        return _as(
            QueryRow,
            self._read(
                "SELECT id, sys_us, agent, text, request, hits FROM queries "
                "WHERE ns = %s AND sys_us >= %s AND sys_us < %s ORDER BY sys_us, id",
                (ns, since_us, until_us),
            ),
        )

    def read_answer(self, ns: str, answer_id: str) -> AnswerRow | None:
        rows = _as(
            AnswerRow,
            self._read(
                "SELECT id, sys_us, agent, text, query_ids, cited, memories, erased, entities "
                "FROM answers "
                "WHERE ns = %s AND id = %s",
                (ns, answer_id),
            ),
        )
        return rows[0] if rows else None

    def scan_answers(self, ns: str, since_us: int, until_us: int) -> list[AnswerRow]:
        return _as(
            AnswerRow,
            self._read(
                "SELECT id, sys_us, agent, text, query_ids, cited, memories, erased, entities "
                "FROM answers "
                "WHERE ns = %s AND sys_us >= %s AND sys_us < %s ORDER BY sys_us, id",
                (ns, since_us, until_us),
            ),
        )

    def scan_tiers(self, ns: str, since_us: int, until_us: int) -> list[TierRow]:
        return _as(
            TierRow,
            self._read(
                "SELECT id, sys_us, tier, score, reason FROM tiers "
                "WHERE ns = %s AND sys_us >= %s AND sys_us < %s ORDER BY rowid",
                (ns, since_us, until_us),
            ),
        )

    def scan_erasures(self, ns: str, since_us: int, until_us: int) -> list[ErasureRow]:
        return _as(
            ErasureRow,
            self._read(
                "SELECT sys_us, agent, subject, counts FROM erasures "
                "WHERE ns = %s AND sys_us >= %s AND sys_us < %s ORDER BY sys_us, rowid",
                (ns, since_us, until_us),
            ),
        )

    def count_rows(self) -> dict[str, int]:
        """Row counts per table (for checks that memory agrees with the database)."""
        tables = ("namespaces", "memory_versions", "fact_versions", "events")
        rows = self._read(
            " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t}" for t in tables), ()
        )
        return {t: int(n) for t, n in rows}


_T = TypeVar("_T", bound=tuple[Any, ...])


def _as(cls: type[_T], rows: list[tuple[Any, ...]]) -> list[_T]:
    """``rows`` as ``cls`` rows (their SELECT lists its fields in order)."""
    return list(named_rows(cls, rows))
