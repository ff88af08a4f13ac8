"""The engine core: imports no HTTP, CLI or metrics libraries."""

from .database import Database
from .namespace import Namespace

__all__ = ["Database", "Namespace"]
