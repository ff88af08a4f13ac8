"""BEAM 100K (../shared/data/beam-100k, read in place; its README says how): chats of long
user/assistant conversations with probing questions by ability, for retrieval benchmarks.

One chat = one namespace; one memory per message. Evidence is message ids: ``source_chat_ids``
(a list, or a dict of lists such as ``{"original_info": [86], "updated_info": [114]}``), or for
a few questions only ``chat_id: N`` inside their references. Abstention questions and those with
no evidence cannot be scored for retrieval and are left out (counted).
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "beam-100k"
CHAT_ID_RE = re.compile(r"chat_id:\s*(\d+)")


@dataclass(frozen=True, slots=True)
class Message:
    id: int  # the chat's message id (what evidence names)
    role: str
    content: str
    batch: int  # BEAM's batch: the session-level unit
    ts: str | None  # the batch's time anchor (ISO-8601), if it parses


@dataclass(frozen=True, slots=True)
class Question:
    ability: str
    text: str
    evidence: frozenset[int]  # message ids


@dataclass
class Chat:
    name: str
    messages: list[Message]
    questions: list[Question]
    skipped: dict[str, int] = field(default_factory=dict)  # ability -> questions not scorable

    def batch_of(self) -> dict[int, int]:
        return {m.id: m.batch for m in self.messages}


def _anchor(text: Any) -> str | None:
    """'March-15-2024' -> '2024-03-15T00:00:00Z'; None if absent or in another format."""
    if not isinstance(text, str):
        return None
    for fmt in ("%B-%d-%Y", "%b-%d-%Y", "%B %d, %Y"):
        try:
            return dt.datetime.strptime(text.strip(), fmt).isoformat() + "Z"
        except ValueError:
            continue
    return None


def _ints(value: Any) -> Iterator[int]:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield value
    elif isinstance(value, str) and value.strip().isdigit():
        yield int(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _ints(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _ints(v)


def evidence_of(q: dict[str, Any]) -> frozenset[int]:
    """Message ids of a question's evidence, in any of the forms BEAM uses."""
    raw = q.get("source_chat_ids")
    if isinstance(raw, str):
        try:
            raw = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            raw = None
    ids = set(_ints(raw))
    if not ids:
        for key in ("conversation_references", "conversation_reference"):
            ids.update(int(n) for n in CHAT_ID_RE.findall(str(q.get(key, ""))))
    return frozenset(ids)


def load_chat(folder: Path) -> Chat:
    batches = json.loads((folder / "chat.json").read_text())
    messages: list[Message] = []
    for b_index, batch in enumerate(batches):
        ts = _anchor(batch.get("time_anchor"))
        for group in batch["turns"]:
            for m in group:
                ts = _anchor(m.get("time_anchor")) or ts
                messages.append(
                    Message(
                        int(m["id"]),
                        str(m["role"]),
                        str(m["content"]),
                        int(batch.get("batch_number", b_index + 1)),
                        ts,
                    )
                )
    known = {m.id for m in messages}
    probing = json.loads((folder / "probing_questions" / "probing_questions.json").read_text())
    questions: list[Question] = []
    skipped: dict[str, int] = {}
    for ability, items in probing.items():
        for q in items:
            ev = evidence_of(q) & known
            if ability == "abstention" or not ev:
                skipped[ability] = skipped.get(ability, 0) + 1
                continue
            questions.append(Question(ability, str(q["question"]), ev))
    return Chat(folder.name, messages, questions, skipped)


def load_dataset(data: Path = DEFAULT_DATA, names: Sequence[str] | None = None) -> list[Chat]:
    folders = sorted(
        (p for p in data.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)
    )
    return [load_chat(p) for p in folders if names is None or p.name in names]
