"""LangChain adapters (``pip install 'synapsedb[langchain]'``; docs/integrations/langchain.md).

- :class:`SynapseChatMessageHistory`: a ``BaseChatMessageHistory`` on SynapseDB's sessions
  (:class:`synapsedb.conversation.Sessions`): one session per id, messages mapped both ways
  (:mod:`.langchain_messages`, tool calls included), sync and async methods.
- :class:`SynapseVectorStore`: a ``VectorStore`` over the memories of one entity in a
  namespace: documents are memories (id, content, metadata), searched by vector with the
  filter language on their metadata, as of any moment.

Both take a namespace of an embedded database (``synapsedb.open(path).namespace(..)``) or of a
server (``synapsedb.connect(url, api_key=..).namespace(..)``: the key decides the tenant), and
use only the public namespace API.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.messages import BaseMessage
from langchain_core.vectorstores import VectorStore

from ..conversation import AsyncSessions, Sessions
from ..conversation.layout import check_session_id
from ..errors import NotFoundError, ValidationError
from .langchain_messages import from_langchain, to_langchain

__all__ = ["SynapseChatMessageHistory", "SynapseVectorStore"]

BATCH = 1000  # documents per write_many (the engine takes up to max_batch_items, 10,000)
SEARCH_MODES = ("vector", "hybrid", "keyword")
_BUILTIN_PREFIX = "metadata."
_ITEM = re.compile(r"items\[(\d+)\](\.?)([A-Za-z_]*)")
_ARGS = {"content": "texts", "metadata": "metadatas", "id": "ids", "embedding": "embeddings"}


class SynapseChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history kept as the SynapseDB session ``session_id``.

    ``namespace`` serves the sync methods (embedded or ``synapsedb.connect``);
    ``async_namespace`` (a ``synapsedb.connect_async(url).namespace(..)``, or an embedded
    one) the async methods. Given only ``namespace``, the async methods run the sync ones in
    a worker thread; given only ``async_namespace``, the sync methods raise
    ``ValidationError``. ``searchable=True`` also makes each message with text a memory that
    ``ns.query`` and ``ns.recall`` reach; ``ttl`` is the session's sliding time to live
    (seconds). ``clear()`` hides the messages from later reads (``Sessions.clear``: history
    and ``as_of`` reads still show them); ``Sessions(ns).purge(session_id)`` erases.
    """

    def __init__(
        self,
        session_id: str,
        namespace: Any = None,
        *,
        async_namespace: Any = None,
        searchable: bool = False,
        ttl: float | None = None,
    ) -> None:
        if namespace is None and async_namespace is None:
            raise ValidationError(
                "namespace: pass a namespace, an async_namespace or both", field="namespace"
            )
        self.session_id = session_id
        opts: dict[str, Any] = {"searchable": searchable, "ttl": ttl}
        self._sync = Sessions(namespace, **opts) if namespace is not None else None
        self._async = (
            AsyncSessions(async_namespace, **opts) if async_namespace is not None else None
        )
        check_session_id(session_id)

    def _sessions(self) -> Sessions:
        if self._sync is None:
            raise ValidationError(
                "namespace: this history was given only an async_namespace; use the async "
                "methods (aget_messages, aadd_messages, aclear)",
                field="namespace",
            )
        return self._sync

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages since its last clear, oldest first."""
        return [to_langchain(m) for m in self._sessions().load(self.session_id)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` in order; all are checked first (bad input stores nothing)."""
        msgs = _converted(messages)
        self._sessions().append_many(self.session_id, msgs)

    def clear(self) -> None:
        self._sessions().clear(self.session_id)

    async def aget_messages(self) -> list[BaseMessage]:
        if self._async is None:
            return await asyncio.to_thread(lambda: self.messages)
        return [to_langchain(m) for m in await self._async.load(self.session_id)]

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        msgs = _converted(messages)
        if self._async is None:
            await asyncio.to_thread(self._sessions().append_many, self.session_id, msgs)
        else:
            await self._async.append_many(self.session_id, msgs)

    async def aclear(self) -> None:
        if self._async is None:
            await asyncio.to_thread(self.clear)
        else:
            await self._async.clear(self.session_id)


def _converted(messages: Sequence[BaseMessage]) -> list[Any]:
    if isinstance(messages, BaseMessage) or not isinstance(messages, Sequence):
        raise ValidationError("messages: expected a list of LangChain messages", field="messages")
    return [from_langchain(m, f"messages[{i}]") for i, m in enumerate(messages)]


class SynapseVectorStore(VectorStore):
    """Documents as the memories of one ``entity`` (default ``"documents"``) in a namespace.

    A document's id is the memory id (its own, ``[A-Za-z0-9._:-]{1,128}``, or a ULID the
    engine assigns), its ``page_content`` the content, its ``metadata`` the memory's metadata
    (a JSON object, 16 KiB by default). Adding an existing id writes a new version of it (the
    old one stays in ``ns.history(id)``); ``delete`` tombstones. Vectors come from
    ``embedding`` (a LangChain ``Embeddings``) when given, else from the database's own
    embedder (the server's, over HTTP): a namespace keeps vectors of one source.

    Searches are ``ns.query(.., entity=entity, mode=search_mode, dedup=False)``: ``vector``
    (the default: scores are cosine similarities), or ``hybrid``/``keyword`` (SynapseDB's
    fused ranking, max-normalised per query). ``filter`` is SynapseDB's filter language
    (docs/concepts.md) over the documents' metadata: every field name is a metadata path
    (``{"id": 1}`` matches ``metadata["id"] == 1``, not the memory id). Every search also takes
    ``as_of=`` (what the store held then).
    """

    def __init__(
        self,
        namespace: Any,
        embedding: Embeddings | None = None,
        *,
        entity: str = "documents",
        search_mode: str = "vector",
    ) -> None:
        if search_mode not in SEARCH_MODES:
            raise ValidationError(
                f"search_mode: expected one of {', '.join(SEARCH_MODES)}, got {search_mode!r}",
                field="search_mode",
            )
        if embedding is not None and not isinstance(embedding, Embeddings):
            raise ValidationError(
                f"embedding: expected a LangChain Embeddings, got {type(embedding).__name__}",
                field="embedding",
            )
        if not isinstance(entity, str) or not entity:
            raise ValidationError("entity: expected a non-empty string", field="entity")
        self.namespace = namespace
        self.entity = entity
        self.search_mode = search_mode
        self._embedding = embedding

    @property
    def embeddings(self) -> Embeddings | None:
        return self._embedding

    # -- writes ---------------------------------------------------------------------------------

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Store ``texts`` (with ``metadatas`` and ``ids``, each one per text; an id of None gets a ULID) in batches of
        1,000, each batch one transaction. Returns the ids, in order."""
        _no_extra(kwargs, "add_texts")
        items = _items(list(texts), metadatas, ids)
        if not items:
            return []
        if self._embedding is not None:
            vectors = self._embedding.embed_documents([i["content"] for i in items])
            for item, vector in zip(items, vectors, strict=True):
                item["embedding"] = [float(x) for x in vector]
        out: list[str] = []
        for start in range(0, len(items), BATCH):
            batch = [{"entity": self.entity, **i} for i in items[start : start + BATCH]]
            try:
                out += [m.id for m in self.namespace.write_many(batch)]
            except ValidationError as err:
                raise _renamed(err, start) from err
        return out

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Tombstone the documents ``ids`` (ids not stored, or of another entity, are
        skipped). ``history(id)`` and ``as_of`` searches still show them."""
        _no_extra(kwargs, "delete")
        if ids is None:
            raise ValidationError(
                "ids: name the documents to delete; to drop every document of the store use "
                "ns.forget(entity=store.entity)",
                field="ids",
            )
        for doc_id in _id_list(ids):
            try:
                if self.namespace.get(doc_id).entity == self.entity:
                    self.namespace.delete(doc_id)
            except NotFoundError:  # not stored, or deleted meanwhile
                continue
        return True

    # -- reads ----------------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents among ``ids``, in that order; missing ids are left out."""
        docs: list[Document] = []
        for doc_id in _id_list(ids):
            try:
                memory = self.namespace.get(doc_id)
            except NotFoundError:
                continue
            if memory.entity == self.entity:
                docs.append(
                    Document(
                        page_content=memory.content,
                        metadata=dict(memory.metadata or {}),
                        id=memory.id,
                    )
                )
        return docs

    def similarity_search(
        self, query: str, k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The ``k`` documents nearest to ``query`` with their scores, best first."""
        if not isinstance(query, str):
            raise ValidationError("query: expected a string", field="query")
        if self._embedding is not None and self.search_mode != "keyword":
            vector = self._embedding.embed_query(query)
            text = query if self.search_mode == "hybrid" else None
            return self._search(text, vector, k, filter, kwargs)
        return self._search(query, None, k, filter, kwargs)

    def similarity_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        return [
            d
            for d, _ in self.similarity_search_by_vector_with_score(embedding, k, filter, **kwargs)
        ]

    def similarity_search_by_vector_with_score(
        self,
        embedding: list[float],
        k: int = 4,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        return self._search(None, embedding, k, filter, kwargs, mode="vector")

    def _search(
        self,
        text: str | None,
        vector: Sequence[float] | None,
        k: int,
        filter: Mapping[str, Any] | None,
        kwargs: dict[str, Any],
        mode: str | None = None,
    ) -> list[tuple[Document, float]]:
        as_of = kwargs.pop("as_of", None)
        _no_extra(kwargs, "similarity_search")
        result = self.namespace.query(
            text,
            embedding=None if vector is None else [float(x) for x in vector],
            entity=self.entity,
            filter=None if filter is None else metadata_filter(filter),
            k=k,
            mode=mode or self.search_mode,
            dedup=False,
            as_of=as_of,
        )
        return [
            (Document(page_content=h.content, metadata=dict(h.metadata or {}), id=h.id), h.score)
            for h in result.hits
        ]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Vector mode: a cosine similarity in [-1, 1] mapped to [0, 1]. The other modes'
        scores are already in [0, 1] (max-normalised per query, so relative, not absolute)."""
        if self.search_mode == "vector":
            return lambda score: max(0.0, min(1.0, (score + 1.0) / 2.0))
        return lambda score: max(0.0, min(1.0, score))

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> SynapseVectorStore:
        """A store over ``namespace=`` (required; ``entity=`` and ``search_mode=`` as in the
        constructor) holding ``texts``."""
        namespace = kwargs.pop("namespace", None)
        if namespace is None:
            raise ValidationError("namespace: from_texts needs namespace=", field="namespace")
        store = cls(namespace, embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=list(ids) if ids is not None else None)
        return store


def metadata_filter(value: Mapping[str, Any]) -> dict[str, Any]:
    """A filter over documents' metadata as SynapseDB's filter: every field name becomes a
    ``metadata.`` path (one already starting ``metadata.`` is kept), operators are kept."""
    if not isinstance(value, Mapping):
        raise ValidationError("filter: expected an object", field="filter")
    return _prefixed(value, "filter")


def _prefixed(node: Any, where: str) -> Any:
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, sub in node.items():
        if not isinstance(key, str):
            raise ValidationError(f"{where}: keys must be strings", field=where)
        if key in ("$and", "$or", "$nor") and isinstance(sub, list):
            out[key] = [_prefixed(s, f"{where}.{key}[{i}]") for i, s in enumerate(sub)]
        elif key == "$not":
            out[key] = _prefixed(sub, f"{where}.$not")
        elif key.startswith("$"):
            out[key] = sub
        else:
            path = key if key.startswith(_BUILTIN_PREFIX) else _BUILTIN_PREFIX + key
            out[path] = sub
    return out


def _items(
    texts: list[str], metadatas: list[dict[Any, Any]] | None, ids: Sequence[str | None] | None
) -> list[dict[str, Any]]:
    if metadatas is not None and len(metadatas) != len(texts):
        raise ValidationError(
            f"metadatas: {len(metadatas)} given for {len(texts)} texts", field="metadatas"
        )
    if ids is not None and len(ids) != len(texts):
        raise ValidationError(f"ids: {len(ids)} given for {len(texts)} texts", field="ids")
    items: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValidationError(f"texts[{i}]: expected a string", field=f"texts[{i}]")
        item: dict[str, Any] = {"content": text}
        meta = metadatas[i] if metadatas is not None else None
        if meta:
            if not isinstance(meta, Mapping):
                raise ValidationError(
                    f"metadatas[{i}]: expected an object", field=f"metadatas[{i}]"
                )
            item["metadata"] = dict(meta)
        doc_id = ids[i] if ids is not None else None
        if doc_id is not None:
            item["id"] = doc_id
        items.append(item)
    return items


def _renamed(err: ValidationError, start: int) -> ValidationError:
    """The engine's error about ``items[j].<field>`` of a batch starting at ``start``, named
    after add_texts' arguments: ``texts[i]``, ``metadatas[i]...``, ``ids[i]``."""

    def name(m: re.Match[str]) -> str:
        i = start + int(m[1])
        arg = _ARGS.get(m[3])
        return f"{arg}[{i}]" if arg else f"texts[{i}]{m[2]}{m[3]}"

    details = dict(err.details)
    if isinstance(details.get("field"), str):
        details["field"] = _ITEM.sub(name, details["field"])
    return ValidationError(_ITEM.sub(name, err.message), **details)


def _id_list(ids: Any) -> list[str]:
    if isinstance(ids, str) or not isinstance(ids, Sequence):
        raise ValidationError("ids: expected a list of ids", field="ids")
    for i, doc_id in enumerate(ids):
        if not isinstance(doc_id, str) or not doc_id:
            raise ValidationError(f"ids[{i}]: expected a non-empty string", field=f"ids[{i}]")
    return list(ids)


def _no_extra(kwargs: Mapping[str, Any], method: str) -> None:
    if kwargs:
        name = sorted(kwargs)[0]
        raise ValidationError(f"{name}: not an option of {method}", field=name)
