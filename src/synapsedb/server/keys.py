"""API keys and tenants.

Keys live in ``<data dir>/keys.db`` (SQLite), apart from the engine's files and lock, so
``synapsedb keys create`` works while a server runs; the server re-reads the file when it
changes. A key reads ``sdb_<id>_<secret>``; only a SHA-256 of the secret is stored (secrets are
32 random bytes, so a plain hash is enough), and it is shown once, at creation.

A key belongs to a tenant and has scopes: ``read`` (reads and queries), ``write`` (writes,
forget without purge, answers) and ``admin`` (configure, maintain, purge). It may be limited
to some namespaces and to a request rate; a tenant may have a rate for all its keys together.
Namespaces are per tenant: the tenant's
``acme-support`` is the engine namespace ``<tenant>..acme-support``, so tenants cannot see, or
learn the existence of, each other's data.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from ..errors import NotFoundError, ValidationError

__all__ = ["SCOPES", "ApiKey", "KeyStore", "tenant_namespace"]

SCOPES = ("read", "write", "admin")
TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
SEP = ".."
_TOKEN = re.compile(r"^sdb_([a-z0-9]{12})_([A-Za-z0-9_-]{20,})$")


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    tenant: str
    scopes: tuple[str, ...]
    namespaces: tuple[str, ...] | None
    rate: float | None
    created_us: int
    revoked: bool


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


class KeyStore:
    FILENAME = "keys.db"

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.path = Path(directory) / self.FILENAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[ApiKey, str]] = {}
        self._tenant_rates: dict[str, float] = {}
        self._checked = float("-inf")
        self._mtime: float | None = None
        with self._conn() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, tenant TEXT NOT NULL,"
                " scopes TEXT NOT NULL, namespaces TEXT, rate REAL, hash TEXT NOT NULL,"
                " created_us INTEGER NOT NULL, revoked_us INTEGER)"
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS tenant_limits (tenant TEXT PRIMARY KEY, rate REAL)"
            )

    def _conn(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=10)
        os.chmod(self.path, 0o600)
        return conn

    def create(
        self,
        tenant: str,
        scopes: list[str],
        namespaces: list[str] | None = None,
        rate: float | None = None,
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
            raise ValidationError("rate: expected a positive number of requests per second",
                                  field="rate")  # fmt: skip
        key_id = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(12))
        secret = secrets.token_urlsafe(32)
        now = time.time_ns() // 1000
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                (key_id, tenant, ",".join(scopes),
                 None if namespaces is None else orjson.dumps(namespaces).decode(), rate,
                 _hash(secret), now),
            )  # fmt: skip
        key = ApiKey(key_id, tenant, tuple(scopes), None if namespaces is None
                     else tuple(namespaces), rate, now, False)  # fmt: skip
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
            raise ValidationError("rate: expected a positive number of requests per second",
                                  field="rate")  # fmt: skip
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
                "SELECT id, tenant, scopes, namespaces, rate, created_us, revoked_us "
                "FROM api_keys ORDER BY created_us"
            ).fetchall()
        return [ApiKey(i, t, tuple(s.split(",")), None if n is None else tuple(orjson.loads(n)),
                       r, c, v is not None) for i, t, s, n, r, c, v in rows]  # fmt: skip

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < 0.001:  # a busy server looks at the file at most every 1 ms
            return
        self._checked = now
        mtime = self.path.stat().st_mtime
        wal = self.path.with_name(self.FILENAME + "-wal")
        if wal.exists():
            mtime = max(mtime, wal.stat().st_mtime)
        if mtime == self._mtime:
            return
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT id, tenant, scopes, namespaces, rate, created_us, hash FROM api_keys "
                "WHERE revoked_us IS NULL"
            ).fetchall()
        self._cache = {
            i: (ApiKey(i, t, tuple(s.split(",")), None if n is None
                       else tuple(orjson.loads(n)), r, c, False), h)
            for i, t, s, n, r, c, h in rows
        }  # fmt: skip
        with self._conn() as conn:
            self._tenant_rates = dict(conn.execute("SELECT tenant, rate FROM tenant_limits"))
        self._mtime = mtime

    @property
    def enabled(self) -> bool:
        """Whether any live key exists (then every request must carry one)."""
        with self._lock:
            self._refresh()
            return bool(self._cache)

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
