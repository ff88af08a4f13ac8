"""Engine settings: every setting declared once, with its type, default and one doc line.

Build explicitly and pass down (``synapsedb.open(path, settings=Settings(...))`` or keyword
overrides ``synapsedb.open(path, durability="os")``). No module globals, no env reads at import;
:meth:`Settings.from_env` reads ``SYNAPSEDB_*`` variables when a program asks for it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ValidationError

__all__ = ["Settings"]

Durability = Literal["fsync", "os"]
EMBEDDERS = ("minilm", "openai", "sentence-transformers", "none")


@dataclass(frozen=True, slots=True)
class Settings:
    durability: Durability = field(
        default="fsync",
        metadata={"doc": "fsync: a write survives power loss; os: it survives a process crash"},
    )
    embedder: str = field(
        default="minilm",
        metadata={
            "doc": "minilm (local all-MiniLM-L6-v2, 384-d), openai (an OpenAI-compatible "
            "endpoint), sentence-transformers (optional extra) or none (caller vectors only)"
        },
    )
    openai_base_url: str = field(
        default="",
        metadata={
            "doc": "base URL of the OpenAI-compatible endpoint, e.g. https://api.openai.com/v1"
        },
    )
    openai_model: str = field(default="", metadata={"doc": "model name sent to that endpoint"})
    st_model: str = field(
        default="", metadata={"doc": "sentence-transformers model name or local path"}
    )
    query_cache_size: int = field(
        default=1024, metadata={"doc": "query texts whose embeddings are kept (LRU)"}
    )
    max_content_bytes: int = field(
        default=32 * 1024, metadata={"doc": "largest memory content, UTF-8 bytes"}
    )
    max_metadata_bytes: int = field(
        default=16 * 1024, metadata={"doc": "largest memory metadata, bytes of compact JSON"}
    )
    max_value_bytes: int = field(
        default=64 * 1024, metadata={"doc": "largest KV fact value or event data, bytes of JSON"}
    )
    max_batch_items: int = field(
        default=10_000, metadata={"doc": "most memories accepted by one write_many call"}
    )
    max_dim: int = field(default=4096, metadata={"doc": "largest embedding dimension"})
    max_query_chars: int = field(default=8192, metadata={"doc": "longest query text, characters"})
    max_filter_bytes: int = field(
        default=32 * 1024, metadata={"doc": "largest query filter, bytes of compact JSON"}
    )
    query_log_max_rows: int = field(
        default=100_000,
        metadata={
            "doc": "query-log rows kept per namespace; the oldest go first (queries an "
            "answer refers to stay)"
        },
    )
    query_log_max_hits: int = field(
        default=100, metadata={"doc": "hits recorded per logged query (the best ones)"}
    )
    erasure_wait_ms: int = field(
        default=5000,
        metadata={
            "doc": "how long a purge waits for other readers of the WAL to let go before it "
            "reports the erasure pending (maintenance then retries)"
        },
    )
    hnsw_threshold: int = field(
        default=20_000,
        metadata={"doc": "rows (memory versions) from which a namespace gets an HNSW index"},
    )
    hnsw_m: int = field(default=16, metadata={"doc": "HNSW graph degree (M)"})
    hnsw_ef_construction: int = field(
        default=200, metadata={"doc": "HNSW build-time candidate list size"}
    )
    hnsw_ef_search: int = field(
        default=100, metadata={"doc": "HNSW query-time candidate list size (at least k)"}
    )
    ttl_grace_s: int = field(
        default=7 * 86_400,
        metadata={"doc": "seconds after expiry before expired memories and facts are erased"},
    )
    background_maintenance: bool = field(
        default=True,
        metadata={"doc": "run maintenance in a background thread (off: only maintain() calls)"},
    )
    maintenance_interval_s: int = field(
        default=60, metadata={"doc": "seconds between background maintenance passes"}
    )
    group_commit_max: int = field(
        default=2_000, metadata={"doc": "most rows the writer thread puts in one transaction"}
    )

    def __post_init__(self) -> None:
        if self.durability not in ("fsync", "os"):
            raise ValidationError(
                f"durability: expected 'fsync' or 'os', got {self.durability!r}",
                field="durability",
            )
        if self.embedder not in EMBEDDERS:
            raise ValidationError(
                f"embedder: expected one of {', '.join(EMBEDDERS)}, got {self.embedder!r}",
                field="embedder",
            )
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (not isinstance(value, int) or value <= 0):
                raise ValidationError(
                    f"{f.name}: expected a positive integer, got {value!r}", field=f.name
                )

    def replace(self, **changes: Any) -> Settings:
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            name = sorted(unknown)[0]
            raise ValidationError(f"unknown setting {name!r}", field=name)
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read ``SYNAPSEDB_<SETTING>`` variables (e.g. ``SYNAPSEDB_DURABILITY=os``)."""
        env = os.environ if environ is None else environ
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = env.get(f"SYNAPSEDB_{f.name.upper()}")
            if raw is None:
                continue
            if f.type == "bool":
                if raw.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValidationError(
                        f"SYNAPSEDB_{f.name.upper()}: expected true or false, got {raw!r}",
                        field=f.name,
                    )
                changes[f.name] = raw.lower() in ("1", "true", "yes", "on")
            elif f.type == "int":
                try:
                    changes[f.name] = int(raw)
                except ValueError:
                    raise ValidationError(
                        f"SYNAPSEDB_{f.name.upper()}: expected an integer, got {raw!r}",
                        field=f.name,
                    ) from None
            else:
                changes[f.name] = raw
        return cls(**changes)

    @staticmethod
    def docs() -> dict[str, str]:
        """Setting name -> one-line description (the settings reference is built from this)."""
        return {f.name: f.metadata["doc"] for f in dataclasses.fields(Settings)}
