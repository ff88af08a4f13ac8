"""The HTTP server: ``create_app(db)`` and ``serve(...)``. Imports web libraries; the engine
does not."""

from .app import create_app

__all__ = ["create_app"]
