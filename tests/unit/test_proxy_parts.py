"""The memory proxy's parts that need no server: injection, new turns, ids, error mapping,
rate-limited warnings, and the Responses API's stored chain (an embedded namespace)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

import synapsedb
from synapsedb import errors
from synapsedb.server.proxy import Warnings, answer_id, inject, new_turns, openai_error
from synapsedb.server.response_records import CHAIN_ENTITY, save_record, stored_record
from synapsedb.server.responses import history, load_chain, parse
from synapsedb.types import Recalled

CONTEXT = Recalled(True, "q", "heuristic", context="Memories about u (cite by id):\n- [m1] x")


def test_the_context_goes_after_the_leading_system_and_developer_messages() -> None:
    sys_ = {"role": "system", "content": "Be brief."}
    dev = {"role": "developer", "content": "No emoji."}
    user = {"role": "user", "content": "Hi"}
    late = {"role": "system", "content": "A later instruction"}
    out = inject([sys_, dev, user, late], CONTEXT)
    assert out == [sys_, dev, {"role": "system", "content": CONTEXT.context}, user, late]
    assert inject([user], CONTEXT)[0]["content"] == CONTEXT.context
    nothing = Recalled(False, "thanks", "none")
    assert inject([sys_, user], nothing) == [sys_, user] and inject([user], None) == [user]


def test_new_turns_are_the_user_turns_after_the_last_other_message() -> None:
    convo = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "user", "content": "d"},
    ]
    assert [t["content"] for t in new_turns(convo)] == ["c", "d"]
    assert new_turns([*convo, {"role": "tool", "content": "x"}]) == []


def test_an_answer_id_is_always_a_new_one_of_synapsedbs() -> None:
    made = [answer_id("chatcmpl") for _ in range(1000)]
    assert len(set(made)) == 1000
    assert all(re.fullmatch(r"chatcmpl-sdb-[0-9A-Z]{26}", m) for m in made)


@pytest.mark.parametrize(
    ("err", "status", "kind"),
    [
        (
            errors.ValidationError("messages: required", field="messages"),
            400,
            "invalid_request_error",
        ),
        (errors.UnauthorizedError("key"), 401, "authentication_error"),
        (errors.ForbiddenError("scope"), 403, "permission_error"),
        (errors.QuotaExceededError("slow down", retry_after=2.0), 429, "rate_limit_error"),
        (errors.UpstreamError("down", breaker_open=True, retry_after=12.3), 502, "upstream_error"),
        (errors.UpstreamError("none", configured=False), 503, "service_unavailable"),
        (errors.SynapseError("a bug"), 500, "server_error"),
    ],
)
def test_errors_map_to_openais_shape(err: errors.SynapseError, status: int, kind: str) -> None:
    resp = openai_error(err)
    body = json.loads(bytes(resp.body))["error"]
    assert resp.status_code == status and body["type"] == kind
    assert body == {
        "message": err.message,
        "type": kind,
        "param": err.details.get("field"),
        "code": err.code,
    }
    if status in (429, 502):
        assert int(resp.headers["retry-after"]) >= 2


def test_warnings_are_rate_limited_per_kind(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    warn = Warnings(every_s=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="synapsedb.proxy"):
        for _ in range(5):
            warn.warn("record", "r")
        warn.warn("remember", "m")
        now[0] = 61.0
        warn.warn("record", "r again")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "memory proxy: r",
        "memory proxy: m",
        "memory proxy: r again (4 more like it since the last one)",
    ]
    assert warn.count == 7


@pytest.fixture
def ns(tmp_path: Path) -> Iterator[synapsedb.Namespace]:
    db = synapsedb.open(
        tmp_path / "d",
        durability="os",
        embedder=None,
        llm=None,
        background_maintenance=False,
        max_value_bytes=4096,
    )
    yield db.namespace("chat")
    db.close()


class NoPending:
    pending: dict[tuple[str, str], dict[str, object]] = {}


def test_a_record_over_the_value_limit_keeps_the_end_of_each_turn(ns: synapsedb.Namespace) -> None:
    long = "start " + "x" * 10_000 + " the end"
    record = {
        "entity": "u",
        "session": "s",
        "input": [{"role": "user", "content": long}],
        "output": "short answer",
        "previous": None,
    }
    save_record(ns, "resp_1", record)
    stored = stored_record(ns, "resp_1")
    assert stored is not None
    kept = stored["input"][0]["content"]
    assert kept.endswith(" the end") and not kept.startswith("start") and len(kept) < 4096
    assert stored["output"] == "short answer"
    where = ns.get(CHAIN_ENTITY, "resp_1")  # the lookup: where the record is, no words
    assert where.expires_at is not None and set(where.value) == {"stream", "event"}
    assert where.value["stream"] == "synapsedb:session:s"
    with pytest.raises(errors.ValidationError):  # what cannot be cut is still refused
        save_record(ns, "resp_2", {**record, "input": [], "output": None, "blob": "y" * 10_000})


def test_a_chain_is_followed_back_to_its_start_or_its_oldest_kept_link(
    ns: synapsedb.Namespace,
) -> None:
    for i, prev in ((1, None), (2, "resp_1"), (3, "resp_2")):
        save_record(
            ns,
            f"resp_{i}",
            {
                "entity": "u",
                "session": "s",
                "previous": prev,
                "input": [{"role": "user", "content": f"q{i}"}],
                "output": f"a{i}",
            },
        )
    chain = load_chain(NoPending(), ns, "resp_3")  # type: ignore[arg-type]
    assert [m["content"] for m in history(chain)] == ["q1", "a1", "q2", "a2", "q3", "a3"]
    ns.delete(CHAIN_ENTITY, "resp_1")  # an expired link: the chain starts after it
    assert [m["content"] for m in history(load_chain(NoPending(), ns, "resp_3"))] == [  # type: ignore[arg-type]
        "q2",
        "a2",
        "q3",
        "a3",
    ]
    with pytest.raises(errors.ValidationError) as err:
        load_chain(NoPending(), ns, "resp_9")  # type: ignore[arg-type]
    assert err.value.details["field"] == "previous_response_id"
    assert load_chain(NoPending(), ns, None) == []  # type: ignore[arg-type]
    # a record stored whole in the lookup fact by an earlier version is still followed
    ns.set(
        CHAIN_ENTITY,
        "resp_0",
        {
            "entity": "u",
            "session": "s",
            "previous": None,
            "input": [{"role": "user", "content": "q0"}],
            "output": "a0",
        },
    )
    ns.set(
        CHAIN_ENTITY,
        "resp_1",
        {
            "entity": "u",
            "session": "s",
            "previous": "resp_0",
            "input": [{"role": "user", "content": "q1"}],
            "output": "a1",
        },
    )
    assert [m["content"] for m in history(load_chain(NoPending(), ns, "resp_3"))] == [  # type: ignore[arg-type]
        "q0",
        "a0",
        "q1",
        "a1",
        "q2",
        "a2",
        "q3",
        "a3",
    ]


def test_parse_maps_the_responses_fields_to_chat_options() -> None:
    req = parse(
        {
            "model": "m",
            "input": "hi",
            "max_output_tokens": 9,
            "top_p": 0.5,
            "reasoning": {"effort": "low"},
            "metadata": {"k": "v"},
            "store": True,
            "text": {"format": {"type": "json_object"}},
        }
    )
    assert req.input == [{"role": "user", "content": "hi"}] and not req.stream
    assert req.options == {
        "model": "m",
        "max_tokens": 9,
        "top_p": 0.5,
        "reasoning_effort": "low",
        "response_format": {"type": "json_object"},
    }
    assert req.echo["metadata"] == {"k": "v"} and req.echo["max_output_tokens"] == 9


class Recorder:
    """A namespace stand-in whose record_answer notes the order of answers (the first of
    conversation "held" waits for the test)."""

    name = "chat"

    def __init__(self) -> None:
        self.order: list[str] = []
        self.gate = threading.Event()

    def record_answer(self, answer_id: str, *args: object, **kwargs: object) -> None:
        if answer_id == "held-1":
            assert self.gate.wait(30)
        self.order.append(answer_id)


def test_one_conversations_work_stays_in_order_and_others_do_not_wait_for_it() -> None:
    from synapsedb.server.proxy import LANES, Proxy, Turn

    proxy = Proxy(SimpleNamespace(memory_loop=None))  # type: ignore[arg-type]
    ns = Recorder()
    held = Turn("user:held", None, "proxy")
    other = next(
        t
        for i in range(100)
        if (t := Turn(f"user:{i}", None, "proxy"))
        and hash((ns.name, t.entity, None)) % LANES != hash((ns.name, held.entity, None)) % LANES
    )
    try:
        for turn, text, ident in (
            (held, "a", "held-1"),
            (held, "b", "held-2"),
            (other, "c", "other-1"),
        ):
            asyncio.run(proxy.finish(ns, turn, None, text, ident, []))  # type: ignore[arg-type]
        deadline = time.monotonic() + 30
        while "other-1" not in ns.order:  # another conversation is not held up
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert ns.order == ["other-1"] and proxy.status()["backlog"] == 2
    finally:
        ns.gate.set()
    proxy.drain()
    assert ns.order == ["other-1", "held-1", "held-2"] and proxy.status()["backlog"] == 0
    asyncio.run(proxy.aclose())
