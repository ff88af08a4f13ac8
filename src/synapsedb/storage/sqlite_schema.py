"""The SQLite schema, as migrations: entry i takes a data directory from schema version i to
i + 1 (``PRAGMA user_version``); :class:`~synapsedb.storage.sqlite.SQLiteStorage` applies the
ones a directory lacks when it opens it. The PostgreSQL schema (postgres_schema.py) starts from
version 6 of this one, so rows are the same tuples on both backends.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

# Each entry migrates the schema from version i to i + 1. Never edit a released entry: append.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE namespaces (
        name       TEXT PRIMARY KEY,
        created_us INTEGER NOT NULL,
        dim        INTEGER
    );
    CREATE TABLE memory_versions (
        ns         TEXT NOT NULL,
        id         TEXT NOT NULL,
        version    INTEGER NOT NULL,
        sys_us     INTEGER NOT NULL,
        created_us INTEGER NOT NULL,
        entity     TEXT NOT NULL,
        type       TEXT NOT NULL,
        content    TEXT NOT NULL,
        metadata   TEXT NOT NULL,
        embedding  BLOB,
        salience   REAL NOT NULL,
        ts_us      INTEGER NOT NULL,
        agent      TEXT,
        pinned     INTEGER NOT NULL,
        ttl        REAL,
        expires_us INTEGER,
        deleted    INTEGER NOT NULL,
        UNIQUE (ns, id, version)
    );
    CREATE INDEX memory_versions_entity ON memory_versions (ns, entity);
    CREATE TABLE fact_versions (
        ns         TEXT NOT NULL,
        entity     TEXT NOT NULL,
        key        TEXT NOT NULL,
        version    INTEGER NOT NULL,
        sys_us     INTEGER NOT NULL,
        created_us INTEGER NOT NULL,
        value      TEXT NOT NULL,
        agent      TEXT,
        ttl        REAL,
        expires_us INTEGER,
        deleted    INTEGER NOT NULL,
        UNIQUE (ns, entity, key, version)
    );
    CREATE TABLE events (
        ns         TEXT NOT NULL,
        stream     TEXT NOT NULL,
        ms         INTEGER NOT NULL,
        seq        INTEGER NOT NULL,
        sys_us     INTEGER NOT NULL,
        entity     TEXT NOT NULL,
        ts_us      INTEGER NOT NULL,
        agent      TEXT,
        content    TEXT NOT NULL,
        data       TEXT,
        memory_id  TEXT,
        UNIQUE (ns, stream, ms, seq)
    );
    CREATE INDEX events_entity ON events (ns, entity);
    """,
    # 2: which embedder produced a namespace's vectors (a model name, or "caller")
    """
    ALTER TABLE namespaces ADD COLUMN embedder TEXT;
    """,
    # 3: no read path uses the per-entity indexes (state loads in rowid order), and each one
    # cost a WAL page per write
    """
    DROP INDEX memory_versions_entity;
    DROP INDEX events_entity;
    """,
    # 4: lineage (the query log and recorded answers) and erasure (purged content is flagged;
    # an erasure leaves an audit row without content)
    """
    CREATE TABLE queries (
        ns        TEXT NOT NULL,
        id        TEXT NOT NULL,
        sys_us    INTEGER NOT NULL,
        agent     TEXT,
        text      TEXT,
        request   TEXT NOT NULL,
        hits      TEXT NOT NULL,
        PRIMARY KEY (ns, id)
    ) WITHOUT ROWID;
    CREATE INDEX queries_time ON queries (ns, sys_us);
    CREATE TABLE answers (
        ns        TEXT NOT NULL,
        id        TEXT NOT NULL,
        sys_us    INTEGER NOT NULL,
        agent     TEXT,
        text      TEXT,
        query_ids TEXT NOT NULL,
        cited     TEXT NOT NULL,
        memories  TEXT NOT NULL,
        PRIMARY KEY (ns, id)
    ) WITHOUT ROWID;
    CREATE INDEX answers_time ON answers (ns, sys_us);
    CREATE TABLE erasures (
        ns        TEXT NOT NULL,
        sys_us    INTEGER NOT NULL,
        agent     TEXT,
        subject   TEXT NOT NULL,
        counts    TEXT NOT NULL
    );
    ALTER TABLE memory_versions ADD COLUMN erased INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE fact_versions ADD COLUMN erased INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE events ADD COLUMN erased INTEGER NOT NULL DEFAULT 0;
    """,
    # 5: lifecycle: per-namespace configuration (quotas, policy, salience weights), the tier
    # log (every demotion and promotion with its score and reason), and access statistics
    """
    ALTER TABLE namespaces ADD COLUMN config TEXT;
    CREATE TABLE tiers (
        ns     TEXT NOT NULL,
        id     TEXT NOT NULL,
        sys_us INTEGER NOT NULL,
        tier   TEXT NOT NULL,
        score  REAL,
        reason TEXT NOT NULL
    );
    CREATE INDEX tiers_id ON tiers (ns, id);
    CREATE TABLE access (
        ns      TEXT NOT NULL,
        id      TEXT NOT NULL,
        count   INTEGER NOT NULL,
        last_us INTEGER NOT NULL,
        PRIMARY KEY (ns, id)
    ) WITHOUT ROWID;
    """,
    # 6: an answer built on erased memories keeps its row but loses its text: say so
    """
    ALTER TABLE answers ADD COLUMN erased INTEGER NOT NULL DEFAULT 0;
    """,
    # 7: an open starts its commit clock after the latest stored system time without reading
    # every row (namespaces load on first need): one index seek per table. The rows of a
    # batch share one time, so each commit adds to the end of these indexes only.
    """
    CREATE INDEX memory_versions_sys ON memory_versions (sys_us);
    CREATE INDEX fact_versions_sys ON fact_versions (sys_us);
    CREATE INDEX events_sys ON events (sys_us);
    """,
    # 8: an answer names the entities it is about (record_answer(entities=...)), so that a
    # purge of any of them erases its text even when it cited none of their memories
    """
    ALTER TABLE answers ADD COLUMN entities TEXT NOT NULL DEFAULT '[]';
    """,
]
