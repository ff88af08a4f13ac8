// Lineage: an answer, the queries behind it and the memory versions they returned, drawn as a
// graph, with what has changed in each of those memories since.

import { ApiError, get, nsPath } from "./api.js";
import { clear, diffEl, errorBox, h, svg, timeEl } from "./dom.js";
import { AuditCursor } from "./audit.js";

const NODE_W = 230;
const NODE_H = 46;
const GAP = 14;
const COLS = [20, 330, 640];
const MAX_FOLLOWED = 200; // memories whose later history is fetched

const short = (text, n = 34) => {
  const s = String(text ?? "");
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
};

function answerPicker(page, ctx) {
  const input = h("input", { id: "answer-id", required: true, autocomplete: "off" });
  const form = h("form", { class: "inline" }, h("label", { for: "answer-id" }, "Answer id"),
    input, h("button", { type: "submit" }, "Show lineage"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    ctx.go("lineage", { answer: input.value.trim() });
  });
  const list = h("ul", { class: "plain answers" });
  const more = h("button", { type: "button" }, "Look further in the audit trail");
  page.append(form, h("h2", {}, "Answers recorded (oldest first)"), list, more);
  const cursor = new AuditCursor(ctx.ns, { until: ctx.asOf }, ctx.signal);
  const load = async () => {
    let found = 0;
    // answers are a few of the audit's entries: read pages until some turn up (or the end)
    for (let pages = 0; pages < 10 && !cursor.done && found === 0; pages += 1) {
      const rows = await cursor.next(1000);
      for (const e of rows.filter((r) => r.action === "answer")) {
        found += 1;
        list.append(h("li", {}, h("a", { href: ctx.link("lineage", { answer: e.target }) },
          e.target), ` · by ${e.agent || "no agent"} · `, timeEl(e.at)));
      }
    }
    more.hidden = cursor.done;
    if (cursor.done && !list.children.length) {
      list.append(h("li", { class: "muted" }, "No answer has been recorded yet."));
    }
  };
  more.addEventListener("click", () => load().catch((err) => page.append(errorBox(err))));
  return load();
}

// Each memory version behind the answer, and its versions since (at most MAX_FOLLOWED).
async function laterVersions(ctx, refs) {
  const ids = [...new Set(refs.map((r) => r.id))].slice(0, MAX_FOLLOWED);
  const out = new Map();
  await Promise.all(ids.map(async (id) => {
    try {
      out.set(id, await get(nsPath(ctx.ns, `/memories/${encodeURIComponent(id)}/history`),
        { as_of: ctx.asOf }, ctx.signal));
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 404) throw err;
      out.set(id, null);
    }
  }));
  return out;
}

function changeOf(ref, histories) {
  const versions = histories.get(ref.id);
  if (versions === undefined) return { kind: "unknown", text: "not checked" };
  if (versions === null) return { kind: "gone", text: "no longer known" };
  const latest = versions[versions.length - 1];
  if (ref.erased || latest.erased) return { kind: "erased", text: "erased since" };
  if (latest.version === ref.version) return { kind: "same", text: "unchanged" };
  if (latest.deleted) return { kind: "deleted", text: `deleted in v${latest.version}`, latest };
  return { kind: "changed", text: `changed: now v${latest.version}`, latest };
}

function node(x, y, title, sub, kind, onSelect) {
  const g = svg("g", { class: `node ${kind}`, tabindex: 0, role: "button",
    "aria-label": `${title}: ${sub}` },
  svg("title", {}, `${title}\n${sub}`),
  svg("rect", { x, y, width: NODE_W, height: NODE_H, rx: 6 }),
  svg("text", { x: x + 8, y: y + 18, class: "t1" }, short(title)),
  svg("text", { x: x + 8, y: y + 36, class: "t2" }, short(sub)));
  g.addEventListener("click", onSelect);
  g.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); onSelect(); }
  });
  return g;
}

function edge(a, b, cls) {
  const x1 = a.x + NODE_W;
  const y1 = a.y + NODE_H / 2;
  const x2 = b.x;
  const y2 = b.y + NODE_H / 2;
  const mid = (x1 + x2) / 2;
  return svg("path", { d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`, class: cls });
}

function memoryDetail(ref, change, ctx) {
  const box = [h("h3", {}, `Memory ${ref.id} v${ref.version}`),
    h("p", {}, "About ", ref.entity ? h("a", { href: ctx.link("entity", { entity: ref.entity }) },
      ref.entity) : "an erased entity", ref.score !== null ? ` · score ${ref.score}` : "",
    " · ", h("a", { href: ctx.link("memory", { id: ref.id }) }, "full history")),
    h("p", {}, h("b", {}, "What the agent saw: "), ref.erased ? "erased" : ref.content),
    h("p", { class: `change ${change.kind}` }, h("b", {}, "Since then: "), change.text)];
  if (change.latest && !change.latest.erased && !ref.erased) {
    box.push(h("p", {}, h("b", {}, "Now: ")), diffEl(ref.content, change.latest.content));
  }
  return box;
}

export async function renderLineage(page, ctx) {
  const answer = ctx.params.get("answer");
  page.append(h("h1", {}, "Lineage"));
  if (!answer) {
    await answerPicker(page, ctx);
    return;
  }
  const lin = await get(nsPath(ctx.ns, `/answers/${encodeURIComponent(answer)}/lineage`), {},
    ctx.signal);
  const refs = [...lin.queries.flatMap((q) => q.hits), ...lin.cited];
  const histories = await laterVersions(ctx, refs);
  page.append(h("p", {}, h("b", {}, answer), ` by ${lin.agent || "no agent"} · `,
    timeEl(lin.recorded_at), lin.erased ? " · its text was erased" : ""),
  lin.text ? h("blockquote", {}, lin.text) : null);
  // the graph: queries -> memory versions -> the answer (cited versions drawn bold)
  const versions = new Map();
  for (const ref of refs) {
    const key = `${ref.id}@${ref.version}`;
    if (!versions.has(key)) versions.set(key, ref);
  }
  const cited = new Set(lin.cited.map((r) => `${r.id}@${r.version}`));
  const pos = new Map();
  const rows = Math.max(lin.queries.length, versions.size, 1);
  const height = rows * (NODE_H + GAP) + GAP;
  const detail = h("section", { class: "card detail", "aria-live": "polite",
    "aria-label": "Selected node" }, h("p", { class: "muted" },
    "Select a query or a memory (click, or Tab then Enter) to see it here."));
  const show = (children) => clear(detail).append(...children.flat());
  const graph = svg("svg", { class: "lineage-graph", viewBox: `0 0 ${COLS[2] + NODE_W + 20} ${height}`,
    role: "group", "aria-label": `Lineage graph of answer ${answer}` });
  const edges = svg("g", { class: "edges" });
  const nodes = svg("g", { class: "nodes" });
  graph.append(edges, nodes);
  lin.queries.forEach((q, i) => {
    const p = { x: COLS[0], y: GAP + i * (NODE_H + GAP) };
    pos.set(`q:${q.query_id}`, p);
    nodes.append(node(p.x, p.y, `query: ${q.text ?? "(erased)"}`,
      `${q.agent || "no agent"} · ${q.hits.length} hits`, "query", () => show([
        h("h3", {}, `Query ${q.query_id}`), h("p", {}, q.text ?? "(its text was erased)"),
        h("p", { class: "meta" }, `by ${q.agent || "no agent"} · `, timeEl(q.recorded_at)),
        h("pre", {}, JSON.stringify(q.request, null, 2))])));
  });
  [...versions.entries()].forEach(([key, ref], i) => {
    const p = { x: COLS[1], y: GAP + i * (NODE_H + GAP) };
    pos.set(key, p);
    const change = changeOf(ref, histories);
    nodes.append(node(p.x, p.y, `${ref.erased ? "(erased)" : ref.content}`,
      `v${ref.version} · ${change.text}${cited.has(key) ? " · cited" : ""}`,
      `memory ${change.kind}${cited.has(key) ? " cited" : ""}`,
      () => show(memoryDetail(ref, change, ctx))));
  });
  const ap = { x: COLS[2], y: GAP + ((rows - 1) * (NODE_H + GAP)) / 2 };
  nodes.append(node(ap.x, ap.y, `answer: ${answer}`, lin.text ?? "", "answer", () => show([
    h("h3", {}, `Answer ${answer}`), h("p", {}, lin.text ?? "(no text)")])));
  for (const q of lin.queries) {
    for (const hit of q.hits) {
      edges.append(edge(pos.get(`q:${q.query_id}`), pos.get(`${hit.id}@${hit.version}`), "hit"));
    }
  }
  for (const key of versions.keys()) {
    edges.append(edge(pos.get(key), ap, cited.has(key) ? "cited" : "behind"));
  }
  page.append(h("div", { class: "lineage" }, h("div", { class: "graph-box" }, graph), detail));
  // the same as a table, for reading and for screen readers
  const table = h("table", { class: "grid since" },
    h("caption", {}, "What changed in these memories since the answer"),
    h("thead", {}, h("tr", {}, ["memory", "version seen", "cited", "since then"].map((c) =>
      h("th", { scope: "col" }, c)))),
    h("tbody", {}, [...versions.entries()].map(([key, ref]) => {
      const change = changeOf(ref, histories);
      return h("tr", { class: change.kind },
        h("td", {}, h("a", { href: ctx.link("memory", { id: ref.id }) }, short(ref.content ??
          ref.id, 60))),
        h("td", { class: "num" }, `v${ref.version}`), h("td", {}, cited.has(key) ? "yes" : ""),
        h("td", {}, change.text));
    })));
  page.append(table);
}
