"""The remote client: the embedded API's methods over HTTP."""

from .asyncio import AsyncRemoteDatabase
from .sync import RemoteDatabase, RemoteNamespace

__all__ = ["AsyncRemoteDatabase", "RemoteDatabase", "RemoteNamespace"]
