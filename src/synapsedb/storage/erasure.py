"""Erasure in SQLite: the statements of a purge, the WAL checkpoint that makes it final, and
the query log's retention.

With ``secure_delete`` on, SQLite overwrites what an UPDATE or DELETE frees in the database
file; the old page images in the WAL still hold the text until a ``TRUNCATE`` checkpoint has
copied every frame back and emptied the WAL, which cannot happen while another connection reads
from it. :func:`checkpoint` says whether it happened.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

import orjson

from .base import Purge, QueryInsert

__all__ = [
    "BUSY_TIMEOUT_MS",
    "checkpoint",
    "erase_query_row",
    "names_entity",
    "prune_queries",
    "purge",
]

BUSY_TIMEOUT_MS = 5000  # the connection's usual busy timeout

ERASED_REQUEST = '{"erased": true}'


def names_entity(
    text: str | None, request: str | None, hits: str | None, entity: str, ids: Collection[str]
) -> bool:
    """Whether a purge of ``entity`` erases this logged query: its text names the entity, its
    request names it (as a JSON string), or one of its hits is a memory in ``ids`` (the
    erased ones). The one rule for stored rows (:func:`purge`) and for rows logged by queries
    that were still running when the purge committed (the engine's query log buffer)."""
    if entity in (text or "") or orjson.dumps(entity).decode()[1:-1] in (request or ""):
        return True
    return bool(ids) and any(h[0] in ids for h in orjson.loads(hits or "[]"))


def erase_query_row(row: QueryInsert) -> QueryInsert:
    """A query log row as a purge leaves it: it keeps its id, time, agent and hits, and loses
    its text and request."""
    return row._replace(text=None, request=ERASED_REQUEST)


def purge(conn: sqlite3.Connection, p: Purge) -> None:
    """Run a purge inside the caller's transaction (see :class:`Purge`)."""
    ns, entity = p.ns, p.entity
    streams = list(p.streams)
    # the memories to erase: the entity's, and the searchable twins of the erased events
    own = conn.execute(
        "SELECT DISTINCT id FROM memory_versions WHERE ns = ? AND entity = ?", (ns, entity)
    )
    twins = conn.execute(
        "SELECT DISTINCT memory_id FROM events WHERE ns = :ns AND memory_id IS NOT NULL "
        "AND (entity = :entity OR stream = :entity "
        "OR stream IN (SELECT value FROM json_each(:streams)))",
        {"ns": ns, "entity": entity, "streams": orjson.dumps(streams).decode()},
    )
    ids = {r[0] for r in own} | {r[0] for r in twins}
    args = {
        "ns": ns,
        "entity": entity,
        "alias": p.alias,
        "ids": orjson.dumps(sorted(ids)).decode(),
        "erased": ERASED_REQUEST,
    }
    # the query log first (it finds the entity's memories by the names about to go): a query
    # that named the entity or returned its memories keeps its id, time, agent and hits (ids,
    # versions, scores), and loses its text and request
    conn.create_function(
        "erasure_names",
        3,
        lambda text, request, hits: names_entity(text, request, hits, entity, ids),
        deterministic=True,
    )
    try:
        conn.execute(
            "UPDATE queries SET text = NULL, request = :erased "
            "WHERE ns = :ns AND erasure_names(text, request, hits)",
            args,
        )
    finally:  # the connection keeps no reference to the name
        conn.create_function("erasure_names", 3, None)
    # an answer built on the memories (or naming the entity, or about it) keeps its id, time,
    # agent, queries and the versions it cited, and loses its text; among its entities the
    # name becomes the alias
    conn.execute(
        """UPDATE answers SET text = NULL, erased = 1,
                  entities = (SELECT json_group_array(CASE WHEN e.value = :entity THEN :alias
                                                      ELSE e.value END)
                              FROM json_each(answers.entities) AS e)
           WHERE ns = :ns AND (instr(coalesce(text, ''), :entity) > 0
                 OR EXISTS (SELECT 1 FROM json_each(answers.entities) AS e
                            WHERE e.value = :entity)
                 OR EXISTS (SELECT 1 FROM json_each(answers.memories) AS m
                            WHERE json_extract(m.value, '$[0]') IN
                                  (SELECT value FROM json_each(:ids))))""",
        args,
    )
    conn.execute(
        """UPDATE memory_versions SET content = '', metadata = '{}', embedding = NULL, erased = 1,
                  entity = CASE WHEN entity = :entity THEN :alias ELSE entity END
           WHERE ns = :ns AND id IN (SELECT value FROM json_each(:ids))""",
        args,
    )
    for key, hidden in p.keys.items():
        conn.execute(
            "UPDATE fact_versions SET value = 'null', erased = 1, entity = ?, key = ? "
            "WHERE ns = ? AND entity = ? AND key = ?",
            (p.alias, hidden, ns, entity, key),
        )
    # keys the engine did not name (none are expected): hidden by their row's own number
    conn.execute(
        "UPDATE fact_versions SET value = 'null', erased = 1, entity = :alias, "
        "key = 'erased:' || rowid WHERE ns = :ns AND entity = :entity",
        args,
    )
    conn.execute(
        """UPDATE events SET content = '', data = NULL, erased = 1,
                  entity = CASE WHEN entity = :entity THEN :alias ELSE entity END
           WHERE ns = :ns AND (entity = :entity OR stream = :entity)""",
        args,
    )
    for stream, hidden in p.streams.items():
        conn.execute(
            "UPDATE events SET stream = ?, content = '', data = NULL, erased = 1 "
            "WHERE ns = ? AND stream = ?",
            (hidden, ns, stream),
        )


def checkpoint(conn: sqlite3.Connection, wait_ms: int) -> bool:
    """Copy the WAL into the database file and truncate it to zero bytes, waiting up to
    ``wait_ms`` for readers to move off it. True when done; False when a reader (another
    connection's open read transaction) kept the WAL in use: ``PRAGMA wal_checkpoint`` then
    answers busy=1 instead of raising."""
    conn.execute(f"PRAGMA busy_timeout = {max(0, int(wait_ms))}")
    try:
        busy, _frames, _copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.OperationalError:  # locked beyond the wait: still pending
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return busy == 0


def prune_queries(conn: sqlite3.Connection, ns: str, keep: int) -> int:
    """Drop the oldest logged queries of ``ns`` beyond the newest ``keep`` (queries a recorded
    answer refers to stay, for lineage). Returns how many went."""
    cur = conn.execute(
        """DELETE FROM queries WHERE ns = :ns AND id IN (
               SELECT id FROM queries WHERE ns = :ns
               ORDER BY sys_us DESC, id DESC LIMIT -1 OFFSET :keep)
           AND id NOT IN (SELECT j.value FROM answers, json_each(answers.query_ids) AS j
                          WHERE answers.ns = :ns)""",
        {"ns": ns, "keep": keep},
    )
    return cur.rowcount
