"""Erasure in PostgreSQL: the statements of a purge, the VACUUM that finishes it, and the query
log's retention. What "gone" means on PostgreSQL, and what it does not mean:

- **In the tables.** A purge (or an expired TTL) updates the rows in place: content, metadata,
  vectors, fact values and event payloads are emptied and the entity's name is replaced by its
  alias, in the transaction of the batch. From its commit on, no SQL query on the tables returns
  the text (the contract suite checks every text column of every table).
- **Dead tuples, until VACUUM.** PostgreSQL's MVCC writes a new row version for every UPDATE;
  the old version, with the text, stays in the table's heap pages (and its index entries in the
  indexes) as a dead tuple until VACUUM removes it. VACUUM cannot remove a dead tuple that a
  still-open snapshot may see: an open transaction anywhere in the cluster (another SynapseDB
  process loading, a long report), a replication slot's ``xmin`` or a standby with
  ``hot_standby_feedback``. :func:`erasure_blocked` asks PostgreSQL for such snapshots, and
  :func:`vacuum` runs ``VACUUM`` on the tables the erasure touched (this backend's
  ``finish_erasure``, where SQLite checkpoints its WAL); while a snapshot holds the old rows the
  erasure stays *pending* and maintenance retries it.
- **Free space after VACUUM.** Plain VACUUM marks the dead tuples' space free but does not
  overwrite it: the bytes stay in the table's data files until new rows reuse the space
  (SQLite's ``secure_delete`` has no PostgreSQL equivalent). Measured on PostgreSQL 16.2: 50
  purged memories, then VACUUM and CHECKPOINT, left 48 of the 50 texts readable in the heap
  file with ``grep``. ``VACUUM FULL`` (or pg_repack) rewrites the table into a new file and
  unlinks the old one (the same measurement then finds none); it holds an exclusive lock on the
  whole table while it runs, so it is an operator's step (docs/deploy.md), not this backend's.
- **WAL, replicas and backups.** The original INSERT of the text is in the write-ahead log
  (in the measurement above, twice per row: the insert and a full-page image) until its segment
  is recycled (after a checkpoint, beyond ``wal_keep_size`` and every replication slot and
  archive). Streaming replicas replay the same pages, VACUUM included, so the free-space caveat
  holds on each of them; base backups and WAL archives keep the text until their retention
  drops them. An
  erasure is complete only when those have aged out: set backup and archive retention with that
  in mind (e.g. 30 days for a GDPR request).
"""

from __future__ import annotations

import time
from typing import Any

from .base import Purge
from .erasure import ERASED_REQUEST, names_entity

__all__ = ["erasure_blocked", "prune_queries", "purge", "vacuum"]

# the tables whose old row versions hold erased text, by what erased it
PURGED_TABLES = ("memory_versions", "fact_versions", "events", "queries", "answers")


def purge(cur: Any, p: Purge) -> None:
    """Run a purge inside the caller's transaction (see :class:`Purge`); the same statements as
    SQLite's :func:`synapsedb.storage.erasure.purge`, in PostgreSQL's dialect."""
    ns, entity = p.ns, p.entity
    streams = list(p.streams)
    # the memories to erase: the entity's, and the searchable twins of the erased events
    cur.execute(
        "SELECT DISTINCT id FROM memory_versions WHERE ns = %s AND entity = %s", (ns, entity)
    )
    ids = {r[0] for r in cur.fetchall()}
    cur.execute(
        "SELECT DISTINCT memory_id FROM events WHERE ns = %s AND memory_id IS NOT NULL "
        "AND (entity = %s OR stream = %s OR stream = ANY(%s))",
        (ns, entity, entity, streams),
    )
    ids |= {r[0] for r in cur.fetchall()}
    args = {
        "ns": ns,
        "entity": entity,
        "alias": p.alias,
        "ids": sorted(ids),
        "erased": ERASED_REQUEST,
    }
    # the query log first (it finds the entity's memories by the names about to go); the one
    # rule, names_entity, runs here in Python over the rows not yet erased
    cur.execute(
        "SELECT id, text, request, hits FROM queries WHERE ns = %(ns)s "
        "AND (text IS NOT NULL OR request <> %(erased)s)",
        args,
    )
    named = [
        qid
        for qid, text, request, hits in cur.fetchall()
        if names_entity(text, request, hits, entity, ids)
    ]
    if named:
        cur.execute(
            "UPDATE queries SET text = NULL, request = %(erased)s "
            "WHERE ns = %(ns)s AND id = ANY(%(named)s)",
            {**args, "named": named},
        )
    # an answer built on the memories (or naming the entity, or about it) loses its text;
    # among its entities the name becomes the alias
    cur.execute(
        """UPDATE answers SET text = NULL, erased = 1,
                  entities = coalesce((SELECT json_agg(CASE WHEN e.value = %(entity)s
                                                       THEN %(alias)s ELSE e.value END
                                                       ORDER BY e.at)::text
                                       FROM json_array_elements_text(answers.entities::json)
                                            WITH ORDINALITY AS e(value, at)), '[]')
           WHERE ns = %(ns)s AND (strpos(coalesce(text, ''), %(entity)s) > 0
                 OR EXISTS (SELECT 1 FROM json_array_elements_text(answers.entities::json)
                                          AS e WHERE e = %(entity)s)
                 OR EXISTS (SELECT 1 FROM json_array_elements(answers.memories::json) AS m
                            WHERE m ->> 0 = ANY(%(ids)s)))""",
        args,
    )
    cur.execute(
        """UPDATE memory_versions SET content = '', metadata = '{}', embedding = NULL, erased = 1,
                  entity = CASE WHEN entity = %(entity)s THEN %(alias)s ELSE entity END
           WHERE ns = %(ns)s AND id = ANY(%(ids)s)""",
        args,
    )
    for key, hidden in p.keys.items():
        cur.execute(
            "UPDATE fact_versions SET value = 'null', erased = 1, entity = %s, key = %s "
            "WHERE ns = %s AND entity = %s AND key = %s",
            (p.alias, hidden, ns, entity, key),
        )
    # keys the engine did not name (none are expected): hidden by their row's own number
    cur.execute(
        "UPDATE fact_versions SET value = 'null', erased = 1, entity = %(alias)s, "
        "key = 'erased:' || rowid WHERE ns = %(ns)s AND entity = %(entity)s",
        args,
    )
    cur.execute(
        """UPDATE events SET content = '', data = NULL, erased = 1,
                  entity = CASE WHEN entity = %(entity)s THEN %(alias)s ELSE entity END
           WHERE ns = %(ns)s AND (entity = %(entity)s OR stream = %(entity)s)""",
        args,
    )
    for stream, hidden in p.streams.items():
        cur.execute(
            "UPDATE events SET stream = %s, content = '', data = NULL, erased = 1 "
            "WHERE ns = %s AND stream = %s",
            (hidden, ns, stream),
        )


def prune_queries(cur: Any, ns: str, keep: int) -> int:
    """Drop the oldest logged queries of ``ns`` beyond the newest ``keep`` (queries a recorded
    answer refers to stay, for lineage). Returns how many went."""
    cur.execute(
        """DELETE FROM queries WHERE ns = %(ns)s AND id IN (
               SELECT id FROM queries WHERE ns = %(ns)s
               ORDER BY sys_us DESC, id DESC OFFSET %(keep)s)
           AND NOT EXISTS (SELECT 1 FROM answers,
                                  json_array_elements_text(answers.query_ids::json) AS j
                           WHERE answers.ns = %(ns)s AND j = queries.id)""",
        {"ns": ns, "keep": keep},
    )
    return int(cur.rowcount)


def erasure_blocked(conn: Any, xid: int) -> bool:
    """Whether a snapshot that may still see row versions from before transaction ``xid`` (the
    erasing one, as ``pg_current_xact_id()``) is open anywhere: another backend's ``xmin`` or a
    replication slot's. VACUUM cannot remove those versions until it closes."""
    row = conn.execute(
        """SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                          WHERE pid <> pg_backend_pid() AND backend_xmin IS NOT NULL
                            AND age(backend_xmin) >= age(%(x)s::text::xid))
               OR EXISTS (SELECT 1 FROM pg_replication_slots
                          WHERE (xmin IS NOT NULL AND age(xmin) >= age(%(x)s::text::xid))
                             OR (catalog_xmin IS NOT NULL
                                 AND age(catalog_xmin) >= age(%(x)s::text::xid)))""",
        {"x": str(xid % (1 << 32))},
    ).fetchone()
    return bool(row[0])


def vacuum(conn: Any, tables: set[str], xid: int, wait_ms: int) -> bool:
    """Wait up to ``wait_ms`` for the snapshots that see the erased rows to close, then VACUUM
    ``tables`` (``conn`` is in autocommit mode: VACUUM runs outside a transaction). True when
    the dead row versions could be removed; False while a snapshot holds them."""
    deadline = time.monotonic() + max(0, wait_ms) / 1000
    while erasure_blocked(conn, xid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    for table in sorted(tables):
        conn.execute(f"VACUUM {table}")  # names from PURGED_TABLES, never from input
    return True
