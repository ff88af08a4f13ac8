"""MCP resources: a namespace's entities, each readable as what is known about it.

``synapsedb://<namespace>/entities`` is the list of entities with something visible, and
``synapsedb://<namespace>/entities/<entity>`` an entity's snapshot: its KV facts, memories and
stream events (``Namespace.snapshot``). Both take ``?as_of=<time>`` (what was known then).
Namespace and entity are percent-encoded path segments (``user:4321`` is ``user%3A4321``).

The list holds at most :data:`MAX_NAMES` names (a namespace may have 100,000): past them its
answer carries ``next``, the URI of the following names (``?after=<the last name>``); the list
URI also takes ``prefix=`` (names starting with it), as ``Namespace.entities`` does.

``resources/list`` pages too: :func:`page` asks ``Namespace.entities`` for one page of names
after the cursor, never for all of them; the cursor is the page's last name, encoded so that a
client treats it as opaque (MCP's cursors are).

SynapseDB's own entities (``synapsedb:...``: the memory loop's jobs and settings,
:func:`synapsedb.validation.is_internal_entity`) are no tenant's data: they are left out of
both lists, and reading one is ``not_found``.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

from ...errors import NotFoundError, ValidationError
from ...validation import MAX_NAME_CHARS, is_internal_entity

__all__ = [
    "MAX_NAMES",
    "PAGE",
    "SCHEME",
    "ResourceRef",
    "entities_uri",
    "entity_uri",
    "parse_uri",
]

SCHEME = "synapsedb://"
PAGE = 100  # resources per resources/list page
MAX_NAMES = 1_000  # names in one read of the entities list; ``next`` gives the rest
MAX_URI = 4096
TEMPLATES = (
    (
        "entities",
        SCHEME + "{namespace}/entities{?as_of,prefix,after}",
        f"The entities of a namespace with something visible, sorted, at most {MAX_NAMES:,} "
        "(next: the URI of the rest; as_of: then; prefix: names starting with it; after: names "
        "sorting after it)",
    ),
    (
        "entity",
        SCHEME + "{namespace}/entities/{entity}{?as_of}",
        "What is known about an entity: its facts, memories and events (as_of: then)",
    ),
)


@dataclass(frozen=True)
class ResourceRef:
    """A parsed resource URI: the namespace, the entity (None: the list) and ``as_of``."""

    namespace: str
    entity: str | None
    as_of: str | None
    prefix: str | None = None  # the list only: names starting with it
    after: str | None = None  # the list only: names sorting after it

    def read(self, ns: Any) -> Any:
        """The resource's content from a namespace handle: the entity's snapshot, or
        ``{"entities": [...]}`` with at most MAX_NAMES names and, when more follow, ``next``:
        the URI that reads them."""
        if self.entity is not None:
            if is_internal_entity(self.entity):
                raise NotFoundError(
                    f"entity {self.entity[:100]!r}: no such resource", entity=self.entity
                )
            return ns.snapshot(self.entity, as_of=self.as_of)
        names = visible_entities(
            ns, MAX_NAMES + 1, as_of=self.as_of, prefix=self.prefix, after=self.after
        )
        if len(names) <= MAX_NAMES:
            return {"entities": names}
        names = names[:MAX_NAMES]
        query = [
            (k, v) for k, v in (("as_of", self.as_of), ("prefix", self.prefix)) if v is not None
        ] + [("after", names[-1])]
        more = "&".join(f"{k}={quote(v, safe='')}" for k, v in query)
        return {"entities": names, "next": f"{entities_uri(self.namespace)}?{more}"}


def _segment(value: str) -> str:
    return quote(value, safe="")


def entities_uri(namespace: str) -> str:
    return f"{SCHEME}{_segment(namespace)}/entities"


def entity_uri(namespace: str, entity: str) -> str:
    return f"{SCHEME}{_segment(namespace)}/entities/{_segment(entity)}"


def parse_uri(uri: str) -> ResourceRef:
    """``uri`` as a :class:`ResourceRef`; anything else is a ValidationError naming ``uri``."""
    if not isinstance(uri, str) or len(uri) > MAX_URI:
        raise ValidationError(
            f"uri: expected a string of at most {MAX_URI} characters", field="uri", limit=MAX_URI
        )
    shape = f"expected {SCHEME}<namespace>/entities[/<entity>][?as_of=<time>]"
    if not uri.startswith(SCHEME):
        raise ValidationError(
            f"uri: {uri[:100]!r} is not a SynapseDB resource; {shape}", field="uri"
        )
    path, _, query = uri[len(SCHEME) :].partition("?")
    parts = path.split("/")
    if len(parts) not in (2, 3) or parts[1] != "entities" or not all(parts):
        raise ValidationError(f"uri: {uri[:100]!r}: {shape}", field="uri")
    entity = unquote(parts[2]) if len(parts) == 3 else None
    known = ("as_of",) if entity is not None else ("as_of", "prefix", "after")
    given: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in known:
            raise ValidationError(
                f"uri: unknown parameter {name[:40]!r}; only {', '.join(known)}", field="uri"
            )
        given[name] = value
    return ResourceRef(
        unquote(parts[0]), entity, given.get("as_of"), given.get("prefix"), given.get("after")
    )


_CURSOR = re.compile(r"[A-Za-z0-9_-]+")
_MAX_CURSOR = (MAX_NAME_CHARS * 4 * 4 + 2) // 3  # a name of 256 four-byte characters


def encode_cursor(name: str) -> str:
    """``resources/list``'s cursor after the entity ``name``: base64url, unpadded."""
    return base64.urlsafe_b64encode(name.encode()).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str) -> str:
    """The entity name a cursor from :func:`encode_cursor` holds; anything else is a
    ValidationError naming ``cursor``."""
    bad = ValidationError("cursor: not a cursor this server gave", field="cursor")
    if len(cursor) > _MAX_CURSOR or not _CURSOR.fullmatch(cursor) or len(cursor) % 4 == 1:
        raise bad
    try:
        name = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise bad from None
    if not name or encode_cursor(name) != cursor:  # one spelling per name
        raise bad
    return name


def page(ns: Any, cursor: str | None) -> tuple[list[str], str | None]:
    """One ``resources/list`` page of the entities of ``ns`` (at most :data:`PAGE`), after the
    name ``cursor`` holds, and the cursor of the next page (None: this is the last). Asks
    ``ns.entities`` for PAGE + 1 names, never the whole list."""
    after = None if cursor is None else decode_cursor(cursor)
    names = visible_entities(ns, PAGE + 1, after=after)
    if len(names) <= PAGE:
        return names, None
    return names[:PAGE], encode_cursor(names[PAGE - 1])


def visible_entities(ns: Any, limit: int, *, after: str | None = None, **where: Any) -> list[str]:
    """At most ``limit`` entity names of ``ns`` after ``after``, SynapseDB's own left out
    (``where``: ``as_of``, ``prefix``). Asks for pages of ``limit`` names, past the internal
    ones while they took places in a page."""
    found: list[str] = []
    while len(found) < limit:
        names = ns.entities(after=after, limit=limit, **where)
        found += [n for n in names if not is_internal_entity(n)]
        if len(names) < limit:
            break
        after = names[-1]
    return found[:limit]
