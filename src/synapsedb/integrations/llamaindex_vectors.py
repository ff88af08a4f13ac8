"""A LlamaIndex vector store on SynapseDB (``pip install 'synapsedb[llamaindex]'``;
docs/integrations/llamaindex.md): ``VectorStoreIndex`` builds on it and queries it.

- :class:`SynapseVectorStore`: a ``BasePydanticVectorStore`` over the memories of one entity
  of a namespace (embedded, or a server's through ``synapsedb.connect``: the API key decides
  the tenant). A node is a memory: its id, its text as the content, its vector, and as metadata
  the node's own metadata beside LlamaIndex's bookkeeping (``_node_content``: the node without
  its text; ``ref_doc_id``), as every LlamaIndex store keeps it
  (``node_to_metadata_dict``). ``MetadataFilters`` become SynapseDB's filter language.
- :class:`SynapseEmbedding`: a ``BaseEmbedding`` with SynapseDB's own local model
  (all-MiniLM-L6-v2 on onnxruntime, no torch): the vectors the database makes for text, so a
  store's nodes and SynapseDB's own queries share one vector space.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from ..errors import NotFoundError, ValidationError

__all__ = ["SynapseEmbedding", "SynapseVectorStore", "metadata_filter"]

BATCH = 1000  # nodes per write_many (one transaction each)
MAX_SCAN = 1000  # memories one filtered listing returns (the engine's largest k)
_MODES = {
    VectorStoreQueryMode.DEFAULT: "vector",
    VectorStoreQueryMode.HYBRID: "hybrid",
    VectorStoreQueryMode.TEXT_SEARCH: "keyword",
    VectorStoreQueryMode.SPARSE: "keyword",
}
_COMPARE = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
    FilterOperator.CONTAINS: "$contains",
    FilterOperator.TEXT_MATCH: "$contains",
}


class SynapseVectorStore(BasePydanticVectorStore):
    """Nodes as the memories of ``entity`` (default ``"nodes"``) in ``namespace``.

    Adding a node whose id is stored writes a new version (``ns.history(id)`` keeps the old);
    ``delete(ref_doc_id)``, ``delete_nodes`` and ``clear`` tombstone, so ``as_of`` queries
    (``store.query(q, as_of=...)``) still see what was there. Nodes need their embedding (the
    index's ``embed_model`` makes it; :class:`SynapseEmbedding` gives SynapseDB's own);
    a node without one is embedded by the database. Query modes: ``default`` (vector: scores
    are cosine similarities), ``hybrid`` (SynapseDB's fused ranking of meaning and keywords)
    and ``text_search``/``sparse`` (keywords, BM25).
    """

    stores_text: bool = True
    flat_metadata: bool = False
    entity: str = "nodes"
    _namespace: Any = PrivateAttr()

    def __init__(self, namespace: Any, *, entity: str = "nodes", **kwargs: Any) -> None:
        if not isinstance(entity, str) or not entity:
            raise ValidationError("entity: expected a non-empty string", field="entity")
        super().__init__(entity=entity, **kwargs)  # type: ignore[call-arg]  # a pydantic field
        self._namespace = namespace

    @classmethod
    def class_name(cls) -> str:
        return "SynapseVectorStore"

    @property
    def client(self) -> Any:
        """The namespace handle the store reads and writes."""
        return self._namespace

    # -- writes ---------------------------------------------------------------------------------

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store ``nodes`` in batches of 1,000, each one transaction; returns their ids."""
        items = []
        for node in nodes:
            meta = node_to_metadata_dict(node, remove_text=True, flat_metadata=self.flat_metadata)
            # An empty list is left out of the filterable copy (the node keeps it, in
            # _node_content): SynapseDB's filters cannot compare lists, and absent reads as
            # empty for every operator (is_empty matches, !=, nin match, the others do not).
            item: dict[str, Any] = {
                "entity": self.entity,
                "id": node.node_id,
                "content": node.get_content(metadata_mode=MetadataMode.NONE),
                "metadata": {k: v for k, v in meta.items() if v != []},
            }
            if node.embedding is not None:
                item["embedding"] = [float(x) for x in node.embedding]
            items.append(item)
        ids: list[str] = []
        for start in range(0, len(items), BATCH):
            ids += [m.id for m in self._namespace.write_many(items[start : start + BATCH])]
        return ids

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Tombstone every node of the source document ``ref_doc_id``."""
        self.delete_nodes(
            filters=MetadataFilters(filters=[MetadataFilter(key="ref_doc_id", value=ref_doc_id)])
        )

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Tombstone the nodes among ``node_ids`` that pass ``filters`` (either may be None:
        every node of the store passes)."""
        while True:
            ids = self._matching(node_ids, filters)
            for node_id in ids:
                try:
                    self._namespace.delete(node_id)
                except NotFoundError:  # deleted meanwhile
                    continue
            if node_ids is not None or len(ids) < MAX_SCAN:
                return

    def clear(self) -> None:
        """Tombstone every node of the store (``ns.forget(entity=store.entity)``)."""
        self._namespace.forget(entity=self.entity)

    # -- reads ----------------------------------------------------------------------------------

    def get_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        """The stored nodes among ``node_ids`` (in that order) that pass ``filters``; without
        ``node_ids``, those passing ``filters``, newest first, at most 1,000."""
        nodes = []
        for node_id in self._matching(node_ids, filters):
            m = self._namespace.get(node_id)
            nodes.append(_node(m.content, m.metadata, m.embedding))
        return nodes

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The ``similarity_top_k`` nodes nearest the query, best first; ``as_of=`` asks what
        the store held then."""
        as_of = kwargs.pop("as_of", None)
        mode = _MODES.get(query.mode)
        if mode is None:
            raise ValidationError(
                f"mode: {query.mode.value!r} is not supported; expected one "
                f"of {', '.join(m.value for m in _MODES)}",
                field="mode",
            )
        vector = query.query_embedding if mode != "keyword" else None
        text = query.query_str if mode != "vector" or vector is None else None
        if text is None and vector is None:
            raise ValidationError("query: give query_embedding or query_str", field="query")
        flt = _scope(query.node_ids, query.doc_ids, query.filters)
        result = self._namespace.query(
            text,
            embedding=None if vector is None else [float(x) for x in vector],
            entity=self.entity,
            filter=flt,
            k=query.similarity_top_k,
            mode=mode,
            dedup=False,
            as_of=as_of,
        )
        nodes = [_node(h.content, h.metadata, None) for h in result.hits]
        return VectorStoreQueryResult(
            nodes=nodes,
            similarities=[h.score for h in result.hits],
            ids=[h.id for h in result.hits],
        )

    def _matching(self, node_ids: list[str] | None, filters: MetadataFilters | None) -> list[str]:
        """The ids of the store's nodes among ``node_ids`` (in that order; None: any) that pass
        ``filters``; without ``node_ids``, newest first, at most MAX_SCAN."""
        if node_ids is None:
            result = self._namespace.query(
                None,
                entity=self.entity,
                k=MAX_SCAN,
                dedup=False,
                filter=_scope(None, None, filters),
            )
            return [h.id for h in result.hits]
        ids = []
        for node_id in dict.fromkeys(node_ids):
            try:
                if self._namespace.get(node_id).entity == self.entity:
                    ids.append(node_id)
            except NotFoundError:
                continue
        if filters is None or not filters.filters or not ids:
            return ids
        keep: set[str] = set()
        for start in range(0, len(ids), MAX_SCAN):
            chunk = ids[start : start + MAX_SCAN]
            result = self._namespace.query(
                None,
                entity=self.entity,
                k=len(chunk),
                dedup=False,
                filter=_scope(chunk, None, filters),
            )
            keep.update(h.id for h in result.hits)
        return [i for i in ids if i in keep]


def _node(content: str, metadata: Any, embedding: Any) -> BaseNode:
    node = metadata_dict_to_node(dict(metadata or {}), text=content)
    node.set_content(content)
    if embedding is not None:
        node.embedding = [float(x) for x in embedding]
    return node


def _scope(
    node_ids: Sequence[str] | None, doc_ids: Sequence[str] | None, filters: MetadataFilters | None
) -> dict[str, Any] | None:
    """SynapseDB's filter for a query's ``node_ids``, ``doc_ids`` and ``filters`` together.
    An empty list restricts nothing: ``VectorStoreIndex``'s retriever passes ``node_ids=[]``
    for a store that keeps the text (its own node list is then empty)."""
    parts: list[dict[str, Any]] = []
    if node_ids:
        parts.append({"id": {"$in": list(node_ids)}})
    if doc_ids:
        parts.append({"metadata.ref_doc_id": {"$in": list(doc_ids)}})
    if filters is not None and filters.filters:
        parts.append(metadata_filter(filters))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def metadata_filter(filters: MetadataFilters, where: str = "filters") -> dict[str, Any]:
    """LlamaIndex's ``MetadataFilters`` (nested ones included) as SynapseDB's filter language
    over node metadata, with LlamaIndex's meaning: an absent key matches only ``!=`` and
    ``nin``; ``not`` matches when none of the filters do. ``text_match_insensitive`` has no
    counterpart and is a ValidationError naming it."""
    parts = []
    for i, f in enumerate(filters.filters):
        at = f"{where}[{i}]"
        parts.append(metadata_filter(f, at) if isinstance(f, MetadataFilters) else _one(f, at))
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.AND:
        return parts[0] if len(parts) == 1 else {"$and": parts}
    if condition == FilterCondition.OR:
        return {"$or": parts}
    return {"$not": {"$or": parts}}


def _one(f: MetadataFilter, where: str) -> dict[str, Any]:
    path = "metadata." + f.key
    op = f.operator
    if op == FilterOperator.IS_EMPTY:
        # an empty list is stored as no key at all (see add)
        return {"$or": [{path: {"$exists": False}}, {path: {"$eq": None}}, {path: {"$eq": ""}}]}
    if op in (FilterOperator.ANY, FilterOperator.ALL):
        values = f.value if isinstance(f.value, list) else [f.value]
        each = [{path: {"$contains": v}} for v in values]
        return {"$or" if op == FilterOperator.ANY else "$and": each}
    if op in _COMPARE:
        return {path: {_COMPARE[op]: f.value}}
    raise ValidationError(
        f"{where}.operator: {op.value!r} has no counterpart in SynapseDB's "
        f"filters; expected one of {', '.join(o.value for o in _COMPARE)}, "
        "any, all, is_empty",
        field=f"{where}.operator",
    )


class SynapseEmbedding(BaseEmbedding):
    """SynapseDB's default embedding model for LlamaIndex: the same 384-dimension vectors the
    database computes for text (``synapsedb.embed.OnnxMiniLM``). ``model_dir`` as for the
    database (default ``SYNAPSEDB_MODEL_DIR``, else ``~/.cache/synapsedb/models``; ``synapsedb
    models install`` puts the model there)."""

    model_name: str = "all-MiniLM-L6-v2"
    _model: Any = PrivateAttr()

    def __init__(self, model_dir: str | None = None, **kwargs: Any) -> None:
        from ..embed import OnnxMiniLM

        super().__init__(**kwargs)
        self._model = OnnxMiniLM(model_dir)

    @classmethod
    def class_name(cls) -> str:
        return "SynapseEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in self._model.embed([query])[0]]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_query_embedding(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self._model.embed(texts)]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)
