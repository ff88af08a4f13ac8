// Browsing: namespaces (counts, tiers, quotas), a namespace's entities and streams, an entity's
// memories, KV facts and stream (newest first), and the version history of each.

import { get, nsPath } from "./api.js";
import {
  clear, diffEl, errorBox, fmtBytes, fmtNum, h, json, pager, timeEl,
} from "./dom.js";
import { entityActions, factActions, memoryActions } from "./edit.js";

const PAGE = 50;

// A list held in the browser (names), filtered and shown a page at a time.
function localList(box, items, { label, size = PAGE, row, filterLabel }) {
  let page = 0;
  let wanted = "";
  const list = h("ul", { class: "plain" });
  const nav = h("div");
  const draw = () => {
    const matching = wanted ? items.filter((x) => String(x).toLowerCase().includes(wanted)) : items;
    const shown = matching.slice(page * size, page * size + size);
    clear(list).append(...shown.map((x) => h("li", {}, row(x))));
    clear(nav).append(pager({
      page, size, shown: shown.length, total: matching.length,
      more: (page + 1) * size < matching.length, label,
      onPage: (p) => { page = p; draw(); },
    }));
  };
  if (filterLabel) {
    const id = `filter-${label.replace(/\W+/g, "-")}`;
    const input = h("input", { id, type: "search", autocomplete: "off" });
    input.addEventListener("input", () => { wanted = input.value.toLowerCase(); page = 0; draw(); });
    box.append(h("div", { class: "filter" }, h("label", { for: id }, filterLabel), input));
  }
  box.append(list, nav);
  draw();
}

// -- namespaces -------------------------------------------------------------------------------

function quotas(config) {
  return [
    `hot ≤ ${config.max_hot === null ? "no limit" : fmtNum(config.max_hot)}`,
    `bytes ≤ ${config.max_bytes === null ? "no limit" : fmtBytes(config.max_bytes)}`,
    `writes/s ≤ ${config.max_writes_per_s === null ? "no limit" : config.max_writes_per_s}`,
    `policy ${config.policy}`,
  ].join(" · ");
}

async function namespaceRow(ns, ctx) {
  const cells = [h("th", { scope: "row" }, h("a", { href: ctx.link("ns", { ns }) }, ns))];
  try {
    const [stats, config] = await Promise.all([
      get(nsPath(ns, "/stats"), {}, ctx.signal), get(nsPath(ns, "/config"), {}, ctx.signal),
    ]);
    const hot = stats.memories - stats.cold_memories;
    cells.push(h("td", {}, fmtNum(stats.memories)), h("td", {}, fmtNum(hot)),
      h("td", {}, fmtNum(stats.cold_memories)), h("td", {}, fmtNum(stats.entities)),
      h("td", {}, fmtNum(stats.facts)), h("td", {}, fmtNum(stats.events)),
      h("td", {}, fmtBytes(stats.bytes)), h("td", {}, quotas(config)));
  } catch (err) {
    if (err.name === "AbortError") throw err;
    cells.push(h("td", { colspan: 8 }, errorBox(err)));
  }
  return h("tr", {}, cells);
}

export async function renderHome(page, ctx) {
  page.append(h("h1", {}, "Namespaces"));
  const names = await get("/v1/namespaces", {}, ctx.signal);
  const open = h("form", { class: "inline" },
    h("label", { for: "open-ns" }, "Open a namespace by name"),
    h("input", { id: "open-ns", required: true, autocomplete: "off" }),
    h("button", { type: "submit" }, "Open"));
  open.addEventListener("submit", (ev) => {
    ev.preventDefault();
    ctx.go("ns", { ns: open.querySelector("input").value.trim() });
  });
  page.append(open);
  if (!names.length) {
    page.append(h("p", { class: "muted" }, "No namespace holds anything this key can see yet."));
    return;
  }
  const body = h("tbody");
  const table = h("table", { class: "grid" },
    h("caption", {}, "Counts are now; quotas are each namespace's lifecycle settings."),
    h("thead", {}, h("tr", {}, ["namespace", "memories", "hot", "cold", "entities", "KV facts",
      "events", "bytes", "quotas"].map((c) => h("th", { scope: "col" }, c)))),
    body);
  const nav = h("div");
  page.append(table, nav);
  const size = 20;
  const draw = async (p) => {
    const shown = names.slice(p * size, p * size + size);
    const rows = await Promise.all(shown.map((ns) => namespaceRow(ns, ctx)));
    clear(body).append(...rows);
    clear(nav).append(pager({ page: p, size, shown: shown.length, total: names.length,
      more: (p + 1) * size < names.length, label: "Namespaces", onPage: draw }));
  };
  await draw(0);
}

export async function renderNamespace(page, ctx) {
  const { ns } = ctx;
  page.append(h("h1", {}, ns));
  const [stats, config] = await Promise.all([
    get(nsPath(ns, "/stats"), {}, ctx.signal),
    get(nsPath(ns, "/config"), {}, ctx.signal),
  ]);
  const card = (label, value) => h("div", { class: "stat" },
    h("span", { class: "value" }, value), h("span", { class: "label" }, label));
  page.append(h("section", { "aria-labelledby": "stats-title" },
    h("h2", { id: "stats-title" }, "Now"),
    h("div", { class: "stats" },
      card("memories", fmtNum(stats.memories)),
      card("hot tier", fmtNum(stats.memories - stats.cold_memories)),
      card("cold tier", fmtNum(stats.cold_memories)),
      card("versions", fmtNum(stats.memory_versions)),
      card("entities", fmtNum(stats.entities)),
      card("KV facts", fmtNum(stats.facts)),
      card("streams", fmtNum(stats.streams)),
      card("events", fmtNum(stats.events)),
      card("bytes", fmtBytes(stats.bytes))),
    h("p", { class: "muted" }, `Quotas: ${quotas(config)}. Embedder: ${stats.embedder || "none"}.`)));
  const ents = h("section", { "aria-labelledby": "entities-title" },
    h("h2", { id: "entities-title" }, "Entities"));
  const strs = h("section", { "aria-labelledby": "streams-title" },
    h("h2", { id: "streams-title" }, "Streams"));
  page.append(h("div", { class: "columns" }, ents, strs));
  await Promise.all([
    namePicker(ents, ctx, { path: "/entities", label: "Entities", noun: "entity",
      placeholder: "e.g. user:", link: (e) => ctx.link("entity", { entity: e }) }),
    namePicker(strs, ctx, { path: "/streams", label: "Streams", noun: "stream",
      placeholder: "e.g. chat:", link: (s) => ctx.link("stream", { stream: s }) }),
  ]);
}

// A namespace's entities or streams (``path``), a page of names at a time from the server
// (``limit``, then ``after`` the last name shown), never the whole list: a namespace may have
// 100,000 of each. The search box asks the server for names starting with what is typed
// (``prefix``).
const NAME_PAGE = PAGE;

async function namePicker(box, ctx, { path, label, noun, placeholder, link }) {
  const kind = label.toLowerCase();
  const id = `find-${kind}`;
  const input = h("input", { id, type: "search", autocomplete: "off", spellcheck: "false",
    placeholder });
  const form = h("form", { class: "filter", role: "search", "aria-label": label },
    h("label", { for: id }, `Find ${kind} by prefix`), input,
    h("button", { type: "submit" }, "Find"));
  const list = h("ul", { class: "plain", "aria-labelledby": `${kind}-title` });
  const nav = h("div");
  box.append(form, list, nav);
  let starts = [null]; // the ``after`` of each page seen (null: from the first name)
  let page = 0;
  let prefix = input.value;
  let asked = 0; // answers to an older search are dropped
  const draw = async () => {
    const ticket = ++asked;
    try {
      const got = await get(nsPath(ctx.ns, path), {
        as_of: ctx.asOf, prefix, after: starts[page], limit: NAME_PAGE + 1,
      }, ctx.signal);
      if (ticket !== asked) return;
      const shown = got.slice(0, NAME_PAGE);
      if (got.length > NAME_PAGE) starts[page + 1] = shown[shown.length - 1];
      clear(list).append(...(shown.length ? shown.map((n) => h("li", {},
        h("a", { href: link(n) }, n)))
        : [h("li", { class: "muted" }, prefix ? `No ${noun} starts with “${prefix}”.`
          : `No ${kind}.`)]));
      clear(nav).append(pager({ page, size: NAME_PAGE, shown: shown.length,
        more: got.length > NAME_PAGE, label, prev: "← Previous",
        next: "More →", onPage: (p) => { page = p; return draw(); } }));
    } catch (err) {
      if (err.name !== "AbortError" && ticket === asked) clear(list).append(errorBox(err));
    }
  };
  const search = () => {
    if (input.value === prefix) return null;
    prefix = input.value;
    starts = [null];
    page = 0;
    return draw();
  };
  let typing = null;
  input.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(search, 250);
  });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    clearTimeout(typing);
    search();
  });
  await draw();
}

// -- an entity --------------------------------------------------------------------------------

function memoryItem(m, ctx, redraw) {
  const flags = [m.pinned ? h("span", { class: "badge" }, "pinned") : null,
    m.deleted ? h("span", { class: "badge warn" }, "deleted") : null];
  return h("article", { class: "item", dataset: { id: m.id } },
    h("p", { class: "content" }, m.content),
    h("p", { class: "meta" }, `${m.type} · v${m.version} · by ${m.agent || "no agent"} · `,
      timeEl(m.recorded_at), ` · salience ${m.salience}`, flags, " · ",
      h("a", { href: ctx.link("memory", { id: m.id }) }, "history")),
    memoryActions(m, ctx, redraw));
}

// Memories newest first, a page at a time: each older page asks for the memories ``before``
// the last one shown (the API's cursor), so every memory of the entity is reachable, and no
// page is longer than PAGE + 1.
function memoriesSection(box, ctx, entity) {
  const starts = [null]; // the ``before`` of each page seen (null: the newest)
  let page = 0;
  const list = h("div");
  const nav = h("div");
  box.append(list, nav);
  const draw = async () => {
    try {
      const got = await get(nsPath(ctx.ns, "/memories"),
        { entity, as_of: ctx.asOf, limit: PAGE + 1, before: starts[page] }, ctx.signal);
      const shown = got.slice(0, PAGE);
      if (got.length > PAGE) starts[page + 1] = shown[shown.length - 1].id;
      clear(list).append(...(shown.length ? shown.map((m) => memoryItem(m, ctx, draw))
        : [h("p", { class: "muted" }, "No memories.")]));
      clear(nav).append(pager({ page, size: PAGE, shown: shown.length,
        more: got.length > PAGE, label: "Memories",
        onPage: (p) => { page = p; return draw(); } }));
    } catch (err) {
      if (err.name !== "AbortError") clear(list).append(errorBox(err));
    }
  };
  return draw();
}

function factItem(f, ctx, redraw) {
  return h("article", { class: "item", dataset: { key: f.key } },
    h("p", { class: "content" }, h("b", {}, f.key), " = ", h("code", {}, JSON.stringify(f.value))),
    h("p", { class: "meta" }, `v${f.version} · by ${f.agent || "no agent"} · `,
      timeEl(f.recorded_at), f.expires_at ? [" · expires ", timeEl(f.expires_at)] : null, " · ",
      h("a", { href: ctx.link("fact", { entity: f.entity, key: f.key }) }, "history")),
    factActions(f, ctx, redraw));
}

async function factsSection(box, ctx, entity) {
  const list = h("div");
  box.append(list);
  const draw = async () => {
    try {
      const facts = await get(nsPath(ctx.ns, "/facts"), { entity, as_of: ctx.asOf }, ctx.signal);
      clear(list);
      if (!facts.length) list.append(h("p", { class: "muted" }, "No KV facts."));
      else localList(list, facts, { label: "Facts", row: (f) => factItem(f, ctx, draw) });
    } catch (err) {
      if (err.name !== "AbortError") clear(list).append(errorBox(err));
    }
  };
  return draw();
}

// A stream newest first, paged by event id: each older page ends where the last one stopped.
async function streamSection(box, ctx, stream) {
  const list = h("div");
  const nav = h("div");
  box.append(list, nav);
  const starts = [null]; // the inclusive end id of each page seen (null: the newest)
  let page = 0;
  const draw = async () => {
    const end = starts[page];
    try {
      const got = await get(nsPath(ctx.ns, "/events"), {
        stream, order: "desc", end, limit: PAGE + (end ? 2 : 1), as_of: ctx.asOf,
      }, ctx.signal);
      const rows = end ? got.filter((e) => e.id !== end) : got;
      const shown = rows.slice(0, PAGE);
      if (rows.length > PAGE) starts[page + 1] = shown[shown.length - 1].id;
      clear(list).append(...(shown.length ? shown.map((e) => h("article", { class: "item" },
        h("p", { class: "content" }, e.content),
        e.data ? h("pre", {}, json(e.data)) : null,
        h("p", { class: "meta" }, `${e.id} · by ${e.agent || "no agent"} · `, timeEl(e.ts),
          e.memory_id ? [" · ", h("a", { href: ctx.link("memory", { id: e.memory_id }) },
            "as a memory")] : null)))
        : [h("p", { class: "muted" }, "No events.")]));
      clear(nav).append(pager({ page, size: PAGE, shown: shown.length, more: rows.length > PAGE,
        label: "Events", onPage: (p) => { page = p; return draw(); } }));
    } catch (err) {
      if (err.name !== "AbortError") clear(list).append(errorBox(err));
    }
  };
  return draw();
}

export async function renderEntity(page, ctx) {
  const entity = ctx.params.get("entity") || "";
  page.append(h("h1", {}, entity), entityActions(entity, ctx));
  const mems = h("section", { "aria-labelledby": "mem-title", class: "memories" },
    h("h2", { id: "mem-title" }, "Memories (newest first)"));
  const facts = h("section", { "aria-labelledby": "facts-title", class: "facts" },
    h("h2", { id: "facts-title" }, "KV facts"));
  const events = h("section", { "aria-labelledby": "events-title", class: "events" },
    h("h2", { id: "events-title" }, `Stream ${entity} (newest first)`));
  page.append(mems, h("div", { class: "columns" }, facts, events));
  await Promise.all([memoriesSection(mems, ctx, entity), factsSection(facts, ctx, entity),
    streamSection(events, ctx, entity)]);
}

export async function renderStream(page, ctx) {
  const stream = ctx.params.get("stream") || "";
  page.append(h("h1", {}, `Stream ${stream}`));
  await streamSection(page, ctx, stream);
}

// -- version histories ------------------------------------------------------------------------

const MEMORY_FIELDS = ["type", "salience", "pinned", "ttl", "entity", "ts"];

function versionChanges(prev, v, fields) {
  const out = [];
  for (const f of fields) {
    if (prev && JSON.stringify(prev[f]) !== JSON.stringify(v[f])) {
      out.push(h("li", {}, `${f}: `, h("del", {}, JSON.stringify(prev[f])), " → ",
        h("ins", {}, JSON.stringify(v[f]))));
    }
  }
  return out;
}

function versionHead(v, kind) {
  const state = v.erased ? " · erased" : v.deleted ? " · deleted" : "";
  return h("h3", {}, `v${v.version}${state} · ${kind} by ${v.agent || "no agent"} · `,
    timeEl(v.recorded_at));
}

export async function renderMemory(page, ctx) {
  const id = ctx.params.get("id") || "";
  const versions = await get(nsPath(ctx.ns, `/memories/${encodeURIComponent(id)}/history`),
    { as_of: ctx.asOf }, ctx.signal);
  const latest = versions[versions.length - 1];
  page.append(h("h1", {}, "Memory ", h("code", {}, id)),
    h("p", {}, "About ", h("a", { href: ctx.link("entity", { entity: latest.entity }) },
      latest.entity), ` · ${versions.length} version${versions.length === 1 ? "" : "s"}`
      + " · newest first"));
  if (!latest.deleted) page.append(memoryActions(latest, ctx, ctx.refresh));
  const list = h("ol", { class: "versions", reversed: true });
  versions.forEach((v, i) => {
    const prev = i ? versions[i - 1] : null;
    const kind = !prev ? "written" : v.deleted ? "deleted" : "updated";
    const body = v.erased ? h("p", { class: "muted" }, "erased (purge): the content is gone")
      : prev && !prev.erased ? diffEl(prev.content, v.content) : h("p", {}, v.content);
    const meta = prev && JSON.stringify(prev.metadata) !== JSON.stringify(v.metadata)
      ? h("details", {}, h("summary", {}, "metadata changed"),
        h("pre", {}, `before: ${json(prev.metadata)}\nafter: ${json(v.metadata)}`))
      : null;
    list.prepend(h("li", { class: "version" }, versionHead(v, kind), body,
      h("ul", { class: "changes" }, versionChanges(prev, v, MEMORY_FIELDS)), meta));
  });
  page.append(list);
}

export async function renderFact(page, ctx) {
  const entity = ctx.params.get("entity") || "";
  const key = ctx.params.get("key") || "";
  const versions = await get(nsPath(ctx.ns, "/facts/history"),
    { entity, key, as_of: ctx.asOf }, ctx.signal);
  page.append(h("h1", {}, "KV fact ", h("code", {}, key)),
    h("p", {}, "About ", h("a", { href: ctx.link("entity", { entity }) }, entity),
      ` · ${versions.length} version${versions.length === 1 ? "" : "s"} · newest first`));
  const latest = versions[versions.length - 1];
  if (!latest.deleted) {
    page.append(factActions(latest, ctx, ctx.refresh));
  }
  const list = h("ol", { class: "versions", reversed: true });
  versions.forEach((v, i) => {
    const prev = i ? versions[i - 1] : null;
    const kind = !prev ? "set" : v.deleted ? "unset" : "set";
    const body = v.erased ? h("p", { class: "muted" }, "erased (purge): the value is gone")
      : prev && !prev.erased && !prev.deleted
        ? diffEl(JSON.stringify(prev.value), JSON.stringify(v.value))
        : h("p", {}, h("code", {}, JSON.stringify(v.value)));
    list.prepend(h("li", { class: "version" }, versionHead(v, kind), v.deleted ? null : body,
      h("ul", { class: "changes" }, versionChanges(prev, v, ["ttl"]))));
  });
  page.append(list);
}
