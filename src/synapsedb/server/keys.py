"""API keys and tenants.

Keys live in ``<data dir>/keys.db`` (SQLite), apart from the engine's files and lock, so
``synapsedb keys create`` works while a server runs. The server notices every change on the
very next request: it stats the file and reads the change counter SQLite keeps in its header
(bumped by every commit; ``PRAGMA data_version`` on a kept connection where that counter is
not kept), so a deleted, replaced or emptied ``keys.db`` leaves it with no valid key at all
(every request 401s in ``keys`` mode: never an open server). A key reads ``sdb_<id>_<secret>``; only a SHA-256 of the
secret is stored (secrets are 32 random bytes, so a plain hash is enough), and it is shown
once, at creation.

``keys.db`` is private: created with mode 0600, and a laxer mode is tightened when it is opened.
A keys file or data directory that cannot be used (a read-only mount, missing permissions, not
a database) is a StorageError naming the path and the fix, never a raw OS or SQLite error.

A key belongs to a tenant and has scopes: ``read`` (reads and queries), ``write`` (writes,
forget without purge, answers), ``admin`` (configure, maintain, purge, the tenant's metrics)
and ``operator`` (the server's own metrics over every tenant; no tenant data by itself). It
may be limited to some namespaces, to a request rate, and to some agent names (then the agent a
request names must be one of them); a tenant may have a rate for all its keys together.
Namespaces are per tenant: the tenant's ``acme-support`` is the engine namespace
``<tenant>..acme-support``, so tenants cannot see, or learn the existence of, each other's data.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import logging
import os
import re
import secrets
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import NotFoundError, StorageError, ValidationError
from ..validation import check_agent

__all__ = ["OPERATOR", "SCOPES", "ApiKey", "KeyStore", "tenant_namespace"]

log = logging.getLogger("synapsedb.server")

OPERATOR = "operator"
SCOPES = ("read", "write", "admin", OPERATOR)
TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
SEP = ".."
_TOKEN = re.compile(r"^sdb_([a-z0-9]{12})_([A-Za-z0-9_-]{20,})$")
_COLUMNS = "id, tenant, scopes, namespaces, rate, created_us, agents"


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    tenant: str
    scopes: tuple[str, ...]
    namespaces: tuple[str, ...] | None
    rate: float | None
    created_us: int
    revoked: bool
    agents: tuple[str, ...] | None = None  # the agent names it may act as (None: any)


def tenant_namespace(tenant: str, name: str) -> str:
    """The engine namespace behind a tenant's namespace ``name``."""
    if SEP in name:
        raise ValidationError(f"namespace: {name!r} must not contain {SEP!r}", field="namespace")
    full = f"{tenant}{SEP}{name}"
    if len(full) > 64:
        raise ValidationError(
            f"namespace: {name!r} is too long for tenant {tenant!r} "
            f"({64 - len(tenant) - len(SEP)} characters at most)",
            field="namespace",
            limit=64 - len(tenant) - len(SEP),
        )
    return full


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _key(row: tuple, revoked: bool = False) -> ApiKey:  # type: ignore[type-arg]
    i, t, s, n, r, c, a = row
    return ApiKey(
        i,
        t,
        tuple(s.split(",")),
        None if n is None else tuple(orjson.loads(n)),
        r,
        c,
        revoked,
        None if a is None else tuple(orjson.loads(a)),
    )


class KeyStore:
    FILENAME = "keys.db"
    MODE = 0o600

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.path = Path(directory) / self.FILENAME
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise self._unusable(self.path.parent, exc) from exc
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[ApiKey, str]] = {}
        self._tenant_rates: dict[str, float] = {}
        self._reader: sqlite3.Connection | None = None
        self._fd: int | None = None  # keys.db opened for reading its header
        self._seen: tuple[tuple[int, int, int, int], tuple[str, Any]] | None = None
        with self._conn() as conn:
            self._create_tables(conn)

    @staticmethod
    def _create_tables(conn: sqlite3.Connection) -> None:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, tenant TEXT NOT NULL,"
            " scopes TEXT NOT NULL, namespaces TEXT, rate REAL, hash TEXT NOT NULL,"
            " created_us INTEGER NOT NULL, revoked_us INTEGER, agents TEXT)"
        )
        columns = {row[1] for row in conn.execute("PRAGMA table_info(api_keys)")}
        if "agents" not in columns:  # a keys.db from before agent binding
            conn.execute("ALTER TABLE api_keys ADD COLUMN agents TEXT")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS tenant_limits (tenant TEXT PRIMARY KEY, rate REAL)"
        )

    @contextlib.contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        """A connection to keys.db (made private first) in a transaction, committed at the end
        and closed; an OS or SQLite failure is a StorageError with the path and the fix."""
        try:
            self._make_private()
            conn = sqlite3.connect(self.path, timeout=10)
            try:
                with conn:
                    yield conn
            finally:
                conn.close()
        except (OSError, sqlite3.Error) as exc:
            raise self._unusable(self.path, exc) from exc

    def _make_private(self) -> None:
        """keys.db exists with mode 0600: created so, or tightened (left alone when it already
        is, so listing the keys of a read-only data directory works)."""
        try:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, self.MODE))
        except FileExistsError:
            if stat.S_IMODE(os.stat(self.path).st_mode) != self.MODE:
                os.chmod(self.path, self.MODE)

    @staticmethod
    def _unusable(path: Path, exc: OSError | sqlite3.Error) -> StorageError:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        if isinstance(exc, OSError) and exc.errno == errno.EROFS:
            fix = "the file system is mounted read-only; mount it read-write"
        else:
            where = path.parent if path.name == KeyStore.FILENAME else path
            fix = (
                f"give user id {os.geteuid()} write access to {where} and its files (e.g. "
                f"chown -R {os.geteuid()} {where} && chmod -R u+rwX {where}), or restore "
                f"{where / KeyStore.FILENAME} from a copy if it is damaged"
            )
        return StorageError(
            f"keys: cannot use {path}: {reason}. API keys are kept in "
            f"{KeyStore.FILENAME} in the data directory: {fix}",
            path=str(path),
        )

    def create(
        self,
        tenant: str,
        scopes: list[str],
        namespaces: list[str] | None = None,
        rate: float | None = None,
        agents: list[str] | None = None,
    ) -> tuple[ApiKey, str]:
        """A new key; returns it and its token (shown once, never stored)."""
        if not TENANT_RE.match(tenant):
            raise ValidationError(
                f"tenant: {tenant!r} is not a valid tenant; use 1-32 characters of [a-z0-9-]",
                field="tenant",
                limit=32,
            )
        if not scopes or any(s not in SCOPES for s in scopes):
            raise ValidationError(
                f"scopes: expected some of {', '.join(SCOPES)}, got {scopes!r}", field="scopes"
            )
        for name in namespaces or ():
            tenant_namespace(tenant, name)
        if rate is not None and not rate > 0:
            raise ValidationError(
                "rate: expected a positive number of requests per second", field="rate"
            )
        if agents is not None:
            if not agents:
                raise ValidationError("agents: expected at least one agent name", field="agents")
            for agent in agents:
                check_agent(agent, "agents")
            agents = list(dict.fromkeys(agents))
        key_id = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(12))
        secret = secrets.token_urlsafe(32)
        now = time.time_ns() // 1000
        with self._conn() as conn:
            self._create_tables(conn)  # the file may have been deleted since
            conn.execute(
                "INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?)",
                (
                    key_id,
                    tenant,
                    ",".join(scopes),
                    None if namespaces is None else orjson.dumps(namespaces).decode(),
                    rate,
                    _hash(secret),
                    now,
                    None if agents is None else orjson.dumps(agents).decode(),
                ),
            )
        key = ApiKey(
            key_id,
            tenant,
            tuple(scopes),
            None if namespaces is None else tuple(namespaces),
            rate,
            now,
            False,
            None if agents is None else tuple(agents),
        )
        return key, f"sdb_{key_id}_{secret}"

    def revoke(self, key_id: str) -> None:
        with self._conn() as conn:
            cur = conn.execute(
                "UPDATE api_keys SET revoked_us = ? WHERE id = ? AND revoked_us IS NULL",
                (time.time_ns() // 1000, key_id),
            )
            if cur.rowcount == 0:
                raise NotFoundError(f"key {key_id!r} not found (or already revoked)", id=key_id)

    def set_tenant_rate(self, tenant: str, rate: float | None) -> None:
        """Limit all of ``tenant``'s keys together to ``rate`` requests per second (None: no
        tenant-wide limit; each key's own rate still applies)."""
        if not TENANT_RE.match(tenant):
            raise ValidationError(f"tenant: {tenant!r} is not a valid tenant", field="tenant")
        if rate is not None and not rate > 0:
            raise ValidationError(
                "rate: expected a positive number of requests per second", field="rate"
            )
        with self._conn() as conn:
            if rate is None:
                conn.execute("DELETE FROM tenant_limits WHERE tenant = ?", (tenant,))
            else:
                conn.execute("INSERT OR REPLACE INTO tenant_limits VALUES (?, ?)", (tenant, rate))

    def tenant_rates(self) -> dict[str, float]:
        with self._lock:
            self._refresh()
            return dict(self._tenant_rates)

    def tenant_rate(self, tenant: str) -> float | None:
        return self._tenant_rates.get(tenant)  # refreshed by authenticate() just before

    def list(self) -> list[ApiKey]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS}, revoked_us FROM api_keys ORDER BY created_us"
            ).fetchall()
        return [_key(row[:-1], row[-1] is not None) for row in rows]

    def _forget(self) -> None:
        """No keys at all (the file is gone or unreadable): every token fails."""
        if self._reader is not None:
            self._reader.close()
        if self._fd is not None:
            os.close(self._fd)
        self._reader, self._fd, self._seen = None, None, None
        self._cache, self._tenant_rates = {}, {}

    def _marker(self) -> tuple[str, Any]:
        """What changes with every commit to keys.db: the file change counter in its header
        (rollback journal mode, SQLite bumps it on every commit; reading 100 bytes costs one
        syscall), else (WAL, or not a database) SQLite's own ``PRAGMA data_version``."""
        assert self._fd is not None and self._reader is not None
        header = os.pread(self._fd, 100, 0)
        if len(header) == 100 and header[:16] == b"SQLite format 3\x00" and header[18] == 1:
            return "counter", header[24:28]
        return "version", self._reader.execute("PRAGMA data_version").fetchone()[0]

    def _refresh(self) -> None:
        """Reload the live keys if ``keys.db`` changed since the last look (lock held). The
        marker is read before the rows, so a commit in between is seen by the next look."""
        try:
            st = os.stat(self.path)
        except OSError:
            self._forget()
            return
        file = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        try:
            if self._fd is None or self._seen is None or self._seen[0][:2] != file[:2]:
                self._forget()  # another file now (or none read yet): new handles on it
                self._fd = os.open(self.path, os.O_RDONLY)
                uri = self.path.resolve().as_uri() + "?mode=ro"
                self._reader = sqlite3.connect(uri, uri=True, timeout=10, check_same_thread=False)
            marker = self._marker()
            if self._seen == (file, marker):
                return
            assert self._reader is not None
            rows = self._reader.execute(
                f"SELECT {_COLUMNS}, hash FROM api_keys WHERE revoked_us IS NULL"
            ).fetchall()
            rates = dict(self._reader.execute("SELECT tenant, rate FROM tenant_limits"))
        except (OSError, sqlite3.Error) as exc:  # emptied, replaced, corrupt: no keys at all
            log.warning(
                "keys: %s unreadable (%s); no API key is valid until it is fixed", self.path, exc
            )
            self._forget()
            return
        self._cache = {row[0]: (_key(row[:-1]), row[-1]) for row in rows}
        self._tenant_rates = rates
        self._seen = (file, marker)

    def has_live_keys(self) -> bool:
        """Whether any unrevoked key exists now (``serve`` asks this once, at start)."""
        with self._lock:
            self._refresh()
            return bool(self._cache)

    def is_live(self, key_id: str) -> bool:
        """Whether the key ``key_id`` still exists unrevoked (long-lived feeds ask this)."""
        with self._lock:
            self._refresh()
            return key_id in self._cache

    def authenticate(self, token: str) -> ApiKey | None:
        m = _TOKEN.match(token)
        if m is None:
            return None
        with self._lock:
            self._refresh()
            found = self._cache.get(m.group(1))
        if found is None or not hmac.compare_digest(found[1], _hash(m.group(2))):
            return None
        return found[0]

    def close(self) -> None:
        with self._lock:
            self._forget()
