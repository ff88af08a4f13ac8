"""Conversation memory kept where a user already keeps chats: Redis and PostgreSQL.

Both are :class:`~synapsedb.conversation.memory.BaseMemory` (SynapseKit's ``add``/``get``/
``clear``/``to_string``/``to_messages``) over the blocking client of their store (redis-py,
psycopg 3), run in a worker thread by the async methods: one object then works under any event
loop, and no client is tied to the loop that happened to create it.

- :class:`RedisMemory` keeps a session as one Redis list of JSON messages. An append, the trim to
  ``max_messages`` (LTRIM) and the refreshed expiry (EXPIRE, ``ttl_seconds``) go in one
  MULTI/EXEC transaction, so concurrent writers never see a list past its bound or without its
  expiry. Extra ``redis``.
- :class:`PostgresMemory` keeps every session in one table (``synapsedb_conversations``, created
  on first use with an index on ``(session_id, id)``). Statements are parameterised (values never
  enter the SQL text; the table name is quoted as an identifier after a strict check). An append
  and its trim hold a per-session advisory lock, so ids follow commit order within a session and
  the trim never races another writer. Extra ``postgres``.

Their clients are imported when an object is made, so ``import synapsedb.conversation`` needs
neither. Failures of the store are :class:`~synapsedb.errors.StorageError`.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import StorageError, ValidationError
from ..validation import MAX_TTL_S
from .layout import check_session_id
from .memory import BlockingMemory, Turn
from .messages import ROLES

if TYPE_CHECKING:
    import psycopg
    import redis

__all__ = ["PostgresMemory", "RedisMemory"]

_TABLE_RE = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")  # + "_session_idx" stays within 63 bytes
_KEY_PREFIX_MAX = 200


def _missing(extra: str, module: str) -> ValidationError:
    return ValidationError(
        f"{module} is not installed: pip install 'synapsedb[{extra}]'", field=extra
    )


def _turn_from_store(value: Any, where: str) -> Turn:
    """A stored message read back: checked, because another program may write the same key or
    table and a malformed entry must not pass for a message."""
    if (
        isinstance(value, dict)
        and value.get("role") in ROLES
        and isinstance(value.get("content"), str)
    ):
        return {"role": value["role"], "content": value["content"]}
    raise StorageError(f"{where}: not a conversation message ({{'role', 'content'}})")


class RedisMemory(BlockingMemory):
    """A session as a Redis list (key ``key_prefix + session_id``).

    ``ttl_seconds`` expires the whole session that long after its last append (every append
    refreshes it); ``max_messages`` keeps the newest that many (LTRIM). ``client`` shares an
    existing ``redis.Redis`` (its pool) instead of opening one from ``url``.
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379",
        session_id: str = "default",
        ttl_seconds: int | None = None,
        max_messages: int | None = None,
        *,
        key_prefix: str = "synapsedb:conversation:",
        client: redis.Redis | None = None,
    ) -> None:
        super().__init__(max_messages)
        self.session_id = check_session_id(session_id)
        self.ttl_seconds = _check_ttl(ttl_seconds)
        if not isinstance(key_prefix, str) or len(key_prefix) > _KEY_PREFIX_MAX:
            raise ValidationError(
                f"key_prefix: expected a string of at most {_KEY_PREFIX_MAX} characters",
                field="key_prefix",
                limit=_KEY_PREFIX_MAX,
            )
        self.key = f"{key_prefix}{self.session_id}".encode()
        self._owns = client is None
        if client is None:
            try:
                import redis
            except ImportError:
                raise _missing("redis", "redis-py") from None
            if not isinstance(url, str):
                raise ValidationError(
                    f"url: expected a string, got {type(url).__name__}", field="url"
                )
            try:
                client = redis.Redis.from_url(url, socket_connect_timeout=10, socket_timeout=30)
            except ValueError as e:
                raise ValidationError(f"url: {e}", field="url") from None
        self._client = client

    def _add_sync(self, turn: Turn) -> None:
        value = orjson.dumps(turn)
        with self._errors(), self._client.pipeline(transaction=True) as pipe:
            pipe.rpush(self.key, value)
            if self.max_messages is not None:
                pipe.ltrim(self.key, -self.max_messages, -1)
            if self.ttl_seconds is not None:
                pipe.expire(self.key, self.ttl_seconds)
            pipe.execute()

    def _get_sync(self) -> list[Turn]:
        start = -self.max_messages if self.max_messages is not None else 0
        with self._errors():
            raw = self._client.lrange(self.key, start, -1)
        turns = []
        for i, item in enumerate(raw):
            try:
                value = orjson.loads(item)
            except orjson.JSONDecodeError:
                value = None
            turns.append(_turn_from_store(value, f"redis list {self.key!r}, item {i}"))
        return turns

    def _clear_sync(self) -> None:
        with self._errors():
            self._client.delete(self.key)

    def close(self) -> None:
        """Close the connection pool (not a ``client`` that was passed in)."""
        if self._owns:
            self._client.close()

    def _errors(self) -> _Translate:
        import redis

        return _Translate(redis.RedisError, "redis")


class PostgresMemory(BlockingMemory):
    """Every session in one PostgreSQL table; this object's rows are ``session_id``'s.

    ``max_messages`` keeps the newest that many rows of the session (older rows are deleted in
    the append's transaction). PostgreSQL text cannot hold NUL characters, so content with one is
    refused (ValidationError) before anything is sent. One connection per object, opened on
    first use and again after it broke; calls from several threads take turns on it.
    """

    def __init__(
        self,
        dsn: str,
        session_id: str = "default",
        max_messages: int | None = None,
        *,
        table: str = "synapsedb_conversations",
        connect_timeout: float = 10.0,
    ) -> None:
        super().__init__(max_messages)
        try:
            import psycopg  # noqa: F401  (fail here, with the extra to install)
        except ImportError:
            raise _missing("postgres", "psycopg") from None
        if not isinstance(dsn, str) or not dsn.strip():
            raise ValidationError("dsn: expected a PostgreSQL connection string", field="dsn")
        if not isinstance(table, str) or not _TABLE_RE.match(table):
            raise ValidationError(
                f"table: {table!r} is not a plain table name; use 1-48 characters of "
                "[a-z0-9_] starting with a letter or _",
                field="table",
                limit=48,
            )
        self.dsn = dsn
        self.session_id = check_session_id(session_id)
        self.table = table
        self.connect_timeout = connect_timeout
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        self._sql = _Statements(table)

    def _connection(self) -> psycopg.Connection[Any]:
        import psycopg

        if self._conn is not None and not self._conn.closed:
            return self._conn
        self._conn = psycopg.connect(
            self.dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout))
        )
        with self._conn.transaction():
            # one creator at a time: two first uses at once would race in CREATE TABLE
            self._conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"synapsedb:create:{self.table}",),
            )
            self._conn.execute(self._sql.create_table)
            self._conn.execute(self._sql.create_index)
        return self._conn

    def _run(self, work: Any) -> Any:
        import psycopg

        with self._lock:
            try:
                return work(self._connection())
            except psycopg.Error as e:
                if self._conn is not None and (self._conn.broken or self._conn.closed):
                    self._conn = None  # reconnect at the next call
                raise StorageError(f"postgres: {type(e).__name__}: {e}") from e

    def _add_sync(self, turn: Turn) -> None:
        if "\x00" in turn["content"]:
            raise ValidationError(
                "content: PostgreSQL text cannot hold NUL characters", field="content"
            )

        def add(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute(self._sql.lock, (self.table, self.session_id))
                conn.execute(self._sql.insert, (self.session_id, turn["role"], turn["content"]))
                if self.max_messages is not None:
                    conn.execute(
                        self._sql.trim, (self.session_id, self.session_id, self.max_messages - 1)
                    )

        self._run(add)

    def _get_sync(self) -> list[Turn]:
        def get(conn: psycopg.Connection[Any]) -> list[Any]:
            return conn.execute(self._sql.select, (self.session_id, self.max_messages)).fetchall()

        rows = self._run(get)
        return [_turn_from_store({"role": r, "content": c}, f"table {self.table}") for r, c in rows]

    def _clear_sync(self) -> None:
        self._run(lambda conn: conn.execute(self._sql.delete, (self.session_id,)))

    def close(self) -> None:
        """Close this object's connection (the next call opens a new one)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class _Statements:
    """The SQL of one table: the name goes in as a quoted identifier, values as parameters."""

    def __init__(self, table: str) -> None:
        from psycopg import sql

        t = sql.Identifier(table)
        roles = sql.SQL(", ").join(sql.Literal(r) for r in ROLES)
        self.create_table = sql.SQL(
            "CREATE TABLE IF NOT EXISTS {t} ("
            " id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " session_id TEXT NOT NULL,"
            " role TEXT NOT NULL CHECK (role IN ({roles})),"
            " content TEXT NOT NULL,"
            " created_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        ).format(t=t, roles=roles)
        self.create_index = sql.SQL(
            "CREATE INDEX IF NOT EXISTS {i} ON {t} (session_id, id)"
        ).format(i=sql.Identifier(f"{table}_session_idx"), t=t)
        self.lock = sql.SQL("SELECT pg_advisory_xact_lock(hashtextextended(%s || ':' || %s, 0))")
        self.insert = sql.SQL(
            "INSERT INTO {t} (session_id, role, content) VALUES (%s, %s, %s)"
        ).format(t=t)
        # keep the newest N: delete what is older than the N-th newest row (OFFSET N-1)
        self.trim = sql.SQL(
            "DELETE FROM {t} WHERE session_id = %s AND id < ("
            " SELECT id FROM {t} WHERE session_id = %s ORDER BY id DESC OFFSET %s LIMIT 1)"
        ).format(t=t)
        # LIMIT NULL is no limit: the newest N (or all), then oldest first
        self.select = sql.SQL(
            "SELECT role, content FROM ("
            " SELECT id, role, content FROM {t} WHERE session_id = %s ORDER BY id DESC LIMIT %s"
            ") newest ORDER BY id"
        ).format(t=t)
        self.delete = sql.SQL("DELETE FROM {t} WHERE session_id = %s").format(t=t)


class _Translate:
    """``with`` block turning a client library's errors into StorageError."""

    def __init__(self, kind: type[BaseException], name: str) -> None:
        self.kind = kind
        self.name = name

    def __enter__(self) -> None:
        return None

    def __exit__(self, tp: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is not None and isinstance(exc, self.kind):
            raise StorageError(f"{self.name}: {type(exc).__name__}: {exc}") from exc


def _check_ttl(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TTL_S:
        raise ValidationError(
            f"ttl_seconds: expected whole seconds in 1..{MAX_TTL_S} or None, got {value!r}",
            field="ttl_seconds",
            limit=MAX_TTL_S,
        )
    return value
