"""The PostgreSQL schema: the same tables and columns as the SQLite backend's, in a schema of
their own (``synapsedb`` unless told otherwise), versioned by ``schema_migrations``.

Every table is keyed by namespace (``ns``; ``namespaces.name``) and every unique key starts
with it, so that a deployment that outgrows one PostgreSQL can distribute the tables by
namespace with Citus: ``ns`` is the distribution column of memory_versions, fact_versions,
events, queries, answers, erasures, tiers and access, and ``namespaces`` is distributed by
``name`` (co-located) or made a reference table. ``schema_migrations`` and ``secret`` are
reference tables.

Where SQLite reads rows back in ``rowid`` order, the tables written as logs carry ``rowid``,
an identity column, indexed with their namespace: within one namespace ``rowid`` order is commit
order, because one writer connection per process inserts the rows of a batch in one
transaction. Text columns use the ``C`` collation, which compares bytes as SQLite does.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "REFERENCE_TABLES", "SCHEMA_TABLES", "TEXT_COLUMNS"]

# Each entry migrates the schema from version i to i + 1. Never edit a released entry: append.
# Version 1 is the SQLite schema as of its migration 6, so rows are the same tuples.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE namespaces (
        name       TEXT COLLATE "C" PRIMARY KEY,  -- distribution column (or a reference table)
        created_us BIGINT NOT NULL,
        dim        INTEGER,
        embedder   TEXT COLLATE "C",
        config     TEXT COLLATE "C"
    );
    -- ns is the distribution column of every table below (Citus: create_distributed_table)
    CREATE TABLE memory_versions (
        rowid      BIGINT GENERATED ALWAYS AS IDENTITY,
        ns         TEXT COLLATE "C" NOT NULL,
        id         TEXT COLLATE "C" NOT NULL,
        version    BIGINT NOT NULL,
        sys_us     BIGINT NOT NULL,
        created_us BIGINT NOT NULL,
        entity     TEXT COLLATE "C" NOT NULL,
        type       TEXT COLLATE "C" NOT NULL,
        content    TEXT COLLATE "C" NOT NULL,
        metadata   TEXT COLLATE "C" NOT NULL,
        embedding  BYTEA,
        salience   DOUBLE PRECISION NOT NULL,
        ts_us      BIGINT NOT NULL,
        agent      TEXT COLLATE "C",
        pinned     INTEGER NOT NULL,
        ttl        DOUBLE PRECISION,
        expires_us BIGINT,
        deleted    INTEGER NOT NULL,
        erased     INTEGER NOT NULL DEFAULT 0,
        UNIQUE (ns, id, version)
    );
    CREATE INDEX memory_versions_rowid ON memory_versions (ns, rowid);
    CREATE TABLE fact_versions (
        rowid      BIGINT GENERATED ALWAYS AS IDENTITY,
        ns         TEXT COLLATE "C" NOT NULL,
        entity     TEXT COLLATE "C" NOT NULL,
        key        TEXT COLLATE "C" NOT NULL,
        version    BIGINT NOT NULL,
        sys_us     BIGINT NOT NULL,
        created_us BIGINT NOT NULL,
        value      TEXT COLLATE "C" NOT NULL,
        agent      TEXT COLLATE "C",
        ttl        DOUBLE PRECISION,
        expires_us BIGINT,
        deleted    INTEGER NOT NULL,
        erased     INTEGER NOT NULL DEFAULT 0,
        UNIQUE (ns, entity, key, version)
    );
    CREATE INDEX fact_versions_rowid ON fact_versions (ns, rowid);
    CREATE TABLE events (
        rowid      BIGINT GENERATED ALWAYS AS IDENTITY,
        ns         TEXT COLLATE "C" NOT NULL,
        stream     TEXT COLLATE "C" NOT NULL,
        ms         BIGINT NOT NULL,
        seq        BIGINT NOT NULL,
        sys_us     BIGINT NOT NULL,
        entity     TEXT COLLATE "C" NOT NULL,
        ts_us      BIGINT NOT NULL,
        agent      TEXT COLLATE "C",
        content    TEXT COLLATE "C" NOT NULL,
        data       TEXT COLLATE "C",
        memory_id  TEXT COLLATE "C",
        erased     INTEGER NOT NULL DEFAULT 0,
        UNIQUE (ns, stream, ms, seq)
    );
    CREATE INDEX events_rowid ON events (ns, rowid);
    CREATE TABLE queries (
        ns        TEXT COLLATE "C" NOT NULL,
        id        TEXT COLLATE "C" NOT NULL,
        sys_us    BIGINT NOT NULL,
        agent     TEXT COLLATE "C",
        text      TEXT COLLATE "C",
        request   TEXT COLLATE "C" NOT NULL,
        hits      TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (ns, id)
    );
    CREATE INDEX queries_time ON queries (ns, sys_us);
    CREATE TABLE answers (
        ns        TEXT COLLATE "C" NOT NULL,
        id        TEXT COLLATE "C" NOT NULL,
        sys_us    BIGINT NOT NULL,
        agent     TEXT COLLATE "C",
        text      TEXT COLLATE "C",
        query_ids TEXT COLLATE "C" NOT NULL,
        cited     TEXT COLLATE "C" NOT NULL,
        memories  TEXT COLLATE "C" NOT NULL,
        erased    INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (ns, id)
    );
    CREATE INDEX answers_time ON answers (ns, sys_us);
    CREATE TABLE erasures (
        rowid     BIGINT GENERATED ALWAYS AS IDENTITY,
        ns        TEXT COLLATE "C" NOT NULL,
        sys_us    BIGINT NOT NULL,
        agent     TEXT COLLATE "C",
        subject   TEXT COLLATE "C" NOT NULL,
        counts    TEXT COLLATE "C" NOT NULL
    );
    CREATE INDEX erasures_time ON erasures (ns, sys_us);
    CREATE TABLE tiers (
        rowid  BIGINT GENERATED ALWAYS AS IDENTITY,
        ns     TEXT COLLATE "C" NOT NULL,
        id     TEXT COLLATE "C" NOT NULL,
        sys_us BIGINT NOT NULL,
        tier   TEXT COLLATE "C" NOT NULL,
        score  DOUBLE PRECISION,
        reason TEXT COLLATE "C" NOT NULL
    );
    CREATE INDEX tiers_rowid ON tiers (ns, rowid);
    CREATE TABLE access (
        ns      TEXT COLLATE "C" NOT NULL,
        id      TEXT COLLATE "C" NOT NULL,
        count   BIGINT NOT NULL,
        last_us BIGINT NOT NULL,
        PRIMARY KEY (ns, id)
    );
    """,
    # 2: the key that hashes erased names, shared by every process on this schema (SQLite
    # keeps it in <data dir>/SECRET); one row, created once by Storage.secret()
    """
    CREATE TABLE secret (
        id    INTEGER PRIMARY KEY CHECK (id = 1),  -- a reference table under Citus
        value BYTEA NOT NULL CHECK (length(value) = 32)
    );
    """,
    # 3: several processes on one schema (postgres_follow.py): each follows the others' commits
    # by rowid (commits are serialized, so rowid order is commit order across processes);
    # ``reloads`` names a namespace whose rows changed in place (``rows``: an erasure, a tier
    # move; a follower loads it afresh) or whose namespaces row changed (a configuration)
    """
    CREATE INDEX memory_versions_log ON memory_versions (rowid);
    CREATE INDEX fact_versions_log ON fact_versions (rowid);
    CREATE INDEX events_log ON events (rowid);
    CREATE TABLE reloads (
        seq    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        ns     TEXT COLLATE "C" NOT NULL,
        origin TEXT COLLATE "C" NOT NULL,  -- the process that committed it (skips its own)
        rows   BOOLEAN NOT NULL,  -- true: reload its rows; false: re-read its namespaces row
        at     TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    """,
    # 4: an open starts its commit clock after the latest stored system time without reading
    # every row (namespaces load on first need, engine/lazy.py): one index seek per table
    # instead of a scan of each (as SQLite's migration 7)
    """
    CREATE INDEX memory_versions_sys ON memory_versions (sys_us);
    CREATE INDEX fact_versions_sys ON fact_versions (sys_us);
    CREATE INDEX events_sys ON events (sys_us);
    """,
    # 5: an answer names the entities it is about (as SQLite's migration 8)
    """
    ALTER TABLE answers ADD COLUMN entities TEXT COLLATE "C" NOT NULL DEFAULT '[]';
    """,
    # 6: sharded placement (postgres_shards.py): the live processes, each with a lease, and the
    # owner of each share of the namespaces (a namespace's share: postgres_shards.shard_of)
    """
    CREATE TABLE members (
        address     TEXT COLLATE "C" PRIMARY KEY,  -- where the others forward its requests
        incarnation TEXT COLLATE "C" NOT NULL,  -- this start of the process (a restart: anew)
        started     TIMESTAMPTZ NOT NULL DEFAULT now(),
        lease_until TIMESTAMPTZ NOT NULL  -- renewed by the process; past it, it is dead
    );
    CREATE TABLE shards (
        shard       INTEGER PRIMARY KEY,
        owner       TEXT COLLATE "C",  -- a member's address; NULL: nobody took it yet
        incarnation TEXT COLLATE "C",  -- the owner's incarnation that took it
        epoch       BIGINT NOT NULL DEFAULT 0,  -- bumped at every change of owner
        moved_at    TIMESTAMPTZ
    );
    INSERT INTO shards (shard) SELECT generate_series(0, 255);
    """,
]

# tables of one row or a few, the same for every namespace (Citus: create_reference_table)
REFERENCE_TABLES = ("schema_migrations", "secret", "members", "shards")
# the tables a backend of this schema holds, keyed by namespace, and the text columns of each (what an erasure
# must clear: tests scan them for an erased name)
SCHEMA_TABLES = (
    "namespaces", "memory_versions", "fact_versions", "events", "queries", "answers",
    "erasures", "tiers", "access", "reloads",
)  # fmt: skip
TEXT_COLUMNS: dict[str, tuple[str, ...]] = {
    "namespaces": ("name", "embedder", "config"),
    "memory_versions": ("ns", "id", "entity", "type", "content", "metadata", "agent"),
    "fact_versions": ("ns", "entity", "key", "value", "agent"),
    "events": ("ns", "stream", "entity", "agent", "content", "data", "memory_id"),
    "queries": ("ns", "id", "agent", "text", "request", "hits"),
    "answers": ("ns", "id", "agent", "text", "query_ids", "cited", "memories", "entities"),
    "erasures": ("ns", "agent", "subject", "counts"),
    "tiers": ("ns", "id", "tier", "reason"),
    "access": ("ns", "id"),
    "reloads": ("ns", "origin"),
}
