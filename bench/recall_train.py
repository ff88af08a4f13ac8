"""Train re-rankers on the dumped features (bench/recall_dump.py) leave-one-conversation-out:
for each conversation, a model fit on all the others scores its candidates. Writes the held-out
scores per candidate row to an .npz that recall_study.py evaluates.

Needs numpy, lightgbm and scikit-learn: run it in a bench venv, never needed to query.

Usage: python bench/recall_train.py --model lgbm|logistic [--features a,b,c] [--out FILE]
       [--by-dataset]  (also: train on one dataset only, score the other)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

CACHE = Path("/tmp/recall-cache")


def fit(kind: str, X: np.ndarray, y: np.ndarray, group: np.ndarray, params: dict) -> object:
    if kind == "logistic":
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        m = make_pipeline(StandardScaler(), LogisticRegression(C=params.get("C", 1.0),
                                                                max_iter=2000))  # fmt: skip
        m.fit(X, y)
        return m
    import lightgbm as lgb

    _, counts = np.unique(group, return_counts=True)  # groups are contiguous and ascending
    objective = params.get("objective", "lambdarank")
    m = lgb.LGBMRanker if objective == "lambdarank" else lgb.LGBMClassifier
    model = m(
        objective=objective if objective == "lambdarank" else "binary",
        n_estimators=params.get("trees", 200), learning_rate=params.get("lr", 0.05),
        num_leaves=params.get("leaves", 7), min_child_samples=params.get("min_child", 50),
        subsample=1.0, colsample_bytree=1.0, reg_lambda=params.get("l2", 1.0),
        deterministic=True, force_row_wise=True, n_jobs=1, verbose=-1, random_state=0,
    )  # fmt: skip
    if objective == "lambdarank":
        model.fit(X, y, group=counts)
    else:
        model.fit(X, y)
    return model


def predict(kind: str, model: object, X: np.ndarray) -> np.ndarray:
    if kind == "logistic" or getattr(model, "objective", "") == "binary":
        return model.predict_proba(X)[:, 1]  # type: ignore[attr-defined]
    return model.predict(X)  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=CACHE / "feat.npz")
    ap.add_argument("--model", default="lgbm")
    ap.add_argument("--features", default="")
    ap.add_argument("--drop", default="")
    ap.add_argument("--params", default="")  # k=v,k=v
    ap.add_argument("--by-dataset", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    d = np.load(args.data)
    names = list(d["names"])
    keep = [i for i, n in enumerate(names)
            if (not args.features or n in args.features.split(","))
            and n not in args.drop.split(",")]  # fmt: skip
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
        te = conv == c
        pred[te] = predict(args.model, m, X[te])
    out = args.out or CACHE / f"pred-{args.model}.npz"
    np.savez(out, pred=pred, group=group, row=d["row"], conv=conv)
    print(f"features {[names[i] for i in keep]} -> {out}")
    if args.model == "lgbm" and not args.by_dataset:
        m = fit(args.model, X, y, group, params)
        imp = m.booster_.feature_importance("gain")  # type: ignore[attr-defined]
        for i in np.argsort(-imp):
            print(f"  {names[keep[i]]}: {imp[i] / imp.sum():.3f}")


if __name__ == "__main__":
    main()
