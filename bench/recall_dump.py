"""Dump the re-ranking features of every dev question to one .npz (recall study): X, y (1 for an
evidence row), the question (group) and conversation of each candidate row.

Usage: nice -n 10 python bench/recall_dump.py [--depth 50] [--out /tmp/recall-cache/feat.npz]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recall_eval as ev
import recall_features as rf
from recall_data import CACHE, Vectors, load_beam, load_locomo

from synapsedb.query import rerank


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=50)
    ap.add_argument("--out", type=Path, default=CACHE / "feat.npz")
    ap.add_argument(
        "--set",
        choices=("engine", "wide"),
        default="engine",
        help="query/rerank.py's features, or the wider set studied first",
    )
    ap.add_argument("--datasets", default="locomo,beam")
    args = ap.parse_args()
    convs = (load_locomo() if "locomo" in args.datasets else []) + (
        load_beam() if "beam" in args.datasets else []
    )
    preps = ev.prepare(convs, Vectors())
    xs, ys, groups, convs, rows, datasets = [], [], [], [], [], []
    g = 0
    for ci, p in enumerate(preps):
        for s in p.scored:
            if args.set == "engine":
                order, cands = rf.candidates(p.ix, s, args.depth)
                x = rerank.features(cands)
            else:
                order, x = rf.features(p.ix, s, args.depth)
            evid = p.conv.questions[s.q].evidence
            xs.append(x)
            ys.append(np.isin(order, list(evid)).astype(np.int8))
            groups.append(np.full(order.shape[0], g))
            convs.append(np.full(order.shape[0], ci))
            rows.append(order)
            g += 1
        datasets.append(p.conv.dataset)
    np.savez(
        args.out,
        X=np.concatenate(xs),
        y=np.concatenate(ys),
        group=np.concatenate(groups),
        conv=np.concatenate(convs),
        row=np.concatenate(rows),
        names=np.array(rerank.FEATURES if args.set == "engine" else rf.NAMES),
        datasets=np.array(datasets),
    )
    print(f"{g} questions, {sum(x.shape[0] for x in xs)} candidate rows -> {args.out}")


if __name__ == "__main__":
    main()
