"""LLM access for the memory loop: one small client for any OpenAI-compatible chat endpoint
(OpenAI, vLLM, Ollama, llama.cpp's server, LM Studio), with no SDK.

A layer above the engine (the engine never imports it)::

    from synapsedb.llm import ChatClient, LLMSettings

    with ChatClient(LLMSettings.from_env()) as llm:
        if llm.configured:                      # no base URL: degrade, do not call
            reply = llm.chat([{"role": "user", "content": "Hello"}])
            facts = llm.chat_json(messages, schema, name="facts")   # a dict matching schema

:class:`AsyncChatClient` has the same methods as coroutines, and ``forward(body)``: the
caller's own chat-completions request sent on as it is, streamed or not (the memory proxy). Calls retry
what the upstream cannot be working on (no connection, 408, 429, 503; never a timeout waiting for
the answer) with jittered backoff behind a circuit breaker, and raise
:class:`~synapsedb.errors.UpstreamError` when the model cannot answer. See docs/llm.md.
"""

from __future__ import annotations

from ..config import LLMSettings
from ..errors import UpstreamError
from .breaker import BreakerState
from .client import AsyncChatClient, ChatClient
from .forward import Chunk, ChunkStream, Completion
from .schema import check_schema, validate
from .wire import ChatReply, Usage

__all__ = [
    "AsyncChatClient",
    "BreakerState",
    "ChatClient",
    "ChatReply",
    "Chunk",
    "ChunkStream",
    "Completion",
    "LLMSettings",
    "UpstreamError",
    "Usage",
    "check_schema",
    "validate",
]
