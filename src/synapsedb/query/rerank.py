"""Learned re-ranking of a hybrid text query's best candidates (no model runs: a small table of
decision trees over signals the default ranking has already computed).

The default ranking (query/rank.py) finds the right stretch of a conversation, but inside it
often ranks the reply above the turn that holds the fact: an assistant's long answer repeats
the question's words, a question asked back matches the question. This step re-orders the top
``depth`` rows of the default ranking by a gradient-boosted ensemble (:mod:`.ranker_model`)
over these features of each row, all read from the default's own arrays:

====================  ====================================================================
``rel_score``         its default score / the best default score
``s0``, ``vec_n``,    its fused base score and the two normalized parts (after feedback)
``key_n``
``ctx``               the best base score among its timeline neighbours (the context term)
``prev1`` ...         the base score of the neighbour 1 or 2 before (``prev``) or after it
``author``            1 when its speaker is named in the query
``log_rank``          log(1 + its rank in the default order)
``assistant``         1 when its speaker label is ``assistant`` (a chat model's reply)
``log_len``           log(1 + its keyword-analyzed length)
``row_time``          1 when its text (after the speaker label) has a time expression
``is_question``       1 when its text asks a question ("?")
``cos_rank``,         log(1 + its rank among the scored rows by cosine, by BM25)
``bm_rank``
``fb_cos``            cosine to the mean vector of the default's best 3 rows
``prev1_cos`` ...     the normalized cosine and BM25 of its neighbour just before and after
``prev_is_question``  1 when the memory just before it ends asking a question
====================  ====================================================================

It applies only when at least half of those rows are transcript lines (:func:`transcript`):
the model was trained on conversations and is untested elsewhere. The rows keep the default's
scores, in the new order: the k-th hit gets the k-th best default
score, so scores still fall with rank and ``min_score`` keeps its meaning. Trained
leave-one-conversation-out on LoCoMo dev and BEAM 100K (bench/recall_train.py,
bench/recall_results.md has the numbers and the caveats).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..index.catalog import Catalog

__all__ = [
    "FEATURES",
    "Candidates",
    "Forest",
    "features",
    "forest",
    "gather",
    "reorder",
    "transcript",
]

FEATURES = (
    "rel_score",
    "s0",
    "vec_n",
    "key_n",
    "ctx",
    "prev1",
    "next1",
    "prev2",
    "next2",
    "author",
    "log_rank",
    "assistant",
    "log_len",
    "row_time",
    "is_question",
    "cos_rank",
    "bm_rank",
    "fb_cos",
    "prev1_cos",
    "next1_cos",
    "prev1_bm",
    "next1_bm",
    "prev_is_question",
)

TIME_WORDS = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|last|next|week|weekend|weeks|month|months|year|"
    r"years|monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|"
    r"april|may|june|july|august|september|october|november|december|morning|evening|night|"
    r"recently|since|earlier|later|\d{4}|\d{1,2}(?:st|nd|rd|th)?)\b",
    re.I,
)
_LABEL = re.compile(r"^[^:\n]{1,40}:\s")
HEAD_CHARS = 2048  # text tests read a memory's opening (after its label) ...
TAIL_CHARS = 400  # ... and "asks a question" of the memory before reads its end


@dataclass(frozen=True, slots=True)
class Candidates:
    """The default ranking's top rows, best first, and what the features read.

    ``nb_*`` have one column per neighbour offset (-2, -1, +1, +2), 0 where there is none;
    ``flags`` and ``prev_flags`` are :func:`text_flags` of the rows' contents and of those of
    the memories just before them (0 for none).
    """

    score: np.ndarray  # default score
    s0: np.ndarray
    vec_n: np.ndarray
    key_n: np.ndarray
    nb_s0: np.ndarray  # (n, 4)
    nb_vec: np.ndarray  # (n, 4)
    nb_key: np.ndarray  # (n, 4)
    author: np.ndarray
    cos_rank: np.ndarray  # 0-based rank by cosine among every scored row
    bm_rank: np.ndarray
    fb_cos: np.ndarray
    assistant: np.ndarray
    doclen: np.ndarray
    flags: np.ndarray  # int
    prev_flags: np.ndarray  # int


TIME, ASKS, ENDS_ASKING = 1, 2, 4


def text_flags(text: str) -> int:
    """What the features test of a memory's text, as bits: ``TIME``, its opening (after the
    speaker label) has a time expression; ``ASKS``, that opening has a "?"; ``ENDS_ASKING``,
    its end has one."""
    head = text[: HEAD_CHARS + 42]  # a label is at most 42 characters with its ": "
    m = _LABEL.match(head)
    head = head[m.end() if m else 0 :][:HEAD_CHARS]
    flags = TIME if TIME_WORDS.search(head) else 0
    flags |= ASKS if "?" in head else 0
    return flags | (ENDS_ASKING if "?" in text[-TAIL_CHARS:] else 0)


def _flags(rec: Any) -> int:
    """:func:`text_flags` of a record's content, kept on the record (its text never changes)."""
    flags: int = rec.text_flags
    if flags < 0:
        flags = rec.text_flags = text_flags(rec.content)
    return flags


def transcript(labels: np.ndarray) -> bool:
    """Whether the candidates are a transcript, which is what the model was trained on: at
    least half of them have a speaker label ("Name: text"). Other memories (notes, facts,
    records) keep the default order: on them the model is untested, and a short list of notes
    was seen re-ordered for the worse."""
    return bool(labels.shape[0]) and 2 * int(np.count_nonzero(labels >= 0)) >= labels.shape[0]


def features(c: Candidates) -> np.ndarray:
    """The (rows x len(FEATURES)) matrix, columns in :data:`FEATURES` order."""
    n = c.score.shape[0]
    top = float(c.score[0]) if n and c.score[0] > 0 else 1.0
    row_time = (c.flags & TIME) > 0
    asks = (c.flags & ASKS) > 0
    prev_asks = (c.prev_flags & ENDS_ASKING) > 0
    cols = [
        c.score / top,
        c.s0,
        c.vec_n,
        c.key_n,
        c.nb_s0.max(axis=1, initial=0.0),
        c.nb_s0[:, 1],
        c.nb_s0[:, 2],
        c.nb_s0[:, 0],
        c.nb_s0[:, 3],
        c.author,
        np.log1p(np.arange(n, dtype=np.float64)),
        c.assistant,
        np.log1p(c.doclen),
        row_time,
        asks,
        np.log1p(c.cos_rank),
        np.log1p(c.bm_rank),
        c.fb_cos,
        c.nb_vec[:, 1],
        c.nb_vec[:, 2],
        c.nb_key[:, 1],
        c.nb_key[:, 2],
        prev_asks,
    ]
    return np.column_stack([np.asarray(x, np.float64).reshape(n) for x in cols])


@dataclass(frozen=True, slots=True)
class Forest:
    """Decision trees as padded node tables (trees x nodes): a node < 0 is the leaf ``~node``;
    a row goes left when ``x[feature] <= threshold``."""

    feature: np.ndarray  # int
    threshold: np.ndarray
    left: np.ndarray  # int
    right: np.ndarray  # int
    leaf: np.ndarray  # (trees x leaves)
    depth: int  # the deepest path
    rows: int  # how many of the default's top rows it re-orders

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The ensemble's score of each row of ``x`` (the sum over trees)."""
        n, t = x.shape[0], self.feature.shape[0]
        width, leaves = self.feature.shape[1], self.leaf.shape[1]
        flat = np.ascontiguousarray(x, np.float64).ravel()
        base = np.arange(t) * width  # each tree's first node in the flat tables
        start = (np.arange(n) * x.shape[1])[:, None]  # each row's first feature
        node = np.zeros((n, t), np.int64)
        for _ in range(self.depth):
            at = base + np.maximum(node, 0)
            left = flat.take(start + self.feature.take(at)) <= self.threshold.take(at)
            node = np.where(
                node >= 0, np.where(left, self.left.take(at), self.right.take(at)), node
            )
        return self.leaf.take(np.arange(t) * leaves + ~node).sum(axis=1)

    @classmethod
    def from_table(
        cls, trees: Sequence[tuple[list, list, list, list, list]], depth: int, rows: int
    ) -> Forest:
        """From :mod:`.ranker_model`'s table: per tree (features, thresholds, left, right, leaf
        values)."""
        width = max([len(t[0]) for t in trees] + [1])
        leaves = max([len(t[4]) for t in trees] + [1])
        shape = (len(trees), width)
        feature, left, right = (np.zeros(shape, np.int64) for _ in range(3))
        threshold = np.zeros(shape)
        leaf = np.zeros((len(trees), leaves))
        for i, (f, thr, lo, hi, val) in enumerate(trees):
            k = len(f)
            feature[i, :k], threshold[i, :k], left[i, :k], right[i, :k] = f, thr, lo, hi
            leaf[i, : len(val)] = val
            if not k:  # a single leaf: the root leads to leaf 0 either way
                left[i, 0] = right[i, 0] = -1
        return cls(feature, threshold, left, right, leaf, depth, rows)


@lru_cache(maxsize=1)
def forest() -> Forest:
    """The shipped model (:mod:`.ranker_model`)."""
    from . import ranker_model as m

    if tuple(m.FEATURES) != FEATURES:
        raise RuntimeError("query/ranker_model.py was trained on other features")
    return Forest.from_table(m.TREES, m.DEPTH, m.ROWS)


def reorder(c: Candidates, model: Forest | None = None) -> np.ndarray:
    """The permutation of the candidates (best first) the model ranks them in; ties keep the
    default order."""
    model = model or forest()
    pred = model.predict(features(c))
    return np.lexsort((np.arange(pred.shape[0]), -pred))


def gather(
    cat: Catalog,
    top: np.ndarray,
    score: np.ndarray,
    near: np.ndarray,
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    nb: np.ndarray,
    author: np.ndarray,
) -> Candidates:
    """The :class:`Candidates` of the executor's best rows ``top`` (in default order, with
    their default ``score``): ``near`` are every row it scored (ascending) and ``arrays`` their
    (s0, normalized cosine, normalized BM25, cosine, BM25); ``nb`` the rows' timeline neighbours
    at offsets -2, -1, +1, +2 (-1: none); ``author`` the author term's 0/1 per row."""
    s0, vec_n, key_n, cos, bm = arrays
    at = np.searchsorted(near, top)
    has = nb >= 0
    nb_at = np.searchsorted(near, np.maximum(nb, 0))

    def of_nb(x: np.ndarray) -> np.ndarray:
        return np.where(has, x[np.minimum(nb_at, x.shape[0] - 1)], 0.0)

    def rank(x: np.ndarray) -> np.ndarray:
        pos = np.empty(x.shape[0])
        pos[np.lexsort((near, -x))] = np.arange(x.shape[0])
        return pos[at]

    units = np.zeros((top.shape[0], 0))
    fb_cos = np.zeros(top.shape[0])
    if cat.vectors is not None and top.shape[0]:
        units = cat.vectors[top].astype(np.float64) * cat.inv_norm[top][:, None]
        centre = units[:3].mean(axis=0)
        norm = float(np.linalg.norm(centre))
        if norm > 0:
            fb_cos = units @ (centre / norm)
    recs = cat.recs
    names = cat.labels.names
    doclen = cat.keywords.doclen
    rows = top.tolist()
    prev = nb[:, 1].tolist()
    return Candidates(
        score=score,
        s0=s0[at],
        vec_n=vec_n[at],
        key_n=key_n[at],
        nb_s0=of_nb(s0),
        nb_vec=of_nb(vec_n),
        nb_key=of_nb(key_n),
        author=author,
        cos_rank=rank(cos),
        bm_rank=rank(bm),
        fb_cos=fb_cos,
        assistant=np.array(
            [lab >= 0 and names[lab].lower() == "assistant" for lab in cat.label[top].tolist()],
            np.float64,
        ),
        doclen=np.array([doclen[r] if r < len(doclen) else 0 for r in rows], np.float64),
        flags=np.array([_flags(recs[r]) for r in rows], np.int64),
        prev_flags=np.array([_flags(recs[p]) if p >= 0 else 0 for p in prev], np.int64),
    )
