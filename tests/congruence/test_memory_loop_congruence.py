"""The memory loop embedded and over HTTP (POST .../remember, .../recall through
RemoteNamespace) gives the same Remembered and Recalled, and the same errors.

Both databases share one real embedding model and one LLM: ScriptedUpstream, a stand-in for
a hosted model over a real loopback socket, answering by the schema asked for. Memory ids,
job keys and query ids are random by construction: they are renamed by order of appearance
(in strings too, since the context block cites ids) before comparing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.client import RemoteDatabase
from synapsedb.embed import OnnxMiniLM
from synapsedb.errors import SynapseError, UpstreamError
from synapsedb.llm import ChatClient, LLMSettings
from synapsedb.memory_loop import LoopSettings, MemoryLoop
from synapsedb.server import create_app
from synapsedb.types import Recalled, Remembered
from tests.congruence.conftest import ServedStorage
from tests.congruence.lean import as_served
from tests.support.scripted_upstream import Request, ScriptedUpstream

START_US = 1_761_318_000_000_000  # 2025-10-24T15:00:00Z
RANDOM_ID = re.compile(r"\b(?:[0-9A-HJKMNP-TV-Z]{26}|extract:[0-9a-f]+)\b")  # ULIDs, job keys


class Renamer:
    """Replaces random ids by ``#n`` in order of first appearance, in fields and in text."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _name(self, match: re.Match[str]) -> str:
        return self.names.setdefault(match[0], f"#{len(self.names)}")

    def __call__(self, value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: self(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, list | tuple):
            return [self(v) for v in value]
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, str):
            return RANDOM_ID.sub(self._name, value)
        if hasattr(value, "tolist"):  # numpy embeddings
            return value.tolist()
        return value


def normalize(results: list[Any]) -> list[Any]:
    return Renamer()(results)


def answer(request: Request) -> Any:
    """The stand-in model: extraction says what the last user turn says; no decision; the
    rewrite names the Hawaii trip."""
    name = ((request.response_format or {}).get("json_schema") or {}).get("name")
    if name == "memories":
        turns = request.messages[-1]["content"].splitlines()[1:]
        said = [t.split(" user: ", 1)[1] for t in turns if " user: " in t]
        return {
            "memories": [
                {
                    "type": "fact",
                    "content": f"The user said: {said[-1]}",
                    "entity": None,
                    "confidence": 0.8,
                    "valid_from": "last week",
                    "source_turns": [1],
                }
            ]
        }
    if name == "decisions":
        return {"decisions": []}
    if name == "query":
        return {"query": "the budget for the Hawaii trip"}
    raise AssertionError(f"unexpected request for {name!r}")


@pytest.fixture(scope="module")
def model() -> OnnxMiniLM:
    return OnnxMiniLM()


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(responder=answer) as up:
        yield up


def open_pair(
    tmp_path: Path, model: OnnxMiniLM, llm: ChatClient | None, storage: str | None
) -> Iterator[tuple[Any, Any]]:
    dbs = []
    for name in ("local", "served"):
        db = synapsedb.open(
            tmp_path / name,
            clock=synapsedb.ManualClock(START_US),
            durability="os",
            background_maintenance=False,
            embedder=model,
            llm=None,
            storage=storage if name == "served" else None,
        )
        assert db.memory_loop is not None
        db.memory_loop.close()  # no worker: jobs stay queued, both sides alike
        db.memory_loop = MemoryLoop(llm, LoopSettings())
        dbs.append(db)
    local, served = dbs
    http = TestClient(create_app(served))
    remote = RemoteDatabase("http://testserver", client=http)
    try:
        yield local, remote
    finally:
        remote.close()
        http.close()
        served.close()
        local.close()


@pytest.fixture
def pair(
    tmp_path: Path, model: OnnxMiniLM, upstream: ScriptedUpstream, served_storage: ServedStorage
) -> Iterator[tuple[Any, Any]]:
    llm = ChatClient(LLMSettings(base_url=upstream.base_url, model="scripted", max_retries=0))
    try:
        yield from open_pair(tmp_path, model, llm, served_storage())
    finally:
        llm.close()


@pytest.fixture(scope="module")
def pair_without_llm(
    tmp_path_factory: pytest.TempPathFactory, model: OnnxMiniLM, served_storage: ServedStorage
) -> Iterator[tuple[Any, Any]]:
    """Shared by the error tests: each checks that it stored nothing in namespace acme."""
    yield from open_pair(tmp_path_factory.mktemp("no-llm"), model, None, served_storage())


HAWAII = "The user's budget for the Hawaii trip is $3000"


def scenario(db: Any) -> list[Any]:
    mem = db.namespace("acme", agent="concierge")
    out: list[Any] = []
    out.append(
        mem.remember(
            [
                {"role": "system", "content": "You are a travel agent."},
                {
                    "role": "user",
                    "content": "I'm planning a Hawaii trip",
                    "ts": "2025-10-24T14:00:00Z",
                    "name": "ana",
                },
                {"role": "assistant", "content": "Lovely!"},
            ],
            entity="user:1",
            session="s1",
        )
    )
    out.append(
        mem.remember(
            "Set the budget to $3000",
            entity="user:1",
            session="s1",
            memories=[{"type": "fact", "content": HAWAII, "valid_from": "2025-10-20"}],
        )
    )
    out.append(
        mem.remember(
            "Budget is $3000",
            entity="user:1",
            session="s2",
            memories=[{"content": HAWAII, "confidence": 0.5}],
        )
    )
    out.append(
        mem.remember(
            "Make it $5000",
            entity="user:1",
            session="s2",
            memories=[{"content": "The user's budget for the Hawaii trip is $5000"}],
            wait=True,
        )
    )
    out.append(
        mem.remember(
            [{"role": "user", "content": "I'm vegetarian"}],
            entity="user:2",
            session="s3",
            agent="intake",
            wait=True,
        )
    )
    out.append(
        mem.remember(
            [{"role": "assistant", "content": "Anything else?"}], entity="user:2", session="s3"
        )
    )
    out.append(mem.remember([{"role": "system", "content": "Be brief"}], entity="user:2"))
    out.append(mem.recall("thanks!", entity="user:1"))
    out.append(mem.recall("What is my budget for the Hawaii trip?", entity="user:1"))
    msgs = [
        {"role": "user", "content": "I'm planning the Hawaii trip"},
        {"role": "assistant", "content": "Great"},
        {"role": "user", "content": "what's my budget for it?"},
    ]
    out.append(mem.recall(msgs, entity="user:1", rewrite="heuristic"))
    out.append(mem.recall(msgs, entity="user:1", rewrite="llm"))
    # 100 tokens: the block's frame (first line, markers, note) is about 33 of them
    out.append(mem.recall(msgs, entity="user:1", threshold=0, k=3, budget_tokens=100))
    out.append(mem.recall("vegetarian food", threshold=0.0))
    # one clock instant: memories tie on time and then order by their random ids
    out.append(sorted(mem.memories("user:1"), key=lambda m: (m.type, m.content, m.version)))
    out.append(mem.events("memory-decisions"))
    return out


def test_same_remembered_and_recalled(pair: tuple[Any, Any]) -> None:
    local, remote = pair
    a, b = scenario(local), scenario(remote)
    assert [type(x) for x in a] == [type(x) for x in b]
    assert isinstance(a[0], Remembered) and isinstance(a[8], Recalled)
    # the scenario covers what it means to: each status, each action, each rewriter
    # (turns are indexed inline; caller memories are resolved inline; only the LLM's
    # extraction is queued)
    assert [x.status for x in a[:7]] == [
        "queued",
        "extracted",
        "extracted",
        "extracted",
        "extracted",
        "stored",
        "stored",
    ]
    assert [d.action for x in a[1:5] for d in x.decisions] == ["ADD", "NOOP", "UPDATE", "ADD"]
    assert [x.rewritten_by for x in a[7:11]] == ["none", "none", "heuristic", "llm"]
    assert a[8].memories and a[11].memories
    assert normalize(as_served(a)) == normalize(b)  # the client is lean: no vectors


REMEMBER_ERRORS: list[Callable[[Any], Any]] = [
    lambda m: m.remember([], entity="user:1"),
    lambda m: m.remember([{"content": "no role"}], entity="user:1"),
    lambda m: m.remember([{"role": "robot", "content": "x"}], entity="user:1"),
    lambda m: m.remember([{"role": "user", "content": 5}], entity="user:1"),
    lambda m: m.remember([{"role": "user", "content": "x" * 32_001}], entity="user:1"),
    lambda m: m.remember([{"role": "user", "content": "x"}] * 65, entity="user:1"),
    lambda m: m.remember([{"role": "user", "content": "x", "ts": "soon"}], entity="user:1"),
    lambda m: m.remember("x", entity=""),
    lambda m: m.remember("x", entity="user:1", session="s" * 249),
    lambda m: m.remember("x", entity="user:1", memories=[{"type": "belief", "content": "x"}]),
    lambda m: m.remember("x", entity="user:1", memories=[{"content": ""}]),
    lambda m: m.remember("x", entity="user:1", memories=[{"content": "x", "confidence": 3}]),
    lambda m: m.remember("x", entity="user:1", memories=[{"content": "x", "valid_from": "?"}]),
    lambda m: m.remember("x", entity="user:1", memories=[{"content": "x"}] * 21),
    lambda m: m.recall([]),
    lambda m: m.recall([{"content": "x"}]),
    lambda m: m.recall("budget?", budget_tokens=0),
    lambda m: m.recall("budget?", budget_tokens=100_001),
    lambda m: m.recall("budget?", k=0),
    lambda m: m.recall("budget?", k=101),
    lambda m: m.recall("budget?", threshold=1.5),
    lambda m: m.recall("budget?", threshold=-1),
    lambda m: m.recall("budget?", rewrite="magic"),
    lambda m: m.recall("budget?", entity=""),
]


def same_error(pair: tuple[Any, Any], op: Callable[[Any], Any]) -> list[SynapseError]:
    caught = []
    for db in pair:
        mem = db.namespace("acme")
        with pytest.raises(SynapseError) as err:
            op(mem)
        caught.append(err.value)
        assert mem.streams() == [] and mem.memories() == []  # nothing stored
    a, b = caught
    assert type(a) is type(b)
    assert (a.code, a.details.get("field"), a.details.get("limit")) == (
        b.code,
        b.details.get("field"),
        b.details.get("limit"),
    )
    assert a.details.get("field"), a.message
    return caught


@pytest.mark.parametrize("op", range(len(REMEMBER_ERRORS)))
def test_same_errors(pair_without_llm: tuple[Any, Any], op: int) -> None:
    same_error(pair_without_llm, REMEMBER_ERRORS[op])


def test_wait_without_an_llm_is_the_same_upstream_error_on_both_sides(
    pair_without_llm: tuple[Any, Any],
) -> None:
    caught = []
    for db in pair_without_llm:
        mem = db.namespace("acme-wait")
        with pytest.raises(UpstreamError) as err:
            mem.remember("I like tea", entity="user:1", session="s1", wait=True)
        caught.append(err.value)
        assert [e.content for e in mem.events("session:s1")] == ["I like tea"]
        job = mem.get("synapsedb:jobs", err.value.details["job"])
        assert job.value["state"] == "queued"
    a, b = caught
    assert type(a) is type(b) and a.code == b.code
    assert a.message == b.message
    assert normalize([a.details]) == normalize([b.details])
