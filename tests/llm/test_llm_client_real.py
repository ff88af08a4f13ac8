"""ChatClient and AsyncChatClient against a real model: llama.cpp's server with SmolLM2-135M
(tests/llm/conftest.py). Unlike tests/unit/test_llm_client.py (a scripted stand-in), these
prove the bytes we send are understood by a real OpenAI-compatible server, that json_schema
mode gets grammar-constrained answers matching the schema on the first try, and that the
client parses what a real server answers. SmolLM2-135M is a plumbing model: the tests check the
shape of answers, never their quality. Latency and tokens/s are printed, not asserted.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from synapsedb.llm import AsyncChatClient, ChatClient, LLMSettings, validate
from tests.support.llm_meter import Meter

MEMORY_TYPES = ["fact", "preference", "procedure", "episode"]

# The shape of the memory loop's fact extraction: what a model must answer for a conversation.
EXTRACTION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "memories": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": MEMORY_TYPES},
                    "content": {"type": "string"},
                    "entity": {"type": "string"},
                    "confidence": {"type": "number"},
                    "valid_from": {"type": ["string", "null"]},
                    "source_turns": {"type": "array", "items": {"type": "integer"}},
                },
                "required": [
                    "type",
                    "content",
                    "entity",
                    "confidence",
                    "valid_from",
                    "source_turns",
                ],
                "additionalProperties": False,
            },
        }
    },
    "required": ["memories"],
    "additionalProperties": False,
}

# One worked example keeps a 135M model from looping inside a string until max_tokens (which
# grammar-constrained decoding allows: a string has no length limit in the grammar).
SYSTEM = (
    "Extract what is worth remembering about the user from the conversation as JSON. "
    "Use at most three short memories.\n"
    "Example conversation:\nturn 0: user: I live in Berlin and I like jazz.\n"
    "Example answer:\n"
    '{"memories": [{"type": "fact", "content": "Lives in Berlin", "entity": "user", '
    '"confidence": 0.9, "valid_from": null, "source_turns": [0]}, {"type": "preference", '
    '"content": "Likes jazz", "entity": "user", "confidence": 0.8, "valid_from": null, '
    '"source_turns": [0]}]}'
)

CONVERSATIONS = {
    "residence-and-taste": [
        "user: I moved to Lisbon last May.",
        "assistant: Nice! How do you like it?",
        "user: Love it. Also, I prefer tea over coffee.",
    ],
    "procedure": [
        "user: To deploy, run make release and then tag the commit.",
        "assistant: Noted.",
    ],
    "dated-episode": [
        "user: On 2024-03-02 I ran my first marathon, in Porto.",
        "assistant: Congratulations!",
    ],
    "small-talk": ["user: hi", "assistant: Hello! How can I help?"],
    "french": [
        "user: Je suis végétarien depuis 2019 et j'habite à Lyon.",
        "assistant: D'accord.",
    ],
}
MAX_TOKENS = 256  # an answer of three short memories is about 120 tokens


def extraction_messages(turns: list[str]) -> list[dict[str, str]]:
    text = "\n".join(f"turn {i}: {turn}" for i, turn in enumerate(turns))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


def assert_extraction_shape(value: dict[str, Any]) -> None:
    """The schema, checked by hand (not only by the validator chat_json already ran)."""
    assert list(value) == ["memories"], value
    assert isinstance(value["memories"], list), value
    for memory in value["memories"]:
        assert set(memory) == {
            "type",
            "content",
            "entity",
            "confidence",
            "valid_from",
            "source_turns",
        }, memory
        assert memory["type"] in MEMORY_TYPES, memory
        assert isinstance(memory["content"], str) and isinstance(memory["entity"], str), memory
        assert isinstance(memory["confidence"], int | float), memory
        assert not isinstance(memory["confidence"], bool), memory
        assert memory["valid_from"] is None or isinstance(memory["valid_from"], str), memory
        assert all(type(t) is int for t in memory["source_turns"]), memory


def assert_first_answer_valid(meter: Meter, label: str) -> None:
    """Each chat_json was answered in json_schema mode with schema-valid JSON at once: the
    server's constrained decoding did the work, not the client's repair try or a fallback."""
    calls = meter.of(label)
    assert calls, f"no request recorded for {label}"
    for call in calls:
        assert (call.status, call.response_format) == (200, "json_schema"), call
        assert call.answer is not None, call
        assert validate(json.loads(call.answer), EXTRACTION) == [], call


def test_chat_answers_a_plain_question(local_llm_settings: LLMSettings, llm_meter: Meter) -> None:
    label = "chat: plain question"
    with ChatClient(local_llm_settings, transport=llm_meter.transport(label)) as llm:
        reply = llm.chat(
            [{"role": "user", "content": "What is the capital of France?"}], max_tokens=24
        )
    assert reply.content.strip()
    assert reply.finish_reason in ("stop", "length")
    assert reply.usage.prompt_tokens > 0
    assert 0 < reply.usage.completion_tokens <= 24
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert [c.status for c in llm_meter.of(label)] == [200]


def test_chat_honours_max_tokens_and_stop(
    local_llm_settings: LLMSettings, llm_meter: Meter
) -> None:
    label = "chat: max_tokens and stop"
    with ChatClient(local_llm_settings, transport=llm_meter.transport(label)) as llm:
        cut = llm.chat(
            [{"role": "user", "content": "Count from 1 to 100, separated by commas."}], max_tokens=8
        )
        listed = llm.chat(
            [{"role": "user", "content": "List three fruits, one per line."}],
            max_tokens=40,
            stop="\n",
        )
    assert (cut.finish_reason, cut.usage.completion_tokens) == ("length", 8)
    # the model writes one fruit per line: without the stop sequence there would be a newline
    assert listed.content.strip() and "\n" not in listed.content
    assert listed.finish_reason == "stop"


def test_chat_json_extracts_memories_in_json_schema_mode(
    local_llm_settings: LLMSettings, llm_meter: Meter
) -> None:
    label = "chat_json: extraction"
    with ChatClient(local_llm_settings, transport=llm_meter.transport(label)) as llm:
        value = llm.chat_json(
            extraction_messages(CONVERSATIONS["residence-and-taste"]),
            EXTRACTION,
            name="memories",
            max_tokens=MAX_TOKENS,
        )
        assert llm.structured_mode == "json_schema"  # the server accepted it: no fallback
    assert validate(value, EXTRACTION) == []
    assert_extraction_shape(value)
    assert value["memories"], "a conversation with two stated facts gave no memory"
    assert_first_answer_valid(llm_meter, label)


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_structured_output_validates_over_varied_prompts(
    name: str, local_llm_settings: LLMSettings, llm_meter: Meter
) -> None:
    label = f"chat_json: {name}"
    with ChatClient(local_llm_settings, transport=llm_meter.transport(label)) as llm:
        value = llm.chat_json(
            extraction_messages(CONVERSATIONS[name]),
            EXTRACTION,
            name="memories",
            max_tokens=MAX_TOKENS,
        )
    assert_extraction_shape(value)
    assert_first_answer_valid(llm_meter, label)


def test_async_client_chats_and_answers_json(
    local_llm_settings: LLMSettings, llm_meter: Meter
) -> None:
    label = "async: chat, chat_json, 2 concurrent chats"

    async def run() -> tuple[Any, ...]:
        async with AsyncChatClient(
            local_llm_settings, transport=llm_meter.async_transport(label)
        ) as llm:
            reply = await llm.chat([{"role": "user", "content": "Say hello."}], max_tokens=16)
            value = await llm.chat_json(
                extraction_messages(CONVERSATIONS["procedure"]),
                EXTRACTION,
                name="memories",
                max_tokens=MAX_TOKENS,
            )
            both = await asyncio.gather(
                llm.chat([{"role": "user", "content": "Name a color."}], max_tokens=8),
                llm.chat([{"role": "user", "content": "Name an animal."}], max_tokens=8),
            )
            return reply, value, both, llm.structured_mode

    reply, value, both, mode = asyncio.run(run())
    assert reply.content.strip() and 0 < reply.usage.completion_tokens <= 16
    assert mode == "json_schema"
    assert_extraction_shape(value)
    assert all(r.content.strip() and r.usage.completion_tokens <= 8 for r in both)
    calls = llm_meter.of(label)
    assert [c.status for c in calls] == [200] * 4
    json_calls = [c for c in calls if c.response_format != "-"]
    assert [c.response_format for c in json_calls] == ["json_schema"]
    assert validate(json.loads(json_calls[0].answer or "null"), EXTRACTION) == []
