"""The remote client: the embedded API's methods over HTTP, sync and async."""

from .aio_namespace import AsyncRemoteNamespace
from .asyncio import AsyncRemoteDatabase
from .sync import RemoteDatabase, RemoteNamespace

__all__ = ["AsyncRemoteDatabase", "AsyncRemoteNamespace", "RemoteDatabase", "RemoteNamespace"]
