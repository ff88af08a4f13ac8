"""Why a namespace is unavailable: the first stored row of it that could not be loaded (or a
reload that failed), told to an operator with the repair and to a caller as a StorageError.

Kept apart from the loader so that the writer, which makes a namespace unavailable when
rebuilding it fails, needs nothing of the loading machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..errors import StorageError

__all__ = ["Unloadable"]


class Repairable(Protocol):
    """What the repair advice needs of the storage (every backend has it)."""

    def repair_command(self, statement: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Unloadable:
    """Why a namespace could not be loaded: its first bad row."""

    table: str
    ns: str
    where: str  # an SQL condition selecting the row
    reason: str

    def describe(self, storage: Repairable) -> str:
        """The whole story for an operator: what, where, and the repair (a statement, and the
        command that runs it on ``storage``: sqlite3 on the file, psql on the schema)."""
        hint = ""
        if "later than this server's clock" in self.reason:
            hint = "if this server's clock is wrong, correct it and restart; otherwise "
        fix = f"DELETE FROM {self.table} WHERE {self.where}"
        if self.table == "namespaces" and self.reason.startswith("config"):
            fix = f"UPDATE namespaces SET config = NULL WHERE {self.where}"  # default settings
        return (
            f"namespace {self.ns!r} is unavailable (the other namespaces serve): table "
            f"{self.table}, row where {self.where}: {self.reason}. Repair: {hint}correct or "
            f"remove that row, e.g. {storage.repair_command(fix)}, then restart"
        )

    def error(self) -> StorageError:
        """What a read or write of the namespace answers (the log has the repair)."""
        return StorageError(
            f"namespace {self.ns!r} is unavailable: its stored row in {self.table} where "
            f"{self.where} could not be loaded ({self.reason}); an operator must repair it "
            "(the server log says how)",
            namespace=self.ns,
        )
