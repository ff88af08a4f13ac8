"""PostgreSQL backend: the lineage and audit reads (rare, never on the query path), as a
mixin over one method, ``_read(sql, params)``, which runs a read on the backend's reader
connection."""

from __future__ import annotations

from typing import Any

from .postgres_load import MEM_COLUMNS

__all__ = ["AuditReads"]

_MEM_READ = MEM_COLUMNS.split(", ", 1)[1] + ", erased"  # a chain row: without ns


class AuditReads:
    """The Storage protocol's lineage and audit reads, in SQL."""

    def _read(self, sql: str, params: tuple[Any, ...] | dict[str, Any]) -> list[tuple[Any, ...]]:
        raise NotImplementedError  # pragma: no cover - PostgresStorage runs it

    def read_queries(self, ns: str, ids: list[str]) -> list[tuple[Any, ...]]:
        """Logged queries by id: (id, sys_us, agent, text, request JSON, hits JSON)."""
        if not ids:
            return []
        return self._read(
            "SELECT id, sys_us, agent, text, request, hits FROM queries "
            "WHERE ns = %s AND id = ANY(%s)",
            (ns, ids),
        )

    def read_memory_chain(self, ns: str, mid: str) -> list[tuple[Any, ...]]:
        return self._read(
            f"SELECT {_MEM_READ} FROM memory_versions WHERE ns = %s AND id = %s ORDER BY version",
            (ns, mid),
        )

    def read_memory_chains(self, ns: str, ids: list[str]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for i in range(0, len(ids), 5000):
            out.extend(
                self._read(
                    f"SELECT {_MEM_READ} FROM memory_versions WHERE ns = %s AND id = ANY(%s) "
                    "ORDER BY rowid",
                    (ns, ids[i : i + 5000]),
                )
            )
        return out

    def scan_queries(self, ns: str, since_us: int, until_us: int) -> list[tuple[Any, ...]]:
        return self._read(
            "SELECT id, sys_us, agent, text, request, hits FROM queries "
            "WHERE ns = %s AND sys_us >= %s AND sys_us < %s ORDER BY sys_us, id",
            (ns, since_us, until_us),
        )

    def read_answer(self, ns: str, answer_id: str) -> tuple[Any, ...] | None:
        """(id, sys_us, agent, text, query_ids JSON, cited JSON, memories JSON, erased) or
        None; ``erased`` is 1 when a purge took the text."""
        rows = self._read(
            "SELECT id, sys_us, agent, text, query_ids, cited, memories, erased FROM answers "
            "WHERE ns = %s AND id = %s",
            (ns, answer_id),
        )
        return rows[0] if rows else None

    def scan_answers(self, ns: str, since_us: int, until_us: int) -> list[tuple[Any, ...]]:
        """(id, sys_us, agent, text, query_ids JSON, cited JSON, memories JSON, erased)."""
        return self._read(
            "SELECT id, sys_us, agent, text, query_ids, cited, memories, erased FROM answers "
            "WHERE ns = %s AND sys_us >= %s AND sys_us < %s ORDER BY sys_us, id",
            (ns, since_us, until_us),
        )

    def scan_tiers(self, ns: str, since_us: int, until_us: int) -> list[tuple[Any, ...]]:
        """Tier moves: (id, sys_us, tier, score, reason)."""
        return self._read(
            "SELECT id, sys_us, tier, score, reason FROM tiers "
            "WHERE ns = %s AND sys_us >= %s AND sys_us < %s ORDER BY rowid",
            (ns, since_us, until_us),
        )

    def scan_erasures(self, ns: str, since_us: int, until_us: int) -> list[tuple[Any, ...]]:
        return self._read(
            "SELECT sys_us, agent, subject, counts FROM erasures "
            "WHERE ns = %s AND sys_us >= %s AND sys_us < %s ORDER BY sys_us, rowid",
            (ns, since_us, until_us),
        )

    def count_rows(self) -> dict[str, int]:
        """Row counts per table (for checks that memory agrees with the database)."""
        tables = ("namespaces", "memory_versions", "fact_versions", "events")
        rows = self._read(
            " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t}" for t in tables), ()
        )
        return {t: int(n) for t, n in rows}
