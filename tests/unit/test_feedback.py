"""Pseudo-relevance feedback of hybrid text queries (query/feedback.py, executor._feedback):
expansion terms from the best hits bring in a memory that shares no word with the question;
question words, speaker names and one-off words are never added; only hybrid text queries
change; Fusion(feedback_terms=0) turns it off."""

from __future__ import annotations

from pathlib import Path

import pytest

import synapsedb
from synapsedb.index.keyword import analyze
from synapsedb.query.executor import Fusion
from synapsedb.query.feedback import expansion_terms

FILLER = [
    "the weather was lovely on the coast",
    "we talked about hiking trails in spring",
    "a new bakery opened downtown",
    "the team meeting moved to thursday",
    "my cousin adopted a grey cat",
    "the train was late again this morning",
]


@pytest.fixture
def db(tmp_path: Path):  # type: ignore[no-untyped-def]
    with synapsedb.open(tmp_path / "d", durability="os", embedder=None) as d:
        mem = d.namespace("n")
        rows = [("alice", f"Alice: {t}") for t in FILLER]
        rows += [
            ("alice", "Alice: my blue kettle order number is zx7781"),
            ("alice", "Alice: the blue kettle order came with a dent, zx7781 again"),
            ("alice", "Alice: blue kettle order, still waiting, ticket zx7781"),
            # another entity's timeline (no context boost from the rows above), and no word
            # of the question: only the expansion term can find it
            ("warehouse", "Bob: refund approved for zx7781"),
            ("warehouse", "Bob: shelves restocked"),
        ]
        mem.write_many([{"entity": e, "content": c} for e, c in rows])
        yield d, mem


def contents(res: synapsedb.QueryResult) -> list[str]:
    return [h.content for h in res.hits]


def test_an_expansion_term_finds_a_memory_sharing_no_word_with_the_question(db) -> None:  # type: ignore[no-untyped-def]
    d, mem = db
    question = "blue kettle order"
    d.fusion = Fusion(feedback_terms=0)
    off = contents(mem.query(question, k=10))
    assert "Bob: refund approved for zx7781" not in off
    d.fusion = Fusion()
    on = contents(mem.query(question, k=10))
    assert "Bob: refund approved for zx7781" in on
    # the question's own matches still rank first
    assert set(on[:3]) == set(off[:3])
    # the other modes do not use feedback
    for mode in ("keyword",):
        d.fusion = Fusion(feedback_terms=0)
        a = contents(mem.query(question, k=10, mode=mode))
        d.fusion = Fusion()
        assert contents(mem.query(question, k=10, mode=mode)) == a


def test_expansion_leaves_out_question_words_speaker_names_and_one_off_words(db) -> None:  # type: ignore[no-untyped-def]
    d, mem = db
    cat = d.core.state("n").catalog
    mem.query("warm up the keyword index", k=1)
    best = [6, 7, 8]  # the three kettle rows
    question = analyze("blue kettle order")
    terms = expansion_terms(cat, best, [1.0, 1.0, 1.0], question, 10, cat.n)
    assert "zx7781" in terms
    assert not set(question) & set(terms)
    assert "alic" not in terms and "alice" not in terms  # the speaker label, stemmed or not
    assert "dent" not in terms and "ticket" not in terms  # in one memory only
    assert expansion_terms(cat, best, [1.0, 1.0, 1.0], question, 0, cat.n) == []
    assert expansion_terms(cat, best, [0.0, 0.0, 0.0], question, 5, cat.n) == []
    # best first: the term in all three hits outranks a term in two of them
    assert terms[0] == "zx7781"


def test_fusion_refuses_bad_feedback_settings() -> None:
    for bad in (
        {"feedback_docs": -1},
        {"feedback_terms": 1.5},
        {"feedback_repeat": 0},
        {"feedback_terms": True},
    ):
        with pytest.raises(ValueError, match="feedback_"):
            Fusion(**bad)  # type: ignore[arg-type]
