"""Per-candidate features for a learned re-ranking of the default hybrid query (recall study).

Candidates are the default ranking's top ``depth`` rows. Every feature is computed from what the
default ranking already has (cosine, BM25 before and after feedback, the fused base of every
row and its timeline neighbours, speaker labels, sessions) plus a few cheap text tests on the
candidate and the question. No model runs.
"""

from __future__ import annotations

import re

import numpy as np
import recall_lab as lab
from recall_data import body

from synapsedb.query.rerank import Candidates, text_flags

TIME_WORDS = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|last|next|week|weekend|weeks|month|months|year|"
    r"years|monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|"
    r"april|may|june|july|august|september|october|november|december|morning|evening|night|"
    r"recently|since|earlier|later|\d{4}|\d{1,2}(?:st|nd|rd|th)?)\b",
    re.I,
)
WHEN_Q = re.compile(
    r"^\s*when\b|\bhow long\b|\bwhat (?:year|month|date|day|time)\b|\bhow many "
    r"(?:years|months|weeks|days)\b",
    re.I,
)
CAPS = re.compile(r"(?<!^)(?<![.?!]\s)\b([A-Z][a-zA-Z]+)")

NAMES = (
    "rel_score",
    "s0",
    "vec_n",
    "key_n",
    "key_n0",
    "ctx",
    "prev1",
    "next1",
    "prev2",
    "next2",
    "author",
    "named",
    "log_rank",
    "sess_rank",
    "sess_rel",
    "sess_top20",
    "assistant",
    "log_len",
    "ent_overlap",
    "q_when",
    "row_time",
    "cos_raw",
    "is_question",
    "n_terms",
    "sess_pos",
    "cos_rank",
    "bm_rank",
    "fb_cos",
    "prev1_cos",
    "next1_cos",
    "prev1_bm",
    "next1_bm",
    "prev_is_question",
)


def session_ranks(sess: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: its session's rank by the session's best row score (0 = best) and that best."""
    ids, inv = np.unique(sess, return_inverse=True)
    best = np.full(ids.shape[0], -np.inf)
    np.maximum.at(best, inv, score)
    order = np.argsort(-best, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    return rank[inv], best[inv]


def list_rank(x: np.ndarray) -> np.ndarray:
    """Each row's 0-based rank by ``x``, best first."""
    out = np.empty(x.shape[0])
    out[lab.ranked(x)] = np.arange(x.shape[0])
    return out


def features(ix: lab.Index, s: lab.Scored, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The default's top ``depth`` rows and their features (rows x len(NAMES))."""
    order = lab.ranked(s.score)[:depth]
    n = ix.n
    top = float(s.score[order[0]]) or 1.0
    cmax = float(s.cos.max()) or 1.0
    bmax = float(s.bm_fb.max()) or 1.0
    bmax0 = float(s.bm.max()) or 1.0

    def at(d: int, x: np.ndarray | None = None) -> np.ndarray:
        j = order + d
        ok = (j >= 0) & (j < n)
        return np.where(ok, (s.s0 if x is None else x)[np.clip(j, 0, n - 1)], 0.0)

    sess = ix.conv.session
    srank, sbest = session_ranks(sess, s.score)
    top20 = lab.ranked(s.score)[:20]
    count20 = np.array([np.count_nonzero(sess[top20] == sess[r]) for r in order])
    text = ix.conv.questions[s.q].text
    caps = {w.lower() for w in CAPS.findall(text)} - set(ix.label_words)
    ent = np.zeros(order.shape[0])
    if caps:
        for i, r in enumerate(order.tolist()):
            words = set(lab._WORD.findall(ix.conv.texts[r][:4096].lower()))
            ent[i] = len(caps & words) / len(caps)
    row_time = np.array(
        [bool(TIME_WORDS.search(body(ix.conv.texts[r])[:2048])) for r in order.tolist()], np.float64
    )
    assistant = np.array(
        [ix.conv.speaker[r].lower() == "assistant" for r in order.tolist()], np.float64
    )
    is_q = np.array(["?" in ix.conv.texts[r][:2048] for r in order.tolist()], np.float64)
    # position of the row within its session, 0 (first) to 1 (last)
    first = np.searchsorted(sess, sess[order], side="left")
    last = np.searchsorted(sess, sess[order], side="right") - 1
    pos = (order - first) / np.maximum(last - first, 1)
    best3 = [g[0] for g in lab.dedup_top(ix, lab.ranked(s.score), 3)]
    centre = ix.vecs[best3].mean(axis=0)
    fb_cos = ix.vecs[order] @ (centre / (float(np.linalg.norm(centre)) or 1.0))
    asks = np.array(["?" in t[-400:] for t in ix.conv.texts], np.float64)
    cos_n, bm_n = np.maximum(s.cos, 0) / cmax, s.bm_fb / bmax
    cols = [
        s.score[order] / top,
        s.s0[order],
        np.maximum(s.cos[order], 0) / cmax,
        s.bm_fb[order] / bmax,
        s.bm[order] / bmax0,
        lab.neighbour_max(s.s0)[order],
        at(-1),
        at(1),
        at(-2),
        at(2),
        s.author[order],
        np.full(order.shape[0], float(s.named)),
        np.log1p(np.arange(order.shape[0])),
        srank[order].astype(np.float64),
        sbest[order] / top,
        count20.astype(np.float64),
        assistant,
        np.log1p(ix.doclen[order]),
        ent,
        np.full(order.shape[0], float(bool(WHEN_Q.search(text)))),
        row_time,
        s.cos_raw[order],
        is_q,
        np.full(order.shape[0], float(len(lab.analyze(text)))),
        pos,
        np.log1p(list_rank(s.cos)[order]),
        np.log1p(list_rank(s.bm_fb)[order]),
        fb_cos,
        at(-1, cos_n),
        at(1, cos_n),
        at(-1, bm_n),
        at(1, bm_n),
        at(-1, asks),
    ]
    return order, np.column_stack(cols)


def candidates(ix: lab.Index, s: lab.Scored, depth: int) -> tuple[np.ndarray, Candidates]:
    """The default's top ``depth`` rows as the engine hands them to query/rerank.py (every row
    of the conversation is allowed and scored here; in the engine, the ranks by cosine and BM25
    are among the rows it scored: the candidates and their neighbours)."""
    order = lab.ranked(s.score)
    top = order[:depth]
    n = ix.n
    cmax = float(s.cos.max()) or 1.0
    bmax = float(s.bm_fb.max()) or 1.0
    vec_n, key_n = np.maximum(s.cos, 0) / cmax, s.bm_fb / bmax

    def nb(x: np.ndarray) -> np.ndarray:
        cols = []
        for d in (-2, -1, 1, 2):
            j = top + d
            ok = (j >= 0) & (j < n)
            cols.append(np.where(ok, x[np.clip(j, 0, n - 1)], 0.0))
        return np.column_stack(cols)

    centre = ix.vecs[order[:3]].mean(axis=0)
    fb_cos = ix.vecs[top] @ (centre / (float(np.linalg.norm(centre)) or 1.0))
    flags = ix.extra.get("flags")
    if flags is None:  # query/rerank.py's text tests of every memory, once
        flags = ix.extra["flags"] = np.array([text_flags(t) for t in ix.conv.texts], np.int64)
    prev = np.where(top > 0, flags[np.maximum(top - 1, 0)], 0)
    assistant = np.array(
        [ix.conv.speaker[r].lower() == "assistant" for r in top.tolist()], np.float64
    )
    return top, Candidates(
        s.score[top],
        s.s0[top],
        vec_n[top],
        key_n[top],
        nb(s.s0),
        nb(vec_n),
        nb(key_n),
        s.author[top],
        list_rank(s.cos)[top],
        list_rank(s.bm_fb)[top],
        fb_cos.astype(np.float64),
        assistant,
        ix.doclen[top],
        flags[top],
        prev,
    )
