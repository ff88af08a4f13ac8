"""Chat messages: :class:`Message` lives in :mod:`synapsedb.types.messages` (a wire value
type); this module keeps the old import path."""

from ..types.messages import (
    MAX_CONTENT_BYTES,
    MAX_NAME_CHARS,
    ROLES,
    Message,
    MessageLike,
    Role,
)

__all__ = ["MAX_CONTENT_BYTES", "MAX_NAME_CHARS", "ROLES", "Message", "MessageLike", "Role"]
