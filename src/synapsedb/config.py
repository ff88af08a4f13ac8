"""Settings: every setting declared once, with its type, default and one doc line.

:class:`Settings` configures the engine; :class:`LLMSettings` the chat model that the memory
loop above the engine talks to (:mod:`synapsedb.llm`).

Build explicitly and pass down (``synapsedb.open(path, settings=Settings(...))`` or keyword
overrides ``synapsedb.open(path, durability="os")``). No module globals, no env reads at import;
:meth:`Settings.from_env` reads ``SYNAPSEDB_*`` variables when a program asks for it.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ValidationError

__all__ = ["LLMSettings", "Settings"]

Durability = Literal["fsync", "os"]
Load = Literal["lazy", "eager"]
LOADS = ("lazy", "eager")
PLACEMENTS = ("replicated", "sharded")
EMBEDDERS = ("minilm", "openai", "sentence-transformers", "none")
MINILM_PRECISIONS = ("float32", "uint8")  # synapsedb.embed.export.PRECISIONS' keys
MINILM_QUERY_MODELS = ("auto", "same", "int8")  # synapsedb.embed.onnx_minilm.QUERY_MODELS
MAX_DIM = 1 << 20  # the largest embedding dimension any namespace may have (max_dim's bound)
# max_content_bytes' bound: far under SQLite's 1 GB string limit and the 256 MiB default import
# file, and a memory is a unit of recall, not a file store (split documents into passages).
MAX_CONTENT_BYTES = 64 << 20


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
    minilm_precision: str = field(
        default="float32",
        metadata={
            "doc": "minilm weights: float32 (faster without VNNI int8 instructions) or uint8 "
            "(a quarter of the memory); both write vectors of one space"
        },
    )
    minilm_query_model: str = field(
        default="auto",
        metadata={
            "doc": "model that embeds query texts: int8 (dynamic int8, about half the time "
            "on CPUs with VNNI int8 instructions), same (the memories' model), or auto (int8 "
            "when the CPU has VNNI, else same)"
        },
    )
    embed_threads: int = field(
        default=2, metadata={"doc": "onnxruntime threads one minilm call uses"}
    )
    embed_spin: bool = field(
        default=False,
        metadata={
            "doc": "let minilm's threads spin between the steps of one call: a quarter "
            "faster on idle cores, twice slower when other work wants them"
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
    # 1 MiB: three times the longest BEAM reply (349 KB), and at the worst JSON escaping (6 bytes
    # per control character) still under the server's 8 MiB request body, so whatever the
    # engine accepts also travels over HTTP. Keyword indexing is linear in the text and the
    # embedder reads a bounded prefix (its first 256 word-pieces), so the cost stays bounded.
    max_content_bytes: int = field(
        default=1 << 20,
        metadata={
            "doc": "largest memory content, UTF-8 bytes (all of it is keyword-indexed; the "
            "MiniLM vector covers its first 256 word-pieces)"
        },
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
    hnsw_build_threads: int = field(
        default=2,
        metadata={
            "doc": "threads that add rows to an HNSW graph in the background (at most the "
            "cores the process may use); chunks are sized so a query waits about as long "
            "whatever the count"
        },
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
    load: Load = field(
        default="lazy",
        metadata={
            "doc": "lazy: an open reads the namespace names only, each namespace loads at its "
            "first use and a background thread loads the rest; eager: an open loads every "
            "namespace before it returns"
        },
    )
    memory_budget_mb: int = field(
        default=0,
        metadata={
            "doc": "MiB of namespaces a process keeps in memory; over it, the least recently "
            "used idle namespaces are unloaded and load again at their next use (0: half of "
            "this machine's memory)"
        },
    )
    placement: str = field(
        default="replicated",
        metadata={
            "doc": "several processes on one PostgreSQL schema: replicated (each holds every "
            "namespace and follows the others' commits) or sharded (each owns a share, by "
            "rendezvous hashing over the live processes, and forwards the rest)"
        },
    )
    lease_s: int = field(
        default=10,
        metadata={
            "doc": "sharded placement: seconds a process's lease lasts unrenewed (renewed "
            "every third of it); a process that dies loses its share this long after"
        },
    )
    advertise_url: str = field(
        default="",
        metadata={
            "doc": "sharded placement: this process's address for the others, e.g. "
            "http://10.0.0.5:7379 (synapsedb serve uses http://<host>:<port> when empty)"
        },
    )

    def __post_init__(self) -> None:
        if self.durability not in ("fsync", "os"):
            raise ValidationError(
                f"durability: expected 'fsync' or 'os', got {self.durability!r}",
                field="durability",
            )
        if self.load not in LOADS:
            raise ValidationError(
                f"load: expected one of {', '.join(LOADS)}, got {self.load!r}", field="load"
            )
        if self.placement not in PLACEMENTS:
            raise ValidationError(
                f"placement: expected one of {', '.join(PLACEMENTS)}, got {self.placement!r}",
                field="placement",
            )
        if self.advertise_url and not self.advertise_url.startswith(("http://", "https://")):
            raise ValidationError(
                f"advertise_url: expected an http:// or https:// URL, got {self.advertise_url!r}",
                field="advertise_url",
            )
        if self.embedder not in EMBEDDERS:
            raise ValidationError(
                f"embedder: expected one of {', '.join(EMBEDDERS)}, got {self.embedder!r}",
                field="embedder",
            )
        if self.minilm_precision not in MINILM_PRECISIONS:
            raise ValidationError(
                f"minilm_precision: expected one of {', '.join(MINILM_PRECISIONS)}, "
                f"got {self.minilm_precision!r}",
                field="minilm_precision",
            )
        if self.minilm_query_model not in MINILM_QUERY_MODELS:
            raise ValidationError(
                f"minilm_query_model: expected one of {', '.join(MINILM_QUERY_MODELS)}, "
                f"got {self.minilm_query_model!r}",
                field="minilm_query_model",
            )
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _ZERO_MEANS_DEFAULT and value == 0:
                continue
            if f.type == "int" and (not isinstance(value, int) or value <= 0):
                raise ValidationError(
                    f"{f.name}: expected a positive integer, got {value!r}", field=f.name
                )
        if self.max_dim > MAX_DIM:  # what a data directory can load back (engine/loader.py)
            raise ValidationError(
                f"max_dim: {self.max_dim} is over the limit of {MAX_DIM}",
                field="max_dim",
                limit=MAX_DIM,
            )
        if self.max_content_bytes > MAX_CONTENT_BYTES:
            raise ValidationError(
                f"max_content_bytes: {self.max_content_bytes} is over the limit of "
                f"{MAX_CONTENT_BYTES}",
                field="max_content_bytes",
                limit=MAX_CONTENT_BYTES,
            )

    def replace(self, **changes: Any) -> Settings:
        return _replace(self, changes)

    def memory_budget_bytes(self) -> int:
        """``memory_budget_mb`` in bytes; 0 is half of this machine's physical memory."""
        if self.memory_budget_mb:
            return self.memory_budget_mb << 20
        try:
            return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
        except (ValueError, OSError):  # a system that does not say: 4 GiB
            return 4 << 30

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read ``SYNAPSEDB_<SETTING>`` variables (e.g. ``SYNAPSEDB_DURABILITY=os``)."""
        return cls(**_read_env(cls, "SYNAPSEDB_", environ))

    @staticmethod
    def docs() -> dict[str, str]:
        """Setting name -> one-line description (the settings reference is built from this)."""
        return _docs(Settings)


# int settings where 0 asks for the default worked out at run time (not "none")
_ZERO_MEANS_DEFAULT = frozenset({"memory_budget_mb"})

STRUCTURED_MODES = ("json_schema", "json_object", "prompt")


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """The OpenAI-compatible chat endpoint used by the memory loop (:mod:`synapsedb.llm`).

    No ``base_url`` means no LLM: :attr:`configured` is False, a supported mode in which
    callers degrade (extraction waits, recall uses heuristics), not an error.
    """

    base_url: str = field(
        default="",
        metadata={
            "doc": "base URL of the OpenAI-compatible chat endpoint, e.g. "
            "https://api.openai.com/v1 or http://127.0.0.1:8080/v1; empty: no LLM"
        },
    )
    model: str = field(
        default="",
        metadata={"doc": "model name sent with each request; empty: the endpoint's default"},
    )
    api_key: str = field(
        default="",
        repr=False,
        metadata={
            "doc": "bearer token for the endpoint (never logged, redacted from errors; "
            "OPENAI_API_KEY is not read, so a key cannot leak to another host)"
        },
    )
    timeout_s: float = field(
        default=60.0,
        metadata={
            "doc": "seconds allowed to connect, to send and to wait for the answer (a "
            "non-streamed answer arrives only when the model has finished)"
        },
    )
    max_retries: int = field(
        default=2,
        metadata={
            "doc": "retries after the first attempt when the upstream cannot be working on "
            "the request: no connection, 408, 429, 503 (never after a timeout waiting for the "
            "answer, nor another 5xx); 0: none"
        },
    )
    backoff_base_s: float = field(
        default=0.5,
        metadata={"doc": "first retry waits up to this long; each next one up to twice as long"},
    )
    backoff_cap_s: float = field(
        default=8.0,
        metadata={
            "doc": "longest wait before a retry; a Retry-After longer than this is not waited for"
        },
    )
    breaker_failures: int = field(
        default=5,
        metadata={"doc": "consecutive failed requests that open the circuit breaker"},
    )
    breaker_cooldown_s: float = field(
        default=30.0,
        metadata={"doc": "seconds the breaker stays open before one probe request is let through"},
    )
    allowed_models: str = field(
        default="",
        metadata={
            "doc": "comma-separated models the memory proxy lets callers ask for (a request "
            "naming another is refused with a 400); empty: any model, at the cost of the "
            "server's API key"
        },
    )
    proxy_max_tokens: int = field(
        default=4096,
        metadata={
            "doc": "the most output tokens a memory proxy request may ask for (max_tokens, "
            "max_completion_tokens, the Responses API's max_output_tokens); more is refused "
            "with a 400 naming the field and this limit"
        },
    )
    proxy_tenant_calls: int = field(
        default=8,
        metadata={
            "doc": "upstream calls one tenant may have in flight through the memory proxy "
            "(streams until they end); one more is refused with a 429 until one finishes"
        },
    )
    max_connections: int = field(
        default=100,
        metadata={
            "doc": "connections one client keeps to the endpoint at most (the memory proxy's "
            "calls of every tenant share them); a call waits up to timeout_s for one"
        },
    )
    structured_output: str = field(
        default="json_schema",
        metadata={
            "doc": "first structured-output mode tried: json_schema, json_object or prompt "
            "(the client falls back from there when the endpoint refuses it)"
        },
    )

    def __post_init__(self) -> None:
        if self.base_url and not self.base_url.startswith(("http://", "https://")):
            raise ValidationError(
                f"base_url: expected an http:// or https:// URL, got {self.base_url!r}",
                field="base_url",
            )
        if self.structured_output not in STRUCTURED_MODES:
            raise ValidationError(
                f"structured_output: expected one of {', '.join(STRUCTURED_MODES)}, "
                f"got {self.structured_output!r}",
                field="structured_output",
            )
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValidationError(
                f"max_retries: expected an integer >= 0, got {self.max_retries!r}",
                field="max_retries",
            )
        for name in ("breaker_failures", "proxy_max_tokens", "proxy_tenant_calls",
                     "max_connections"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(
                    f"{name}: expected a positive integer, got {value!r}", field=name
                )
        for name in ("timeout_s", "backoff_base_s", "backoff_cap_s", "breaker_cooldown_s"):
            value = getattr(self, name)
            if (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValidationError(
                    f"{name}: expected a positive number of seconds, got {value!r}", field=name
                )

    @property
    def configured(self) -> bool:
        """True when a base URL is set (an LLM is available to call)."""
        return bool(self.base_url)

    @property
    def models(self) -> frozenset[str]:
        """The models of ``allowed_models`` (empty: any), the configured ``model`` always
        among them when there is a list."""
        names = {m.strip() for m in self.allowed_models.split(",") if m.strip()}
        if names and self.model:
            names.add(self.model)
        return frozenset(names)

    def replace(self, **changes: Any) -> LLMSettings:
        return _replace(self, changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMSettings:
        """Read ``SYNAPSEDB_LLM_<SETTING>`` variables (e.g. ``SYNAPSEDB_LLM_BASE_URL``)."""
        return cls(**_read_env(cls, LLM_ENV_PREFIX, environ))

    @staticmethod
    def env_var(name: str) -> str:
        """The environment variable of setting ``name`` (``SYNAPSEDB_LLM_MODEL`` ...)."""
        return f"{LLM_ENV_PREFIX}{name.upper()}"

    @staticmethod
    def docs() -> dict[str, str]:
        """Setting name -> one-line description (docs/llm.md's table is checked against it)."""
        return _docs(LLMSettings)


LLM_ENV_PREFIX = "SYNAPSEDB_LLM_"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _replace(settings: Any, changes: dict[str, Any]) -> Any:
    """A copy of a settings dataclass with ``changes``; an unknown name is a ValidationError."""
    unknown = set(changes) - {f.name for f in dataclasses.fields(settings)}
    if unknown:
        name = sorted(unknown)[0]
        raise ValidationError(f"unknown setting {name!r}", field=name)
    return dataclasses.replace(settings, **changes)


def _docs(cls: Any) -> dict[str, str]:
    return {f.name: f.metadata["doc"] for f in dataclasses.fields(cls)}


def _read_env(cls: Any, prefix: str, environ: Mapping[str, str] | None) -> dict[str, Any]:
    """The settings of dataclass ``cls`` that ``<prefix><NAME>`` variables set, converted to
    each field's declared type (bool, int, float or str); a malformed value is a
    ValidationError naming the variable."""
    env = os.environ if environ is None else environ
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        var = f"{prefix}{f.name.upper()}"
        raw = env.get(var)
        if raw is None:
            continue
        if f.type == "bool":
            if raw.lower() not in _TRUE + _FALSE:
                raise ValidationError(f"{var}: expected true or false, got {raw!r}", field=f.name)
            changes[f.name] = raw.lower() in _TRUE
        elif f.type in ("int", "float"):
            kind = int if f.type == "int" else float
            try:
                changes[f.name] = kind(raw)
            except ValueError:
                article = "an integer" if kind is int else "a number"
                raise ValidationError(
                    f"{var}: expected {article}, got {raw!r}", field=f.name
                ) from None
        else:
            changes[f.name] = raw
    return changes
