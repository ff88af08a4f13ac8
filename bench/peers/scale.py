"""The peer benchmark's scale report: SynapseDB's memory and reopen per size, and the issue's
absolute targets at the largest size (1M memories in one namespace).

Pure: no peer library is imported (the unit tests load this module from the main venv).
"""

from __future__ import annotations

from typing import Any

from report import fmt_n, fmt_num, fmt_ratio, ratio, table

# The targets for 1,000,000 memories in one namespace (SynapseDB embedded).
GOALS = {
    "ingest_vs_chroma": 3.0,  # memories/s including the vector index, SynapseDB / Chroma
    "p50_ms": 1.0,
    "p99_ms": 5.0,
    "rss_mib": 2.5 * 1024,
    "reopen_s": 5.0,
}


def abs_line(label: str, value: float | None, goal: float, unit: str) -> str:
    """One targets row for an absolute value that must be at most ``goal``."""
    if value is None:
        return f"| {label} | — | <= {fmt_num(goal)} {unit} | not measured |"
    verdict = "met" if value <= goal else "**missed**"
    return f"| {label} | {fmt_num(value, 3)} {unit} | <= {fmt_num(goal)} {unit} | {verdict} |"


def reopen_s(r: dict[str, Any]) -> float | None:
    """Seconds from closing to the first answered query after opening again."""
    ro = r.get("reopen")
    if not ro:
        return None
    return float(ro["close_s"] + ro["open_s"] + ro["first_query_s"])


def memory_reopen_table(vec: dict[int, dict[str, dict[str, Any]]]) -> list[str]:
    """SynapseDB embedded at each size: resident memory, index catch-up, close and reopen."""
    rows = []
    for n, per in sorted(vec.items()):
        r = per.get("synapsedb", {})
        if "query" not in r:
            continue
        ro = r.get("reopen") or {}
        rows.append(
            [
                fmt_n(int(n)),
                fmt_num(r.get("rss_mib")),
                fmt_num(r["ingest"].get("index_wait_s"), 1),
                fmt_num(ro.get("close_s"), 2),
                fmt_num(ro.get("open_s"), 3),
                fmt_num(ro.get("first_query_s"), 2),
                fmt_num(reopen_s(r), 2),
                fmt_num(ro.get("pending_rows"), 0),
            ]
        )
    if not rows:
        return []
    header = [
        "N",
        "RSS MiB",
        "index wait s",
        "close s",
        "open s",
        "first query s",
        "close to first answer s",
        "rows to index",
    ]
    return [
        "### SynapseDB embedded: memory and reopen",
        "",
        "Resident memory of the process after ingest and index catch-up (the data, the HNSW "
        "graph, the keyword index); then `close()` (which saves the graph), `synapsedb.open()` "
        "(lazy: namespace names only) and the first query, which loads the namespace and its "
        "saved graph. *rows to index* is what was still to index after that query: the HNSW "
        "graph's missing rows (none when the saved graph was loaded) plus the keyword index, "
        "which a namespace this large builds in the background after it loads.",
        "",
        *table(header, rows),
    ]


def largest_targets(vec: dict[int, dict[str, dict[str, Any]]]) -> list[str]:
    """Targets rows at the largest size measured, when it is 1M or more."""
    if not vec or max(vec) < 1_000_000:
        return []
    n = max(vec)
    per = vec[n]
    s = per.get("synapsedb", {})
    tag = fmt_n(n)

    def rate(r: dict[str, Any]) -> float | None:
        i = r.get("ingest", {})
        if not i.get("complete") or "query" not in r:
            return None
        return float(i["rows"] / (i["seconds"] + i.get("index_wait_s", 0.0)))

    ing = ratio(rate(s), rate(per.get("chroma", {})))
    g = GOALS
    verdict = (
        "not measured" if ing is None else ("met" if ing >= g["ingest_vs_chroma"] else "**missed**")
    )
    lines = [
        f"| ingest at {tag} including the HNSW index: SynapseDB embedded / Chroma in-process "
        f"| {fmt_ratio(ing)} | >= {fmt_ratio(g['ingest_vs_chroma'])} | {verdict} |"
    ]
    for key, what in (("query", "no filter"), ("query_filter", "1% filter")):
        q = s.get(key, {})
        lines.append(
            abs_line(
                f"query p50 at {tag}, {what}: SynapseDB embedded", q.get("p50"), g["p50_ms"], "ms"
            )
        )
        lines.append(
            abs_line(
                f"query p99 at {tag}, {what}: SynapseDB embedded", q.get("p99"), g["p99_ms"], "ms"
            )
        )
    lines.append(
        abs_line(
            f"resident memory at {tag}: SynapseDB embedded", s.get("rss_mib"), g["rss_mib"], "MiB"
        )
    )
    lines.append(
        abs_line(
            f"close + reopen to the first answer at {tag}: SynapseDB embedded",
            reopen_s(s),
            g["reopen_s"],
            "s",
        )
    )
    return lines
