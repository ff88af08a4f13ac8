"""Can a static (lookup-table) query encoder distilled from MiniLM replace MiniLM for queries?

Documents keep their all-MiniLM-L6-v2 vectors; only the query is encoded by a table lookup in
MiniLM's own 384-d output space, so it is compared with the stored document vectors as is.

Steps (each cached under ``--out``, default /tmp/static-query):

1. token table: every word-piece id of the vocabulary is run through the exported float32 MiniLM
   graph alone, three ways: ``cls`` = mean pool of ``[CLS] t [SEP]`` (what the model does to a
   one-token text), ``ctx`` = the hidden state of ``t`` inside ``[CLS] t [SEP]``, ``bare`` = the
   hidden state of ``t`` run alone (sequence length 1). No PCA: the vectors stay in MiniLM's space.
2. token weights, from text that is NOT the evaluation data: ``uniform``; ``idf`` over sentences
   of Python's own documentation (pydoc topics and stdlib docstrings); ``sif-3``/``sif-4``
   = a/(a + p(t)) with a = 1e-3/1e-4 and p(t) the word-piece frequency derived from the
   ``wordfreq`` package's English word list (installed with ``pip install --target`` into
   ``--pylib``; never into the project's venv).
3. optional affine map W (385 x 384) fitted by ridge least squares from static vectors to true
   MiniLM vectors of training sentences that are neither LoCoMo nor BEAM (the stdlib sentences
   above plus bench_retrieval.py's generated ones).
4. evaluation on LoCoMo dev (read in place): per-query latency, cosine to the true MiniLM vector,
   dense-only R@10, and the engine's default hybrid R@10 with documents embedded by MiniLM and
   queries by the static encoder. The hybrid run gives the database an embedder that embeds
   writes with MiniLM and, once the questions start, the query texts with the encoder under
   test, so the engine embeds exactly the text it always does (the question minus the speaker
   names it strips for the dense side). The query-vector cache is off so variants never share
   vectors (the cache keeps one text of one namespace; each variant starts
   in the first namespace after ending in the last). A variant is chosen by leave-one-conversation-out over the 5 conversations.

Usage::

    python bench/bench_static_query.py            # everything, markdown on stdout
    python bench/bench_static_query.py --quick    # every 4th question
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import hashlib
import re
import shutil
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo
from bench_quality import turn_items
from common import git_rev, machine
from threadpoolctl import threadpool_limits

import synapsedb
from synapsedb.embed import OnnxMiniLM

OUT = Path("/tmp/static-query")
CLS, SEP = 101, 102
TABLES = ("cls", "ctx", "bare")  # built; "cls-c" = cls minus its mean row is derived
EVAL_TABLES = ("cls", "cls-c", "ctx", "bare")
WEIGHTS = ("uniform", "idf", "sif-3", "sif-4")

# ---------------------------------------------------------------------------------------------
# 1. token table


def tokenizer(model: OnnxMiniLM) -> Any:
    """MiniLM's own tokenizer file, set up as OnnxMiniLM does (no padding, truncation 256)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model.tokenizer_path))
    tok.no_padding()
    tok.enable_truncation(model.max_seq_length)
    return tok


def build_tables(model: OnnxMiniLM, out: Path, batch: int = 512) -> dict[str, np.ndarray]:
    paths = {name: out / f"table-{name}.npy" for name in TABLES}
    if all(p.exists() for p in paths.values()):
        return {name: np.load(p) for name, p in paths.items()}
    import onnxruntime as ort

    sess = ort.InferenceSession(
        str(model.model_path),
        sess_options=model.session_options(2),
        providers=["CPUExecutionProvider"],
    )
    vocab = tokenizer(model).get_vocab_size()
    tabs = {name: np.zeros((vocab, model.dim), np.float32) for name in TABLES}
    t0 = time.perf_counter()
    for a in range(0, vocab, batch):
        ids = np.arange(a, min(a + batch, vocab), dtype=np.int64)
        three = np.stack([np.full_like(ids, CLS), ids, np.full_like(ids, SEP)], axis=1)
        (h3,) = sess.run(
            ["last_hidden_state"], {"input_ids": three, "attention_mask": np.ones_like(three)}
        )
        one = ids[:, None]
        (h1,) = sess.run(
            ["last_hidden_state"], {"input_ids": one, "attention_mask": np.ones_like(one)}
        )
        tabs["cls"][ids] = h3.mean(axis=1)
        tabs["ctx"][ids] = h3[:, 1]
        tabs["bare"][ids] = h1[:, 0]
        print(f"  table {a + len(ids):,}/{vocab:,}", end="\r", flush=True)
    print(f"\n  tables built in {time.perf_counter() - t0:.1f} s", flush=True)
    for name, p in paths.items():
        np.save(p, tabs[name])
    return tabs


# ---------------------------------------------------------------------------------------------
# 2. a non-evaluation corpus (Python's own documentation) and token weights

_SENT = re.compile(r"(?<=[.?!])\s+")
_PROSE = re.compile(r"^[A-Z][A-Za-z ,;:'()\-]+[.?!]$")


def stdlib_sentences(limit: int, seed: int = 0) -> list[str]:
    """English sentences from pydoc's topics and the stdlib's docstrings (prose only)."""
    texts: list[str] = []
    try:
        from pydoc_data.topics import topics

        texts.extend(topics.values())
    except ImportError:
        pass
    lib = Path(sysconfig.get_paths()["stdlib"])
    for py in sorted(lib.glob("*.py")) + sorted(lib.glob("*/*.py")):
        if "test" in py.parts[-2] or py.name.startswith("test"):
            continue
        try:
            tree = ast.parse(py.read_text(errors="ignore"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc:
                    texts.append(doc)
    seen: set[str] = set()
    out = []
    for t in texts:
        for s in _SENT.split(re.sub(r"\s+", " ", t)):
            s = s.strip()
            if 5 <= len(s.split()) <= 40 and _PROSE.match(s) and s not in seen:
                seen.add(s)
                out.append(s)
    rng = np.random.default_rng(seed)
    rng.shuffle(out)
    return out[:limit]


def training_sentences(n: int) -> tuple[list[str], list[str]]:
    """Up to 80% stdlib prose, the rest bench_retrieval.py's generated sentences."""
    import bench_retrieval

    doc = stdlib_sentences(int(n * 0.8))
    return doc, bench_retrieval.sentences(n - len(doc), seed=7)


def token_weights(model: OnnxMiniLM, corpus: Sequence[str], pylib: Path) -> dict[str, np.ndarray]:
    vocab = tokenizer(model).get_vocab_size()
    out: dict[str, np.ndarray] = {"uniform": np.ones(vocab, np.float32)}
    df = np.zeros(vocab)
    for ids in model.tokenize(list(corpus)):
        df[np.unique(ids)] += 1
    n = len(corpus)
    out["idf"] = np.log((n + 1) / (df + 1)).astype(np.float32) + 1.0
    if str(pylib) not in sys.path:
        sys.path.insert(0, str(pylib))
    import wordfreq

    words = wordfreq.top_n_list("en", 200_000)
    freqs = np.array([wordfreq.word_frequency(w, "en") for w in words])
    p = np.zeros(vocab)
    for ids, f in zip(model.tokenize(words), freqs, strict=True):
        for t in ids[1:-1]:
            p[t] += f
    p /= p.sum()
    for a, name in ((1e-3, "sif-3"), (1e-4, "sif-4")):
        out[name] = (a / (a + p)).astype(np.float32)
    return out


# ---------------------------------------------------------------------------------------------
# 3. the encoder and its map


class StaticEncoder:
    """Query vector = normalize(affine(weighted mean of the word-pieces' table rows))."""

    def __init__(
        self,
        model: OnnxMiniLM,
        table: np.ndarray,
        weights: np.ndarray,
        w_map: np.ndarray | None = None,
    ) -> None:
        self.tok = tokenizer(model)
        self.table = table
        self.weights = weights
        self.w_map = w_map
        self.name = model.name
        self.dim = model.dim

    def pooled(self, ids: Sequence[int]) -> np.ndarray:
        a = np.asarray(ids[1:-1] if len(ids) > 2 else ids, np.int64)
        w = self.weights[a]
        v = w @ self.table[a] / max(float(w.sum()), 1e-9)
        return v / max(float(np.linalg.norm(v)), 1e-12)

    def encode_one(self, text: str) -> np.ndarray:
        v = self.pooled(self.tok.encode(text).ids)
        if self.w_map is not None:
            v = v @ self.w_map[:-1] + self.w_map[-1]
            v = v / max(float(np.linalg.norm(v)), 1e-12)
        return v.astype(np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.encode_one(t) for t in texts]).reshape(len(texts), self.dim)


def fit_map(
    enc: StaticEncoder,
    texts: Sequence[str],
    target: np.ndarray,
    ridges: Sequence[float] = (1e-6, 1e-5, 1e-4, 1e-3),
) -> tuple[np.ndarray, float]:
    """Affine map (385 x 384) by ridge least squares; the ridge is the one whose fit on the
    even training rows gives the best mean cosine on the odd ones, then refitted on all rows."""
    x = np.stack([enc.pooled(ids) for ids in (enc.tok.encode(t).ids for t in texts)])
    x = np.hstack([x, np.ones((len(x), 1), np.float32)]).astype(np.float64)
    y = target.astype(np.float64)

    def solve(rows: np.ndarray, ridge: float) -> np.ndarray:
        a = x[rows]
        reg = ridge * len(a) * np.eye(a.shape[1])
        reg[-1, -1] = 0.0
        return np.linalg.solve(a.T @ a + reg, a.T @ y[rows])

    even = np.arange(len(x)) % 2 == 0

    def held_out_cos(ridge: float) -> float:
        p = x[~even] @ solve(even, ridge)
        return float(((p / np.linalg.norm(p, axis=1, keepdims=True)) * y[~even]).sum(1).mean())

    best = max(ridges, key=held_out_cos)
    return solve(np.ones(len(x), bool), best).astype(np.float32), best


def cached_minilm(model: OnnxMiniLM, texts: Sequence[str], out: Path, tag: str) -> np.ndarray:
    key = hashlib.sha1("\x1f".join(texts).encode()).hexdigest()[:16]
    path = out / f"minilm-{tag}-{key}.npy"
    if path.exists():
        return np.load(path)
    t0 = time.perf_counter()
    vecs = np.concatenate([model.embed(texts[i : i + 1024]) for i in range(0, len(texts), 1024)])
    print(f"  embedded {len(texts):,} {tag} texts with MiniLM in {time.perf_counter() - t0:.1f} s")
    np.save(path, vecs)
    return vecs


# ---------------------------------------------------------------------------------------------
# 4. evaluation


class SwitchEmbedder:
    """MiniLM for writes; ``query`` (when set) for every text embedded after that."""

    def __init__(self, model: OnnxMiniLM, known: dict[str, np.ndarray]) -> None:
        self.model = model
        self.known = known  # document text -> its MiniLM vector (computed once, cached)
        self.name = model.name
        self.dim = model.dim
        self.compatible_names = model.compatible_names
        self.query: Callable[[Sequence[str]], np.ndarray] | None = None
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.query is not None:
            self.seen.extend(texts)
            return self.query(texts)
        missing = [t for t in texts if t not in self.known]
        if missing:
            for t, v in zip(missing, self.model.embed(missing), strict=True):
                self.known[t] = v
        return np.stack([self.known[t] for t in texts]).reshape(len(texts), self.dim)


class Engine:
    """One embedded database, one namespace per conversation, documents embedded by MiniLM."""

    def __init__(self, root: Path, emb: SwitchEmbedder, convs: Sequence[locomo.Conversation]):
        self.emb = emb
        self.db = synapsedb.open(
            root / "locomo", durability="os", embedder=emb, llm=None, query_cache_size=1
        )
        self.ids: dict[str, dict[str, str]] = {}
        for conv in convs:
            written = self.db.namespace(f"locomo-{conv.name}").write_many(turn_items(conv))
            self.ids[conv.name] = {m.id: t.dia_id for m, t in zip(written, conv.turns, strict=True)}

    def retriever(
        self, given: Callable[[str], np.ndarray] | None = None, mode: str = "hybrid"
    ) -> Any:
        def retrieve(conv: locomo.Conversation, question: str, k: int) -> list[str]:
            ns = self.db.namespace(f"locomo-{conv.name}")
            if given is None:
                res = ns.query(question, k=k, mode=mode)
            else:
                res = ns.query(question, embedding=given(question).tolist(), k=k)
            ids = self.ids[conv.name]
            out = []
            for h in res:
                out.append(ids[h.id])
                out.extend(ids[d] for d in h.duplicates)
            return out

        return retrieve


def dense_retriever(vec: Callable[[str], np.ndarray], strip: bool = False) -> Any:
    def retrieve(conv: locomo.Conversation, question: str, k: int) -> list[int]:
        s = locomo.doc_vectors(conv) @ vec(stripped(conv, question) if strip else question)
        order = np.argsort(-s, kind="stable")[:k]
        return [int(i) for i in order]

    return retrieve


def stripped(conv: locomo.Conversation, question: str) -> str:
    """The question without the speaker names it mentions: what hybrid mode embeds (the
    engine's rule, as bench/locomo.py reproduces it)."""
    _, by_word = locomo.author_labels(conv)
    return locomo.strip_words(question, [w for w in locomo.words(question) if w in by_word])


def latency(fn: Callable[[str], Any], texts: Sequence[str]) -> tuple[float, float]:
    for t in texts[:20]:
        fn(t)
    ts = []
    for t in texts:
        t0 = time.perf_counter()
        fn(t)
        ts.append(time.perf_counter() - t0)
    return float(np.percentile(ts, 50) * 1e3), float(np.percentile(ts, 99) * 1e3)


def loo(
    results: dict[str, locomo.Result], names: Sequence[str], convs: Sequence[str]
) -> tuple[locomo.Result, list[str]]:
    """Per held-out conversation, the variant best (R@10) on the other four; its questions."""
    out = locomo.Result()
    chosen = []
    for held in convs:

        def train(n: str, held: str = held) -> float:
            r = results[n]
            return r.mean("r@10", np.asarray(r.conv) != held)

        best = max(names, key=train)
        chosen.append(f"{held}: {best}")
        r = results[best]
        for i, c in enumerate(r.conv):
            if c == held:
                out.add(c, r.category[i], {k: v[i] for k, v in r.values.items()})
    return out, chosen


def cat_cells(r: locomo.Result) -> str:
    cats = np.asarray(r.category)
    return " | ".join(f"{r.mean('r@10', cats == c):.3f}" for c in locomo.CATEGORIES)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA, help="LoCoMo dev folder")
    ap.add_argument("--out", type=Path, default=OUT, help="scratch folder (tables, caches)")
    ap.add_argument(
        "--pylib",
        type=Path,
        default=OUT / "pylib",
        help="folder where wordfreq is installed (pip install --target)",
    )
    ap.add_argument("--train", type=int, default=12_000, help="training sentences for W")
    ap.add_argument("--quick", action="store_true", help="every 4th question")
    ap.add_argument("--tables", default=",".join(EVAL_TABLES))
    ap.add_argument("--weights", default=",".join(WEIGHTS))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    stride = 4 if args.quick else 1
    model = OnnxMiniLM(precision="float32")
    locomo.EMB = locomo.Embeddings(None, Path(tempfile.gettempdir()) / "synapsedb-locomo-cache")
    convs = locomo.load_dataset(args.data)
    questions = [q.text for c in convs for q in c.questions[::stride]]

    tables = build_tables(model, args.out)
    # every [CLS] t [SEP] row shares the [CLS]/[SEP] part: take the mean row (ids from 1000 on,
    # past [PAD], [unused*] and the specials) out of each
    tables["cls-c"] = tables["cls"] - tables["cls"][1000:].mean(axis=0)
    bare = tables["bare"][1000:] / np.linalg.norm(tables["bare"][1000:], axis=1, keepdims=True)
    print(
        f"  bare rows: norm of their mean direction {np.linalg.norm(bare.mean(0)):.4f} (1 = all alike)"
    )
    prose, generated = training_sentences(args.train)
    train = prose + generated
    print(f"  {len(train):,} training sentences, e.g. {train[0]!r} / {train[-1]!r}")
    y_train = cached_minilm(model, train, args.out, "train")
    weights = token_weights(model, prose, args.pylib)
    q_true = dict(zip(questions, cached_minilm(model, questions, args.out, "q"), strict=True))

    encoders: dict[str, Callable[[Sequence[str]], np.ndarray]] = {}
    one: dict[str, Callable[[str], np.ndarray]] = {}
    ridges: dict[str, float] = {}
    with threadpool_limits(1):
        for tname in args.tables.split(","):
            for wname in args.weights.split(","):
                if tname == "bare" and wname != "uniform":
                    continue  # its rows all point the same way: weights change nothing
                enc = StaticEncoder(model, tables[tname], weights[wname])
                w_map, ridge = fit_map(enc, train, y_train)
                ridges[f"{tname}/{wname}+W"] = ridge
                mapped = StaticEncoder(model, tables[tname], weights[wname], w_map)
                for name, e in ((f"{tname}/{wname}", enc), (f"{tname}/{wname}+W", mapped)):
                    encoders[name] = e.embed
                    one[name] = e.encode_one

    rows: dict[str, dict[str, Any]] = {}
    dense: dict[str, locomo.Result] = {}
    hybrid: dict[str, locomo.Result] = {}
    dense_s: dict[str, locomo.Result] = {}  # dense on the question minus speaker names
    root = Path(tempfile.mkdtemp(prefix="static-query-", dir=args.out))
    known: dict[str, np.ndarray] = {}
    for conv in convs:
        for t, v in zip(conv.turns, locomo.doc_vectors(conv), strict=True):
            known[t.content] = v
    emb = SwitchEmbedder(model, known)
    engine = Engine(root, emb, convs)
    try:
        with threadpool_limits(1):
            lat = latency(lambda t: model.embed([t]), questions[:300])
            emb.query = model.embed
            dense["MiniLM"] = locomo.evaluate(dense_retriever(q_true.__getitem__), convs, stride)
            stripped_texts = sorted({stripped(c, q.text) for c in convs for q in c.questions})
            s_true = dict(
                zip(
                    stripped_texts,
                    cached_minilm(model, stripped_texts, args.out, "qs"),
                    strict=True,
                )
            )
            dense_s["MiniLM"] = locomo.evaluate(
                dense_retriever(s_true.__getitem__, strip=True), convs, stride
            )
            hybrid["MiniLM"] = locomo.evaluate(engine.retriever(), convs, stride)
            rows["MiniLM"] = {"lat": lat, "cos": (1.0, 1.0)}
            for name, fn in one.items():
                cos = np.array([float(fn(q) @ q_true[q]) for q in questions])
                rows[name] = {
                    "lat": latency(fn, questions),
                    "cos": (cos.mean(), np.percentile(cos, 10)),
                }
                dense[name] = locomo.evaluate(dense_retriever(fn), convs, stride)
                dense_s[name] = locomo.evaluate(dense_retriever(fn, strip=True), convs, stride)
                emb.query = encoders[name]
                hybrid[name] = locomo.evaluate(engine.retriever(), convs, stride)
                print(
                    f"  {name}: cos {rows[name]['cos'][0]:.3f} dense "
                    f"{dense[name].mean('r@10'):.3f} hybrid {hybrid[name].mean('r@10'):.3f}",
                    flush=True,
                )
            # the caller-vector route (query(text, embedding=vec)): the vector of the whole question
            emb.query = None
            best = max(one, key=lambda n: hybrid[n].mean("r@10"))
            given = {
                "MiniLM, embedding= of the whole question": q_true.__getitem__,
                f"{best}, embedding= of the whole question": one[best],
            }
            given_res = {
                n: locomo.evaluate(engine.retriever(f), convs, stride) for n, f in given.items()
            }
            given_res["keyword mode (no query vector at all)"] = locomo.evaluate(
                engine.retriever(mode="keyword"), convs, stride
            )
    finally:
        engine.db.close()
        shutil.rmtree(root, ignore_errors=True)

    conv_names = [c.name for c in convs]
    static = [n for n in one]
    loo_h, chosen_h = loo(hybrid, static, conv_names)
    loo_d, chosen_d = loo(dense, static, conv_names)
    loo_s, chosen_s = loo(dense_s, static, conv_names)
    base = np.asarray(hybrid["MiniLM"].values["r@10"])
    diff = np.asarray(loo_h.values["r@10"]) - base  # same questions, same order
    rng = np.random.default_rng(0)
    boot = [diff[rng.integers(0, len(diff), len(diff))].mean() for _ in range(2000)]
    lo, hi = np.percentile(boot, [2.5, 97.5])
    np.savez(
        args.out / "per_question.npz",
        minilm=base,
        loo_static=base + diff,
        **{n: np.asarray(r.values["r@10"]) for n, r in hybrid.items()},
    )
    cats = " | ".join(f"hybrid R@10 {c} {lab}" for c, lab in locomo.CATEGORIES.items())
    lines = [
        f"Date {dt.date.today()}, machine {machine()}, commit {git_rev()}. "
        f"{len(questions)} LoCoMo dev questions (stride {stride}); W fitted on {len(train):,} "
        "non-LoCoMo sentences. Latency = one query text, single-threaded numpy (MiniLM: "
        "onnxruntime, 2 threads).",
        "",
        f"| query encoder | p50 ms | p99 ms | cos to MiniLM mean | p10 | dense R@10 | dense R@10 names stripped | hybrid R@10 | {cats} |",
        "|---|---|---|---|---|---|---|---|" + "---|" * len(locomo.CATEGORIES),
    ]
    for name in rows:
        r = rows[name]
        lines.append(
            f"| {name} | {r['lat'][0]:.3f} | {r['lat'][1]:.3f} | {r['cos'][0]:.3f} | {r['cos'][1]:.3f} "
            f"| {dense[name].mean('r@10'):.3f} | {dense_s[name].mean('r@10'):.3f} | {hybrid[name].mean('r@10'):.3f} | {cat_cells(hybrid[name])} |"
        )
    lines += [
        "",
        "Leave-one-conversation-out (variant picked by R@10 on the other four conversations):",
        "",
        f"| selection | R@10 | {' | '.join(f'R@10 {c} {lab}' for c, lab in locomo.CATEGORIES.items())} |",
        "|---|---|" + "---|" * len(locomo.CATEGORIES),
        f"| hybrid, LOO-picked static | {loo_h.mean('r@10'):.3f} | {cat_cells(loo_h)} |",
        f"| hybrid, MiniLM queries | {hybrid['MiniLM'].mean('r@10'):.3f} | {cat_cells(hybrid['MiniLM'])} |",
        f"| dense, LOO-picked static | {loo_d.mean('r@10'):.3f} | {cat_cells(loo_d)} |",
        f"| dense, MiniLM queries | {dense['MiniLM'].mean('r@10'):.3f} | {cat_cells(dense['MiniLM'])} |",
        f"| dense names stripped, LOO-picked static | {loo_s.mean('r@10'):.3f} | {cat_cells(loo_s)} |",
        f"| dense names stripped, MiniLM queries | {dense_s['MiniLM'].mean('r@10'):.3f} "
        f"| {cat_cells(dense_s['MiniLM'])} |",
        "",
        f"Hybrid R@10, LOO-picked static minus MiniLM queries: {diff.mean():+.3f} "
        f"(paired bootstrap 95% CI {lo:+.3f} to {hi:+.3f}, {len(diff)} questions).",
        "",
        "Ridge picked on held-out training sentences: "
        + ", ".join(f"{n} {r:g}" for n, r in ridges.items()),
        "",
        "Picked (hybrid): " + "; ".join(chosen_h),
        "",
        "Picked (dense): " + "; ".join(chosen_d),
        "",
        "Picked (dense, names stripped): " + "; ".join(chosen_s),
        "",
        "Caller-given vector route (`query(text, embedding=vec)`; the engine then skips its own "
        "speaker-name stripping for the dense side), and the floor with no vector:",
        "",
        f"| route | hybrid R@10 | {cats} |",
        "|---|---|" + "---|" * len(locomo.CATEGORIES),
        *(f"| {n} | {r.mean('r@10'):.3f} | {cat_cells(r)} |" for n, r in given_res.items()),
        "",
        f"Texts the engine embedded for the last variant, e.g.: {emb.seen[:3]!r}",
    ]
    text = "\n".join(lines)
    (args.out / "report.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
