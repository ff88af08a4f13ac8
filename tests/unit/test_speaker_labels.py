"""Speaker labels ("Name: text" transcript lines): names without digits, at most MAX_LABELS per
namespace; a "Ticket 4521:" prefix is content, so its number stays in what a query searches."""

from __future__ import annotations

from pathlib import Path

import pytest

import synapsedb
from synapsedb.index import catalog as catalog_mod
from synapsedb.query.rank import named_labels


def _labels(d: synapsedb.Database, ns: str) -> list[str | None]:
    cat = d.core.state(ns).catalog
    names = {code: name for name, code in cat.labels.codes.items()}
    return [names.get(int(code)) for code in cat.label[: cat.n]]


def test_names_with_digits_are_not_speakers(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", embedder=None, durability="os") as d:
        mem = d.namespace("n")
        for content in (
            "Ava: the parcel is late",
            "Ticket 4521: refund issued",
            "Dr. Ben Ode: call me back",
            "note 17: see above",
            "no label here",
        ):
            mem.write("u", content)
        assert _labels(d, "n") == ["Ava", None, "Dr. Ben Ode", None, None]
        cat = d.core.state("n").catalog
        names, named = named_labels("what did ava say about ticket 4521", cat.label_words)
        assert names == ["ava"] and named == {cat.labels.codes["Ava"]}
        hits = mem.query("ticket 4521", mode="keyword", k=1).hits
        assert hits[0].content == "Ticket 4521: refund issued"


def test_a_namespace_keeps_at_most_max_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(catalog_mod, "MAX_LABELS", 3)
    path = tmp_path / "d"
    lines = ["Ava: a", "Ben: b", "Cleo: c", "Dan: d", "Ava: e", "Eve: f", "Cleo: g"]
    with synapsedb.open(path, embedder=None, durability="os") as d:
        d.namespace("n").write_many([{"entity": "u", "content": c} for c in lines[:4]])
        for content in lines[4:]:
            d.namespace("n").write("u", content)  # one at a time: the single-row path
        want = ["Ava", "Ben", "Cleo", None, "Ava", None, "Cleo"]
        assert _labels(d, "n") == want
        assert set(d.core.state("n").catalog.label_words) == {"ava", "ben", "cleo"}
    with synapsedb.open(path, embedder=None, durability="os") as d:  # the same after a reload
        assert _labels(d, "n") == want
