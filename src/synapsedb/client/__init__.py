"""The remote client: the embedded API's methods over HTTP."""

from .sync import RemoteDatabase, RemoteNamespace

__all__ = ["RemoteDatabase", "RemoteNamespace"]
