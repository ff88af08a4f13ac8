"""The memory proxy's Responses API (``client.responses.create``) with the official ``openai``
SDK as an unmodified client, against a real server whose upstream is ScriptedUpstream: a
stand-in for a hosted model speaking OpenAI's chat-completions protocol over a real socket.

The ``proxy`` fixture: tests/api/conftest.py (one server per module, two tenants' keys)."""

from __future__ import annotations

import threading
from typing import Any

import openai
import pytest

from synapsedb.engine import Namespace
from tests.support.proxy_env import ProxyEnv, injected
from tests.support.scripted_upstream import Reply

CHAIN = "synapsedb:responses"


def test_a_chain_of_responses_carries_its_turns_and_its_memories(proxy: ProxyEnv) -> None:
    mid = proxy.seed("user:hana", "Hana's budget for the Hawaii trip is 3000 dollars")
    proxy.upstream.push(Reply.text("Your budget is $3000."), Reply.text("About 2800 euros."))
    with proxy.sdk() as client:
        first = client.responses.create(
            model="gpt-test",
            instructions="Be brief.",
            input="What is my budget for the Hawaii trip?",
            user="user:hana",
        )
        assert first.output_text == "Your budget is $3000." and first.status == "completed"
        assert first.id.startswith("resp_") and first.previous_response_id is None
        assert first.object == "response" and first.model == "gpt-test"
        second = client.responses.create(
            model="gpt-test", input="And in euros?", previous_response_id=first.id
        )
    assert second.output_text == "About 2800 euros." and second.previous_response_id == first.id
    one, two = proxy.upstream.chat_requests()
    assert one.messages[0] == {"role": "system", "content": "Be brief."}
    assert mid in one.messages[1]["content"] and one.messages[2]["role"] == "user"
    turns = [(m["role"], m["content"]) for m in two.messages if not injected([m])]
    assert turns == [
        ("user", "What is my budget for the Hawaii trip?"),
        ("assistant", "Your budget is $3000."),
        ("user", "And in euros?"),
    ]
    assert one.body["model"] == two.body["model"] == "gpt-test" and not one.stream
    proxy.drain()
    # the chain is stored durably in the namespace: the record an event about its user in
    # the session's companion stream, found by the response id
    where = proxy.call("GET", "/facts", params={"entity": CHAIN, "key": first.id}).json()
    assert where["value"]["stream"] == f"synapsedb:session:{first.id}"
    (stored,) = proxy.call(
        "GET",
        "/events",
        params={"stream": where["value"]["stream"], "start": where["value"]["event"], "limit": 1},
    ).json()
    assert stored["entity"] == "user:hana" and stored["data"]["session"] == first.id
    assert stored["data"]["output"] == "Your budget is $3000."
    # both turns went to one session, the chain's, under the entity of its first response
    said = proxy.call("GET", "/events", params={"stream": f"session:{first.id}"}).json()
    assert [e["content"] for e in said] == [
        "What is my budget for the Hawaii trip?",
        "Your budget is $3000.",
        "And in euros?",
        "About 2800 euros.",
    ]
    assert {e["entity"] for e in said} == {"user:hana"}
    lineage = proxy.call("GET", f"/answers/{first.id}/lineage").json()
    assert [m["id"] for m in lineage["cited"]] == [mid]


def test_a_new_chain_recalls_what_an_earlier_session_said(proxy: ProxyEnv) -> None:
    """Seed 001's Hawaii story: said in one session, recalled in a new one without a chain."""
    proxy.upstream.push(Reply.text("Noted, enjoy Maui!"), Reply.text("It is 4000 dollars."))
    with proxy.sdk() as client:
        client.responses.create(
            model="m",
            user="user:kai",
            input="I'm planning a trip to Hawaii; my budget is 4000 dollars.",
        )
        proxy.wait_for_memory("user:kai", "my budget is 4000 dollars")  # in the background
        later = client.responses.create(
            model="m", user="user:kai", input="What is my budget for the Hawaii trip?"
        )
    assert later.output_text == "It is 4000 dollars."
    (context,) = injected(proxy.upstream.chat_requests()[1].messages)
    assert "my budget is 4000 dollars" in context


def test_a_streamed_response_is_the_responses_event_sequence(proxy: ProxyEnv) -> None:
    proxy.upstream.push(
        Reply.text("Aloha from Maui", chunks=("Aloha ", "from ", "Maui")), Reply.text("Yes.")
    )
    with proxy.sdk() as client:
        events = list(client.responses.create(model="m", input="Say hi from Hawaii.", stream=True))
        kinds = [e.type for e in events]
        assert kinds == [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            *["response.output_text.delta"] * 3,
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
        assert [e.sequence_number for e in events] == list(range(len(events)))
        deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
        assert deltas == ["Aloha ", "from ", "Maui"]
        done = events[-1].response  # type: ignore[union-attr]
        assert done.output_text == "Aloha from Maui" and done.status == "completed"
        assert events[0].response.id == done.id  # type: ignore[union-attr]
        # the streamed response can be continued at once (its record is pending, then stored)
        more = client.responses.create(model="m", input="Again?", previous_response_id=done.id)
    assert more.output_text == "Yes."
    assert ("assistant", "Aloha from Maui") in [
        (m["role"], m["content"]) for m in proxy.upstream.chat_requests()[1].messages
    ]
    assert proxy.upstream.chat_requests()[0].stream


def test_a_stream_that_breaks_ends_with_error_and_response_failed(proxy: ProxyEnv) -> None:
    proxy.upstream.push(Reply.text("a b c d", drop_after=1))
    with proxy.sdk() as client:
        events = list(client.responses.create(model="m", input="Spell.", stream=True))
    kinds = [e.type for e in events]
    assert kinds[-2:] == ["error", "response.failed"] and "response.output_text.delta" in kinds
    assert events[-1].response.status == "failed"  # type: ignore[union-attr]
    failed = events[-1].response.id  # type: ignore[union-attr]
    proxy.drain()
    with proxy.sdk() as client, pytest.raises(openai.BadRequestError):
        client.responses.create(model="m", input="x", previous_response_id=failed)


def test_input_items_instructions_and_formats_become_chat_messages(proxy: ProxyEnv) -> None:
    proxy.upstream.push(Reply.json({"city": "Hilo"}))
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    with proxy.sdk() as client:
        out = client.responses.create(
            model="m",
            instructions="Answer in JSON.",
            max_output_tokens=50,
            temperature=0.2,
            user="user:formats",  # nobody with memories: nothing is injected
            input=[
                {"role": "developer", "content": "Cities only."},
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "Where is "},
                        {"type": "input_text", "text": "the volcano?"},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "See:"},
                        {"type": "input_image", "image_url": "https://example.org/v.png"},
                    ],
                },
            ],
            text={
                "format": {"type": "json_schema", "name": "where", "schema": schema, "strict": True}
            },
        )
    assert out.output_text == '{"city": "Hilo"}' and out.max_output_tokens == 50
    (sent,) = proxy.upstream.chat_requests()
    assert sent.messages[:3] == [
        {"role": "system", "content": "Answer in JSON."},
        {"role": "developer", "content": "Cities only."},
        {"role": "user", "content": "Where is the volcano?"},
    ]
    assert sent.messages[3]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://example.org/v.png"},
    }
    assert sent.body["max_tokens"] == 50 and sent.body["temperature"] == 0.2
    assert sent.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "where", "schema": schema, "strict": True},
    }


def test_the_default_namespace_and_a_length_cut_answer(proxy: ProxyEnv) -> None:
    proxy.upstream.push(Reply.text("It was a long", finish_reason="length"))
    with proxy.sdk(ns=None) as client:
        out = client.responses.create(model="m", input="Tell me a long story.")
    assert out.status == "incomplete" and out.incomplete_details is not None
    assert out.incomplete_details.reason == "max_output_tokens"
    proxy.drain()
    found = proxy.call("GET", "/facts", ns="default", params={"entity": CHAIN, "key": out.id})
    assert found.status_code == 200


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "input"),
        ({"model": "m", "input": ""}, "input"),
        ({"model": "m", "input": 5}, "input"),
        (
            {"model": "m", "input": [{"type": "function_call_output", "output": "x"}]},
            "input[0].type",
        ),
        ({"model": "m", "input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        (
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_file"}]}]},
            "input[0].content[0].type",
        ),
        (
            {
                "model": "m",
                "input": [{"role": "user", "content": [{"type": "input_text", "text": 1}]}],
            },
            "input[0].content[0].text",
        ),
        (
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_image"}]}]},
            "input[0].content[0].image_url",
        ),
        ({"model": "m", "input": [{"role": "user", "content": ["hi"]}]}, "input[0].content[0]"),
        ({"model": "m", "input": "x", "tools": [{"type": "web_search"}]}, "tools"),
        ({"model": "m", "input": "x", "frobnicate": True}, "frobnicate"),
        ({"model": "m", "input": "x", "temperature": 3}, "temperature"),
        ({"model": "m", "input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"model": "m", "input": "x", "stream": "yes"}, "stream"),
        (
            {"model": "m", "input": "x", "previous_response_id": "resp_never"},
            "previous_response_id",
        ),
        ({"model": "m", "input": "x", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(
    proxy: ProxyEnv, body: dict[str, Any], param: str
) -> None:
    r = proxy.call("POST", "/responses", json=body)
    err = r.json()["error"]
    assert r.status_code == 400 and err["param"] == param, r.text
    assert err["type"] == "invalid_request_error" and param.split("[")[0] in err["message"]
    assert proxy.upstream.requests == []


def test_a_part_whose_text_is_not_a_string_names_that_field(proxy: ProxyEnv) -> None:
    body = {
        "model": "m",
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "fine"},
                    {"type": "input_text", "text": 1},
                ],
            }
        ],
    }
    err = proxy.call("POST", "/responses", json=body).json()["error"]
    assert err["message"] == "input[0].content[1].text: expected a string, got a number"
    assert err["param"] == "input[0].content[1].text"


def test_another_tenant_cannot_continue_a_response(proxy: ProxyEnv) -> None:
    proxy.upstream.push(Reply.text("A's secret answer"))
    with proxy.sdk(who="a") as client:
        mine = client.responses.create(model="m", input="Remember the code word.")
    proxy.drain()
    with proxy.sdk(who="b") as client, pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="m", input="What did I say?", previous_response_id=mine.id)
    assert err.value.param == "previous_response_id"
    assert len(proxy.upstream.chat_requests()) == 1
    gone = proxy.call("GET", "/facts", who="b", params={"entity": CHAIN, "key": mine.id})
    assert gone.status_code == 404


def test_a_response_can_be_continued_before_its_record_is_stored(
    proxy: ProxyEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record is written in the background; until then the proxy answers from the
    records it is writing, so a fast client's next turn still finds the chain."""
    gate = threading.Event()
    record_answer = Namespace.record_answer

    def held(self: Namespace, *args: Any, **kwargs: Any) -> Any:
        gate.wait(30)  # the background worker is busy with the first answer
        return record_answer(self, *args, **kwargs)

    monkeypatch.setattr(Namespace, "record_answer", held)
    proxy.upstream.push(Reply.text("First."), Reply.text("Second."))
    try:
        with proxy.sdk() as client:
            first = client.responses.create(model="m", input="One?")
            stored = proxy.call("GET", "/facts", params={"entity": CHAIN, "key": first.id})
            assert stored.status_code == 404  # not written yet
            second = client.responses.create(model="m", input="Two?", previous_response_id=first.id)
    finally:
        gate.set()
    assert second.output_text == "Second."
    turns = [(m["role"], m["content"]) for m in proxy.upstream.chat_requests()[1].messages]
    assert turns[-3:] == [("user", "One?"), ("assistant", "First."), ("user", "Two?")]
    proxy.drain()
    for answer in (first, second):
        found = proxy.call("GET", "/facts", params={"entity": CHAIN, "key": answer.id})
        assert found.status_code == 200
