"""Durable storage behind a small protocol; SQLite is the embedded default."""

from .base import Batch, LoadedRows, Storage
from .sqlite import SQLiteStorage

__all__ = ["Batch", "LoadedRows", "SQLiteStorage", "Storage"]
