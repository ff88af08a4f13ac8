"""Public value objects of SynapseDB: what every operation returns, embedded and over HTTP.

They are immutable snapshots: changing the database never changes an object you already hold,
and changing a returned ``metadata`` dict never changes the database. The client decodes the
server's answers into these very classes, so this package imports nothing but the leaves
(``errors``, ``times``).

- :mod:`.records`: memories, facts, events, queries and their hits, lineage, audit, snapshots,
  lifecycle reports and settings, and the memory loop's answers;
- :mod:`.messages`: a chat :class:`Message`, checked when it is built;
- :mod:`.sessions`: a conversation session's :class:`SessionInfo` and loaded messages;
- :mod:`.cache`: the semantic cache's entries, hits and counts;
- :mod:`.access`: what an API key may do (:class:`WhoAmI`).
"""

from .access import WhoAmI
from .cache import CacheEntry, CacheHit, CacheStats, ScopeStats
from .messages import Message, MessageLike, Role
from .records import (
    BUILTIN_TYPES,
    AuditEntry,
    Decision,
    Event,
    Fact,
    Forgotten,
    Hit,
    Lineage,
    LoggedQuery,
    MaintenanceReport,
    Memory,
    MemoryAccess,
    MemoryRef,
    NamespaceConfig,
    QueryResult,
    Recalled,
    Recollection,
    Remembered,
    Snapshot,
    Stats,
)
from .sessions import SessionInfo, SessionMessages

__all__ = [
    "BUILTIN_TYPES",
    "AuditEntry",
    "CacheEntry",
    "CacheHit",
    "CacheStats",
    "Decision",
    "Event",
    "Fact",
    "Forgotten",
    "Hit",
    "Lineage",
    "LoggedQuery",
    "MaintenanceReport",
    "Memory",
    "MemoryAccess",
    "MemoryRef",
    "Message",
    "MessageLike",
    "NamespaceConfig",
    "QueryResult",
    "Recalled",
    "Recollection",
    "Remembered",
    "Role",
    "ScopeStats",
    "SessionInfo",
    "SessionMessages",
    "Snapshot",
    "Stats",
    "WhoAmI",
]
