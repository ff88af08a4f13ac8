"""The default ranking of hybrid queries (chosen on the LoCoMo dev benchmark, no LLM).

For a text query in hybrid mode (docs/retrieval.md has the measurements)::

    s0(i) = vector * max(cos(i), 0) / max cos  +  keyword * bm25(i) / max bm25
    s(i)  = s0(i) + context * max(s0 of the `window` memories before and after i in its
            entity's timeline of allowed memories)
          + author * [i's speaker label is named in the query]
          + recency * 2^(-age / half_life) + salience * salience(i)

Candidates are the top ``candidates`` of each list plus their timeline neighbours; every
neighbour's ``s0`` is computed exactly. Without recency or salience weights, the best 100 rows
by ``s`` are then re-ordered by a small learned model over these same signals (query/rerank.py). Speaker labels come from content written as
``"Name: text"``; a query word that names a speaker boosts that speaker's memories and is left
out of the text that gets embedded (names carry no meaning for the embedding model, and every
one of that speaker's memories would match them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["named_labels", "strip_words"]

_WORD = re.compile(r"\w+")


def named_labels(text: str, label_words: Mapping[str, set[int]]) -> tuple[list[str], set[int]]:
    """The query words that name speakers, and the ids of the labels they name."""
    names: list[str] = []
    labels: set[int] = set()
    for word in _WORD.findall(text.lower()):
        ids = label_words.get(word)
        if ids:
            names.append(word)
            labels |= ids
    return names, labels


def strip_words(text: str, drop: Iterable[str]) -> str:
    """``text`` without the words in ``drop`` (and their possessive 's), whitespace collapsed;
    ``text`` itself if nothing would be left."""
    words = sorted(set(drop), key=len, reverse=True)
    if not words:
        return text
    pat = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")(?:['\u2019]s)?\b", re.I)
    out = re.sub(r"\s+", " ", pat.sub(" ", text)).strip()
    out = re.sub(r"\s+([?.!,;:])", r"\1", out)
    return out if _WORD.search(out) else text
