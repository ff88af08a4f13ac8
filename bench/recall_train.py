"""Train re-rankers on the dumped features (bench/recall_dump.py) leave-one-conversation-out:
for each conversation, a model fit on all the others scores its candidates. Writes the held-out
scores per candidate row to an .npz that recall_study.py evaluates.

Needs numpy, lightgbm and scikit-learn: run it in a bench venv, never needed to query.

Usage: python bench/recall_train.py --model lgbm|logistic [--features a,b,c] [--out FILE]
       [--by-dataset]  (also: train on one dataset only, score the other)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

CACHE = Path("/tmp/recall-cache")


def fit(kind: str, X: np.ndarray, y: np.ndarray, group: np.ndarray, params: dict) -> object:
    if kind == "logistic":
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        m = make_pipeline(
            StandardScaler(), LogisticRegression(C=params.get("C", 1.0), max_iter=2000)
        )
        m.fit(X, y)
        return m
    import lightgbm as lgb

    _, counts = np.unique(group, return_counts=True)  # groups are contiguous and ascending
    objective = params.get("objective", "lambdarank")
    m = lgb.LGBMRanker if objective == "lambdarank" else lgb.LGBMClassifier
    model = m(
        objective=objective if objective == "lambdarank" else "binary",
        n_estimators=params.get("trees", 200),
        learning_rate=params.get("lr", 0.05),
        num_leaves=params.get("leaves", 7),
        min_child_samples=params.get("min_child", 50),
        subsample=1.0,
        colsample_bytree=1.0,
        reg_lambda=params.get("l2", 1.0),
        deterministic=True,
        force_row_wise=True,
        n_jobs=1,
        verbose=-1,
        random_state=0,
    )
    if objective == "lambdarank":
        model.fit(X, y, group=counts)
    else:
        model.fit(X, y)
    return model


def predict(kind: str, model: object, X: np.ndarray) -> np.ndarray:
    if kind == "logistic" or getattr(model, "objective", "") == "binary":
        return model.predict_proba(X)[:, 1]  # type: ignore[attr-defined]
    return model.predict(X)  # type: ignore[attr-defined]


def tree_table(node: dict) -> tuple[list[int], list[float], list[int], list[int], list[float]]:
    """One LightGBM tree (dump_model's tree_structure) as query/rerank.py's node table: inner
    nodes numbered by split_index (the root is 0), a leaf as ~leaf_index."""
    inner: dict[int, tuple[int, float, int, int]] = {}
    leaves: dict[int, float] = {}

    def ref(n: dict) -> int:
        if "leaf_index" in n or "split_index" not in n:
            i = int(n.get("leaf_index", 0))
            leaves[i] = float(n["leaf_value"])
            return ~i
        assert n["decision_type"] == "<=", n["decision_type"]
        inner[int(n["split_index"])] = (
            int(n["split_feature"]),
            float(n["threshold"]),
            ref(n["left_child"]),
            ref(n["right_child"]),
        )
        return int(n["split_index"])

    ref(node)
    k = len(inner)
    assert sorted(inner) == list(range(k)) and sorted(leaves) == list(range(len(leaves)))
    f, thr, lo, hi = (
        (list(x) for x in zip(*(inner[i] for i in range(k)), strict=True))
        if k
        else ([], [], [], [])
    )
    return f, thr, lo, hi, [leaves[i] for i in range(len(leaves))]


def export(model: object, names: list[str], rows: int, path: Path, command: str) -> None:
    """Write the model as a Python table (query/ranker_model.py)."""
    dump = model.booster_.dump_model()  # type: ignore[attr-defined]
    trees = [tree_table(t["tree_structure"]) for t in dump["tree_info"]]
    depth = 0

    def deep(n: dict, d: int) -> int:
        if "split_index" not in n:
            return d
        return max(deep(n["left_child"], d + 1), deep(n["right_child"], d + 1))

    depth = max(deep(t["tree_structure"], 0) for t in dump["tree_info"])
    lines = [
        '"""The learned re-ranker\'s trees (query/rerank.py), written by bench/recall_train.py:',
        "",
        f"    {command}",
        "",
        "Each tree: (features, thresholds, left, right, leaf values); a node < 0 is the leaf",
        '``~node``; a row goes left when ``x[feature] <= threshold``. Do not edit by hand."""',
        "",
        "# fmt: off",
        f"FEATURES = {tuple(names)!r}",
        f"ROWS = {rows}  # the default's top rows it re-orders",
        f"DEPTH = {depth}",
        "TREES: list[tuple[list[int], list[float], list[int], list[int], list[float]]] = [",
    ]
    for f, thr, lo, hi, val in trees:
        lines.append(f"    ({f}, {[float(f'{x:.9g}') for x in thr]}, {lo}, {hi},")
        lines.append(f"     {[float(f'{x:.9g}') for x in val]}),")
    lines += ["]", "# fmt: on", ""]
    path.write_text("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=CACHE / "feat.npz")
    ap.add_argument("--model", default="lgbm")
    ap.add_argument("--features", default="")
    ap.add_argument("--drop", default="")
    ap.add_argument("--params", default="")  # k=v,k=v
    ap.add_argument("--by-dataset", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--export-folds",
        type=Path,
        default=None,
        help="write each fold's model table (fold-<conversation>.py) here",
    )
    ap.add_argument(
        "--export",
        type=Path,
        default=None,
        help="also fit on every conversation and write the model table here",
    )
    args = ap.parse_args()
    d = np.load(args.data)
    names = list(d["names"])
    keep = [
        i
        for i, n in enumerate(names)
        if (not args.features or n in args.features.split(",")) and n not in args.drop.split(",")
    ]
    X, y, group, conv = d["X"][:, keep], d["y"], d["group"], d["conv"]
    datasets = d["datasets"]
    params: dict = {}
    for kv in filter(None, args.params.split(",")):
        k, v = kv.split("=")
        params[k] = v if k == "objective" else float(v) if "." in v else int(v)
    pred = np.zeros(y.shape[0])
    for c in np.unique(conv):
        tr = conv != c
        if args.by_dataset:  # the model never saw this conversation's dataset
            tr &= datasets[conv] != datasets[c]
        m = fit(args.model, X[tr], y[tr], group[tr], params)
        if args.export_folds is not None:  # the engine's own LOCO run reads these
            args.export_folds.mkdir(parents=True, exist_ok=True)
            export(
                m,
                [str(names[i]) for i in keep],
                int(np.bincount(group).max()),
                args.export_folds / f"fold-{int(c)}.py",
                f"fold {int(c)} held out",
            )
        te = conv == c
        pred[te] = predict(args.model, m, X[te])
    out = args.out or CACHE / f"pred-{args.model}.npz"
    np.savez(out, pred=pred, group=group, row=d["row"], conv=conv)
    print(f"features {[names[i] for i in keep]} -> {out}")
    if args.export is not None:
        final = fit(args.model, X, y, group, params)
        rows = int(np.bincount(group).max())
        command = "python bench/recall_train.py " + " ".join(
            Path(a).name if a.startswith("/") else a for a in sys.argv[1:]
        )
        export(final, [str(names[i]) for i in keep], rows, args.export, command)
        # query/rerank.py on its own (the package needs its run-time dependencies, this venv
        # has only the training ones): the shipped evaluation against LightGBM's
        import importlib.util

        src = Path(__file__).resolve().parents[1] / "src" / "synapsedb" / "query"
        spec = importlib.util.spec_from_file_location("rerank", src / "rerank.py")
        assert spec is not None and spec.loader is not None
        rr = importlib.util.module_from_spec(spec)
        sys.modules["rerank"] = rr
        spec.loader.exec_module(rr)
        table: dict = {}
        exec(compile(args.export.read_text(), str(args.export), "exec"), table)
        assert tuple(table["FEATURES"]) == tuple(rr.FEATURES), "features differ from rerank.py"
        got = rr.Forest.from_table(table["TREES"], table["DEPTH"], table["ROWS"]).predict(X)
        want = final.predict(X, raw_score=True)  # type: ignore[attr-defined]
        err = float(np.abs(got - want).max())
        print(
            f"exported {len(table['TREES'])} trees to {args.export}; max |numpy - lightgbm| "
            f"{err:.2e} over {X.shape[0]} rows"
        )
        assert err < 1e-6, err
    if args.model == "lgbm" and not args.by_dataset:
        m = fit(args.model, X, y, group, params)
        imp = m.booster_.feature_importance("gain")  # type: ignore[attr-defined]
        for i in np.argsort(-imp):
            print(f"  {names[keep[i]]}: {imp[i] / imp.sum():.3f}")


if __name__ == "__main__":
    main()
