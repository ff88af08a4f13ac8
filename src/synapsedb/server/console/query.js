// The query playground: a real query (logged like any other, so it can back an answer), with
// every hit's score breakdown (explain) and the near-duplicates folded into it (dedup groups).

import { nsPath, request } from "./api.js";
import { clear, errorBox, h, say } from "./dom.js";

const EXPLAIN_PARTS = [
  ["vector", "vector (fused rank share)"], ["keyword", "keyword (fused rank share)"],
  ["cosine", "cosine similarity"], ["bm25", "BM25"], ["base", "relevance"],
  ["context", "recency, salience, pins"],
];

function field(id, label, input, help) {
  return h("div", { class: "field" }, h("label", { for: id }, label), input,
    help ? h("small", { id: `${id}-help`, class: "muted" }, help) : null);
}

function explanation(x) {
  if (!x) return null;
  const max = Math.max(1, ...Object.values(x).filter((v) => typeof v === "number"));
  return h("table", { class: "explain" },
    h("caption", {}, `score ${x.score}`),
    h("tbody", {}, EXPLAIN_PARTS.filter(([k]) => k in x).map(([k, label]) => h("tr", {},
      h("th", { scope: "row" }, label),
      h("td", {}, h("meter", { min: 0, max, value: x[k], "aria-label": label }, x[k])),
      h("td", { class: "num" }, String(x[k]))))));
}

function hitItem(hit, rank, ctx, cite) {
  const dupes = hit.duplicates.length
    ? h("details", { class: "dupes" },
      h("summary", {}, `dedup group: ${hit.duplicates.length} near-duplicate`
        + `${hit.duplicates.length === 1 ? "" : "s"} folded into this hit`),
      h("ul", {}, hit.duplicates.map((id) => h("li", {},
        h("a", { href: ctx.link("memory", { id }) }, id)))))
    : null;
  return h("li", { class: "hit" },
    h("p", { class: "content" }, hit.content),
    h("p", { class: "meta" }, `#${rank} · score ${hit.score} · ${hit.type} · v${hit.version} · `
      + `${hit.tier} tier · by ${hit.agent || "no agent"} · `,
      h("a", { href: ctx.link("entity", { entity: hit.entity }) }, hit.entity), " · ",
      h("a", { href: ctx.link("memory", { id: hit.id }) }, "history")),
    cite, explanation(hit.explanation), dupes);
}

function answerForm(result, ctx, cites) {
  const id = `ans-${new Date().toISOString().replace(/\D/g, "").slice(0, 14)}`;
  const form = h("form", { class: "card answer" },
    h("h2", {}, "Record an answer built on this query"),
    field("answer-id", "Answer id", h("input", { id: "answer-id", value: id, required: true })),
    field("answer-text", "Answer text", h("textarea", { id: "answer-text", rows: 2 })),
    h("p", { class: "muted" }, "Ticked hits are recorded as cited."),
    h("button", { type: "submit" }, "Record answer and show its lineage"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const answerId = form.querySelector("#answer-id").value.trim();
    const text = form.querySelector("#answer-text").value;
    const cited = cites.filter((c) => c.checked).map((c) => c.value);
    try {
      await request("POST", nsPath(ctx.ns, "/answers"), {
        body: { answer_id: answerId, query_ids: [result.query_id], text: text || null, cited },
      });
      ctx.go("lineage", { answer: answerId });
    } catch (err) {
      say(`Recording the answer failed: ${err.message}`, "error");
    }
  });
  return form;
}

export async function renderQuery(page, ctx) {
  const p = ctx.params;
  page.append(h("h1", {}, "Query playground"));
  const text = h("textarea", { id: "q-text", rows: 2, maxlength: 8192 }, p.get("text") || "");
  const entity = h("input", { id: "q-entity", value: p.get("entity") || "", autocomplete: "off" });
  const types = h("input", { id: "q-types", value: p.get("types") || "", autocomplete: "off",
    "aria-describedby": "q-types-help" });
  const filter = h("textarea", { id: "q-filter", rows: 2, "aria-describedby": "q-filter-help" },
    p.get("filter") || "");
  const mode = h("select", { id: "q-mode" }, ["hybrid", "vector", "keyword"].map((m) =>
    h("option", { value: m, selected: (p.get("mode") || "hybrid") === m }, m)));
  const k = h("input", { id: "q-k", type: "number", min: 1, max: 1000, value: p.get("k") || 10 });
  const dedup = h("input", { id: "q-dedup", type: "checkbox", checked: p.get("dedup") !== "0" });
  const form = h("form", { class: "card query-form", "aria-label": "Query" },
    field("q-text", "Text", text),
    h("div", { class: "row" },
      field("q-entity", "Entity (optional)", entity),
      field("q-types", "Types", types, "comma separated, e.g. fact,preference"),
      field("q-mode", "Mode", mode),
      field("q-k", "k", k),
      h("div", { class: "field check" }, dedup, h("label", { for: "q-dedup" }, "dedup"))),
    field("q-filter", "Filter (JSON)", filter, "the filter language, e.g. {\"type\": \"fact\"}"),
    h("p", { class: "muted" }, ctx.asOf ? `As of ${ctx.asOf} (the time slider).`
      : "As of now (move the time slider to ask the past)."),
    h("button", { type: "submit" }, "Run query"));
  const out = h("section", { "aria-label": "Results", "aria-live": "polite" });
  page.append(form, out);
  const run = async () => {
    clear(out);
    const body = { text: text.value, k: Number(k.value), mode: mode.value, explain: true,
      dedup: dedup.checked, as_of: ctx.asOf || undefined };
    if (entity.value.trim()) body.entity = entity.value.trim();
    if (types.value.trim()) body.types = types.value.split(",").map((t) => t.trim()).filter(Boolean);
    if (filter.value.trim()) {
      try { body.filter = JSON.parse(filter.value); } catch (exc) {
        out.append(errorBox(new Error(`filter: not JSON (${exc.message})`)));
        return;
      }
    }
    try {
      const result = await request("POST", nsPath(ctx.ns, "/query"), { body, signal: ctx.signal });
      const cites = [];
      out.append(h("h2", {}, `${result.hits.length} hit${result.hits.length === 1 ? "" : "s"}`),
        h("p", { class: "muted" }, "Logged as query ", h("code", {}, result.query_id), "."));
      out.append(h("ol", { class: "hits" }, result.hits.map((hit, i) => {
        let cite = null;
        if (ctx.canWrite) {
          const box = h("input", { type: "checkbox", id: `cite-${i}`, value: hit.id });
          cites.push(box);
          cite = h("div", { class: "field check" }, box,
            h("label", { for: `cite-${i}` }, "cite in an answer"));
        }
        return hitItem(hit, i + 1, ctx, cite);
      })));
      if (ctx.canWrite) out.append(answerForm(result, ctx, cites));
    } catch (err) {
      if (err.name !== "AbortError") out.append(errorBox(err));
    }
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    // the query goes in the address so it can be shared (replaceState: no second render)
    window.history.replaceState(null, "", ctx.link("query", {
      text: text.value, entity: entity.value.trim(), types: types.value.trim(),
      filter: filter.value.trim(), mode: mode.value, k: k.value, dedup: dedup.checked ? "" : "0",
    }));
    run();
  });
  if (p.get("text")) await run();
}
