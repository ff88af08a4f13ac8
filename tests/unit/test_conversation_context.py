"""SmartContextManager: the four tiers within their budgets, in priority order; overflow drops
the least relevant retrieved items, then folds the oldest turns into the summary (a scripted
model or extractively); OpenAI and Anthropic output formats."""

from __future__ import annotations

import asyncio
import itertools
import random
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support.scripted_upstream import Reply, ScriptedUpstream

from synapsedb.config import LLMSettings
from synapsedb.conversation.context import SmartContextManager
from synapsedb.conversation.context_parts import CONTINUATION
from synapsedb.conversation.messages import Message
from synapsedb.conversation.summary import PREFIX
from synapsedb.conversation.tokens import count_message_tokens, encoding_for
from synapsedb.errors import UpstreamError, ValidationError
from synapsedb.llm import ChatClient
from synapsedb.types import Recalled, Recollection

SYSTEM = "You are a helpful research assistant. Answer from the search results."
T0 = datetime(2024, 5, 1, tzinfo=UTC)


class ScriptedChat:
    """A stand-in for a ChatClient: answers from a script and records every request."""

    def __init__(self, *answers: str | BaseException) -> None:
        self.answers = list(answers)
        self.requests: list[list[dict[str, Any]]] = []
        self.configured = True

    def _next(self, messages: Any) -> Any:
        self.requests.append([dict(m) for m in messages])
        answer = self.answers.pop(0) if self.answers else "summary"
        if isinstance(answer, BaseException):
            raise answer
        return type("Reply", (), {"content": answer})()

    def chat(self, messages: Any, *, max_tokens: int | None = None) -> Any:
        return self._next(messages)


class AsyncScriptedChat(ScriptedChat):
    async def chat(self, messages: Any, *, max_tokens: int | None = None) -> Any:  # type: ignore[override]
        await asyncio.sleep(0)
        return self._next(messages)


def conversation(n: int, seed: int = 7) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    words = [
        "budget",
        "timeline",
        "Alpha",
        "Boston",
        "hiking",
        "painting",
        "project",
        "deadline",
        "review",
        "team",
        "contract",
        "Friday",
        "Monday",
        "invoice",
        "design",
        "launch",
        "meeting",
    ]
    out = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        size = rng.choice([4, 10, 25, 60])
        out.append((role, f"Turn {i}: " + " ".join(rng.choice(words) for _ in range(size)) + "."))
    return out


def tiers(messages: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The OpenAI output split into its tiers, recognised by content, not by the manager."""
    out: dict[str, list[dict[str, Any]]] = {
        "system": [],
        "summary": [],
        "retrieved": [],
        "recent": [],
    }
    for m in messages:
        c = m["content"]
        if m["role"] == "system" and c.startswith(PREFIX):
            out["summary"].append(m)
        elif m["role"] == "system" and c.startswith(("Relevant memories", "Search results")):
            out["retrieved"].append(m)
        elif m["role"] == "system":
            out["system"].append(m)
        else:
            out["recent"].append(m)
    return out


def check_budgets(manager: SmartContextManager, out: list[dict[str, Any]]) -> dict[str, int]:
    """Every tier's tokens, counted afresh from the output, within its budget; and the sum."""
    model = manager.model
    cpt = manager.counter.chars_per_token
    counted = {
        name: count_message_tokens(ms, model, chars_per_token=cpt, reply_priming=False)
        for name, ms in tiers(out).items()
    }
    assert counted["summary"] <= manager.max_summary_tokens
    assert counted["retrieved"] <= manager.max_search_tokens
    assert counted["recent"] <= manager.max_recent_tokens
    if manager.max_system_tokens is not None:
        assert counted["system"] <= manager.max_system_tokens
    total = count_message_tokens(out, model, chars_per_token=cpt)
    if manager.max_total_tokens is not None:
        assert total <= manager.max_total_tokens
    stats = manager.last_build
    assert stats is not None
    assert {k: stats.tokens[k] for k in counted} == counted
    assert stats.tokens["total"] == total
    return counted


# -- seed 004 ---------------------------------------------------------------------------------


def test_seed_example() -> None:
    manager = SmartContextManager(cheap_llm=None, max_recent_tokens=4000, max_search_tokens=2000)
    manager.set_system(SYSTEM)
    manager.set_search_results(
        "SynapseKit v1.9.0 adds SmartContextManager, PrometheusMetrics, "
        "and ContinuousTrainer to its feature set."
    )
    manager.add("user", "What is new in SynapseKit v1.9.0?")
    manager.add("assistant", "SynapseKit v1.9.0 introduces SmartContextManager.")
    manager.add("user", "How does SmartContextManager reduce costs?")
    assert len(manager) == 3
    out = asyncio.run(manager.get_messages())
    assert [m["role"] for m in out] == ["system", "system", "user", "assistant", "user"]
    assert out[0]["content"] == SYSTEM
    assert out[1]["content"].startswith("Search results:\nSynapseKit v1.9.0 adds")
    assert out[-1] == {"role": "user", "content": "How does SmartContextManager reduce costs?"}
    assert manager.summary == ""
    check_budgets(manager, out)
    manager.clear_search_results()
    assert [m["role"] for m in manager.build()] == ["system", "user", "assistant", "user"]
    manager.clear()
    assert len(manager) == 0 and manager.build() == []


def test_defaults_match_the_seed() -> None:
    manager = SmartContextManager()
    assert (manager.max_recent_tokens, manager.max_search_tokens) == (4000, 2000)
    assert manager.counter.chars_per_token == 4
    assert manager.cheap_llm is None
    assert manager.counter.name == "estimate:4chars" and not manager.counter.exact


# -- budgets ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "n"),
    [
        (
            {
                "model": "gpt-4o",
                "max_recent_tokens": 300,
                "max_search_tokens": 120,
                "max_summary_tokens": 150,
            },
            80,
        ),
        (
            {
                "model": "gpt-4",
                "max_recent_tokens": 500,
                "max_search_tokens": 60,
                "max_summary_tokens": 100,
                "max_total_tokens": 600,
            },
            120,
        ),
        (
            {
                "chars_per_token": 3,
                "max_recent_tokens": 200,
                "max_search_tokens": 200,
                "max_summary_tokens": 80,
                "max_total_tokens": 380,
                "max_system_tokens": 40,
            },
            60,
        ),
        (
            {
                "model": "gpt-4o",
                "max_recent_tokens": 4000,
                "max_search_tokens": 2000,
                "max_total_tokens": 450,
                "max_summary_tokens": 120,
            },
            40,
        ),
    ],
)
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_every_tier_and_the_total_stay_within_budget(
    options: dict[str, Any], n: int, fmt: str
) -> None:
    manager = SmartContextManager(**options)
    manager.set_system(SYSTEM)
    manager.set_memories([(f"Memory {i}: " + "fact " * (i % 7 + 1), 1 - i / 20) for i in range(20)])
    manager.set_search_results([f"Result {i}: " + "detail " * (i % 5 + 2) for i in range(10)])
    for k, (role, text) in enumerate(conversation(n)):
        manager.add(role, text)
        if k % 9 == 8:  # builds along the way: folding happens repeatedly
            check_budgets(manager, manager.build())
    out = manager.build()
    counted = check_budgets(manager, out)
    assert counted["recent"] > 0 and counted["summary"] > 0
    rendered = manager.build(format=fmt)
    if fmt == "anthropic":
        roles = [m["role"] for m in rendered["messages"]]
        assert roles[0] == "user" and all(a != b for a, b in itertools.pairwise(roles))


def test_the_counts_are_the_models_encoding_or_a_labelled_estimate() -> None:
    exact = SmartContextManager(model="gpt-4o")
    exact.add("user", "日本語のテキスト " * 20)
    exact.build()
    assert exact.last_build is not None
    assert exact.last_build.exact and exact.last_build.encoding == "o200k_base"
    estimate = SmartContextManager(chars_per_token=3, model="claude-3-5-haiku")
    estimate.add("user", "x" * 300)
    estimate.build()
    assert estimate.last_build is not None
    assert not estimate.last_build.exact and estimate.last_build.encoding == "estimate:3chars"
    # 3 per message + ceil(4/3) for the role + 100 for the content, + 3 priming
    assert estimate.last_build.tokens["total"] == 3 + 2 + 100 + 3


# -- priority and relevance -------------------------------------------------------------------


def test_tiers_come_in_priority_order() -> None:
    manager = SmartContextManager(max_recent_tokens=120, max_summary_tokens=200, model="gpt-4o")
    manager.set_system(SYSTEM)
    manager.set_memories(["Caroline moved to Boston in 2021."])
    for role, text in conversation(30):
        manager.add(role, text)
    out = manager.build()
    kinds = []
    for m in out:
        tier = next(name for name, ms in tiers(out).items() if m in ms)
        if not kinds or kinds[-1] != tier:
            kinds.append(tier)
    assert kinds == ["system", "summary", "retrieved", "recent"]


def test_the_total_budget_drops_retrieved_items_before_folding_any_turn() -> None:
    manager = SmartContextManager(model="gpt-4o", max_total_tokens=350)
    manager.set_system(SYSTEM)
    manager.set_memories(
        [(f"Memory number {i} about hiking trips in Oregon.", i / 10) for i in range(10)]
    )
    for role, text in conversation(8):
        manager.add(role, text)
    stats_tokens = check_budgets(manager, manager.build())
    stats = manager.last_build
    assert stats is not None and stats.folded == 0 and 0 < stats.kept < 10
    assert stats.dropped == 10 - stats.kept
    assert len(manager) == 8 and manager.summary == ""
    assert stats_tokens["recent"] == count_message_tokens(
        [{"role": r, "content": t} for r, t in conversation(8)], "gpt-4o", reply_priming=False
    )


def test_least_relevant_memories_are_dropped_first() -> None:
    memories = [
        ("Melanie paints landscapes on weekends.", 0.31),
        ("Caroline moved from Sweden to Boston four years ago.", 0.92),
        ("Caroline's dog is called Oscar.", 0.55),
        ("Melanie ran a charity race in May.", 0.12),
        ("Caroline is studying counseling.", 0.77),
    ]
    by_score = [t for t, _ in sorted(memories, key=lambda m: -m[1])]
    manager = SmartContextManager(model="gpt-4o")
    manager.set_memories(memories)
    manager.build()
    full = manager.last_build
    assert full is not None and full.kept == 5
    for keep in range(1, 5):
        manager.max_search_tokens = SmartContextManager(model="gpt-4o")._cost_of(
            "system",
            "Relevant memories (most relevant first):\n"
            + "\n".join(f"- {t}" for t in by_score[:keep]),
        )
        out = manager.build()
        block = tiers(out)["retrieved"][0]["content"]
        assert block.splitlines()[1:] == [f"- {t}" for t in by_score[:keep]]
        assert manager.last_build is not None and manager.last_build.dropped == 5 - keep


def test_recalled_memories_rank_by_similarity_and_interleave_with_search_results() -> None:
    def rec(i: int, text: str, similarity: float) -> Recollection:
        return Recollection(
            id=f"m{i}",
            entity="user:caroline",
            type="fact",
            content=text,
            similarity=similarity,
            score=similarity,
            ts=T0,
        )

    recalled = Recalled(
        needed=True,
        query="where does Caroline live",
        rewritten_by="none",
        memories=(
            rec(1, "Caroline likes hiking.", 0.41),
            rec(2, "Caroline lives in Boston.", 0.88),
        ),
    )
    manager = SmartContextManager(model="gpt-4o")
    manager.set_memories(recalled)
    manager.set_search_results(["Boston is in Massachusetts.", "Boston has a harbor."])
    out = manager.build()
    block = tiers(out)["retrieved"][0]["content"]
    assert block == (
        "Relevant memories (most relevant first):\n"
        "- [2024-05-01] Caroline lives in Boston.\n"
        "- [2024-05-01] Caroline likes hiking.\n\n"
        "Search results:\n- Boston is in Massachusetts.\n- Boston has a harbor."
    )
    # the budget for three items: the second search result (rank 1) goes first, it ties with
    # the second memory and search results yield on ties
    three = block.replace("\n- Boston has a harbor.", "")
    manager.max_search_tokens = manager._cost_of("system", three)
    assert tiers(manager.build())["retrieved"][0]["content"] == three
    manager.set_memories(Recalled(needed=False, query="", rewritten_by="none"))
    assert "memories" not in tiers(manager.build())["retrieved"][0]["content"]


def test_an_item_too_big_alone_is_cut_at_a_word_boundary() -> None:
    manager = SmartContextManager(model="gpt-4o", max_search_tokens=40)
    manager.set_search_results(" ".join(f"word{i}" for i in range(300)))
    out = manager.build()
    block = tiers(out)["retrieved"][0]["content"]
    assert block.startswith("Search results:\nword0 word1") and block.endswith(" ...")
    assert manager.last_build is not None and manager.last_build.cut == ("retrieved",)
    check_budgets(manager, out)


@pytest.mark.parametrize(
    "bad",
    [{"content": 3}, [object()], [("text", "high")], 42, {"a": 1}],
)
def test_bad_retrieved_items_are_refused(bad: Any) -> None:
    with pytest.raises(ValidationError) as err:
        SmartContextManager().set_memories(bad)
    assert str(err.value.details["field"]).startswith("memories")


# -- summaries --------------------------------------------------------------------------------


def test_overflow_folds_the_oldest_turns_through_the_cheap_llm() -> None:
    llm = ScriptedChat("S1: the user asked about Alpha budgets.", "S2: budgets, then Boston.")
    manager = SmartContextManager(cheap_llm=llm, max_recent_tokens=200, model="gpt-4o")
    turns = conversation(40)
    for role, text in turns[:20]:
        manager.add(role, text)
    out = manager.build()
    check_budgets(manager, out)
    stats = manager.last_build
    assert stats is not None and stats.folded > 0 and stats.summary_method == "llm"
    assert manager.summary == "S1: the user asked about Alpha budgets."
    assert tiers(out)["summary"][0]["content"] == f"{PREFIX}: {manager.summary}"
    folded = turns[: stats.folded]
    sent = llm.requests[0][-1]["content"]
    assert all(text in sent for _, text in folded)  # the folded turns, verbatim
    assert not any(text in sent for _, text in turns[stats.folded : 20])  # not the kept ones
    assert [m.content for m in manager.messages] == [t for _, t in turns[stats.folded : 20]]
    assert manager.messages[0].role == "user"  # the kept turns start at a user message
    # the next fold sends the previous summary and only the turns not folded yet
    for role, text in turns[20:]:
        manager.add(role, text)
    manager.build()
    second = llm.requests[1][-1]["content"]
    assert "S1: the user asked about Alpha budgets." in second
    assert turns[0][1] not in second and turns[stats.folded][1] in second
    assert manager.summary == "S2: budgets, then Boston." and manager.summary_state.version == 2


def test_async_get_messages_folds_with_an_async_client() -> None:
    llm = AsyncScriptedChat("Async summary.")
    manager = SmartContextManager(cheap_llm=llm, max_recent_tokens=150, model="gpt-4o")
    for role, text in conversation(20):
        manager.add(role, text)
    out = asyncio.run(manager.get_messages())
    check_budgets(manager, out)
    assert manager.summary == "Async summary." and len(llm.requests) == 1


def test_a_real_chat_client_writes_the_summary() -> None:
    with ScriptedUpstream([Reply.text("They discussed budgets and a Friday deadline.")]) as up:
        llm = ChatClient(
            LLMSettings(base_url=up.base_url, model="cheap", max_retries=0, timeout_s=5.0),
            sleep=lambda s: None,
        )
        manager = SmartContextManager(cheap_llm=llm, max_recent_tokens=150)
        for role, text in conversation(20):
            manager.add(role, text)
        out = manager.build()
        llm.close()
    assert manager.summary == "They discussed budgets and a Friday deadline."
    assert len(up.chat_requests()) == 1
    assert "Turn 0:" in up.chat_requests()[0].messages[-1]["content"]
    check_budgets(manager, out)


def test_without_a_model_the_summary_is_extractive_and_says_so() -> None:
    manager = SmartContextManager(max_recent_tokens=150, max_summary_tokens=120, model="gpt-4o")
    turns = conversation(24)
    for role, text in turns:
        manager.add(role, text)
    out = manager.build()
    check_budgets(manager, out)
    summary = tiers(out)["summary"][0]["content"]
    assert summary.startswith(f"{PREFIX} (extractive")
    assert manager.summary_state.method == "extractive"
    assert manager.last_build is not None and manager.last_build.summary_method == "extractive"
    assert "Turn 0:" in manager.summary  # sentences of the folded turns, not made up


def test_a_failing_model_falls_back_to_extractive_and_loses_no_turn() -> None:
    llm = ScriptedChat(UpstreamError("the model is down"))
    manager = SmartContextManager(cheap_llm=llm, max_recent_tokens=150, model="gpt-4o")
    turns = conversation(20)
    for role, text in turns:
        manager.add(role, text)
    manager.build()
    stats = manager.last_build
    assert stats is not None and stats.summary_method == "extractive" and len(llm.requests) == 1
    assert len(manager) + stats.folded == 20
    assert manager.summary


def test_tool_calls_are_folded_with_their_results() -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    manager = SmartContextManager(max_recent_tokens=60, model="gpt-4o", fold_to=1.0)
    manager.add("user", "What is the weather in Paris? " * 3)
    manager.add(Message.assistant("", tool_calls=[call]))
    manager.add(Message.tool("18 degrees and sunny " * 4, "call_1"))
    manager.add("assistant", "It is 18 degrees and sunny in Paris.")
    manager.add("user", "Thanks!")
    out = manager.build()
    check_budgets(manager, out)
    recent = tiers(out)["recent"]
    ids = {c["id"] for m in recent for c in m.get("tool_calls") or ()}
    assert all(m["tool_call_id"] in ids for m in recent if m["role"] == "tool")
    assert recent[0]["role"] != "tool"


def test_the_newest_turn_is_never_cut_nor_folded() -> None:
    manager = SmartContextManager(max_recent_tokens=50, model="gpt-4o")
    manager.add("user", "word " * 200)
    with pytest.raises(ValidationError) as err:
        manager.build()
    assert err.value.details["field"] == "max_recent_tokens"
    assert len(manager) == 1
    squeezed = SmartContextManager(max_total_tokens=120, model="gpt-4o")
    squeezed.set_system("You are terse. " * 10)
    squeezed.add("user", "word " * 90)
    with pytest.raises(ValidationError) as err:
        squeezed.build()
    assert err.value.details["field"] == "max_total_tokens"


# -- Anthropic ---------------------------------------------------------------------------------


def test_anthropic_format_caches_system_and_summary_and_alternates() -> None:
    manager = SmartContextManager(max_recent_tokens=200, model="gpt-4o", format="anthropic")
    manager.set_system(SYSTEM)
    manager.set_search_results("Boston is in Massachusetts.")
    for role, text in conversation(31):  # ends with a user turn
        manager.add(role, text)
    manager.add("user", "And one more thing.")  # two user turns in a row: merged
    ctx = manager.build()
    assert set(ctx) == {"system", "messages"}
    system = ctx["system"]
    assert [b["type"] for b in system] == ["text", "text", "text"]
    assert system[0] == {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
    assert system[1]["text"].startswith(PREFIX)
    assert system[1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in system[2]  # the retrieved tier changes every turn
    roles = [m["role"] for m in ctx["messages"]]
    assert roles[0] == "user" and roles[-1] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles))
    last = ctx["messages"][-1]["content"]
    assert isinstance(last, list) and last[-1] == {"type": "text", "text": "And one more thing."}
    # the same texts in fewer messages: no more tokens than the OpenAI rendering budgeted
    flat = [{"role": "system", "content": b["text"]} for b in system] + [
        {
            "role": m["role"],
            "content": m["content"]
            if isinstance(m["content"], str)
            else "\n\n".join(b["text"] for b in m["content"]),
        }
        for m in ctx["messages"]
    ]
    assert manager.last_build is not None
    assert count_message_tokens(flat, "gpt-4o") <= manager.last_build.tokens["total"]


def test_anthropic_turns_start_with_the_user() -> None:
    manager = SmartContextManager()
    manager.add("assistant", "Hello! How can I help?")
    manager.add("user", "Tell me a joke.")
    ctx = manager.build(format="anthropic")
    assert ctx["system"] == []
    assert ctx["messages"] == [
        {"role": "user", "content": CONTINUATION},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ]
    assert manager.last_build is not None
    assert manager.last_build.tokens["recent"] == count_message_tokens(
        ctx["messages"], reply_priming=False
    )


def test_anthropic_tool_calls_become_tool_use_and_tool_result_blocks() -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    manager = SmartContextManager()
    manager.add("user", "Weather in Paris?")
    manager.add(Message.assistant("Let me check.", tool_calls=[call]))
    manager.add(Message.tool("18C, sunny", "call_1"))
    ctx = manager.build(format="anthropic")
    assert ctx["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "18C, sunny"}],
        },
    ]


# -- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"max_recent_tokens": 0}, "max_recent_tokens"),
        ({"max_search_tokens": -1}, "max_search_tokens"),
        ({"max_summary_tokens": 10}, "max_summary_tokens"),
        ({"max_total_tokens": 2.5}, "max_total_tokens"),
        ({"chars_per_token": 0}, "chars_per_token"),
        ({"fold_to": 0}, "fold_to"),
        ({"format": "gemini"}, "format"),
        ({"cheap_llm": object()}, "llm"),
    ],
)
def test_bad_options_name_the_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        SmartContextManager(**options)
    assert err.value.details["field"] == field


def test_system_prompt_rules() -> None:
    manager = SmartContextManager(max_system_tokens=10)
    with pytest.raises(ValidationError, match="never cut"):
        manager.set_system("x" * 400)
    manager = SmartContextManager(max_total_tokens=20)
    manager.set_system("y" * 400)
    with pytest.raises(ValidationError) as err:
        manager.build()
    assert err.value.details["field"] == "max_total_tokens"
    with pytest.raises(ValidationError, match="set_system"):
        manager.add("system", "no")
    with pytest.raises(ValidationError, match="format"):
        manager.build(format="xml")  # type: ignore[arg-type]


def test_counts_use_the_encoding_helper() -> None:
    manager = SmartContextManager(model="gpt-4")
    assert manager.counter is encoding_for("gpt-4")


def test_the_context_manager_section_of_the_docs_runs() -> None:
    """docs/conversation.md's ``## Context manager`` example runs as written, and every public
    method and property is in its tables."""
    import inspect
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "conversation.md").read_text()
    section = text.split("## Context manager", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/conversation.md", "exec"), {"__name__": "docs"})
    for name, _ in inspect.getmembers(SmartContextManager):
        if not name.startswith("_"):
            assert f"`{name}(" in section or f"`{name}`" in section, name
