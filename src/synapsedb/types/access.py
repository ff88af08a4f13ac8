"""What a caller's API key may do, as ``GET /v1/whoami`` answers it."""

from __future__ import annotations

import msgspec

__all__ = ["WhoAmI"]


class WhoAmI(msgspec.Struct, forbid_unknown_fields=True):
    """``GET /v1/whoami``'s answer (the server's ``routes/console.py`` ``describe``; a test
    holds the two together): what the caller's key may do, never its secret."""

    auth: str  # the server's auth mode: none or keys
    key: str | None  # the key's id (null in none mode)
    tenant: str | None
    scopes: list[str]
    namespaces: list[str] | None  # null: any namespace
    agents: list[str] | None  # null: any agent
