// The console's shell: who the key is, the URL state (view, namespace, as_of: never the key),
// the time slider, and which view renders the main region.

import { ApiError, get, nsPath, session } from "./api.js";
import { clear, errorBox, fromLocalInput, h, say, toLocalInput } from "./dom.js";
import { renderAudit } from "./audit.js";
import {
  renderEntity, renderFact, renderHome, renderMemory, renderNamespace, renderStream,
} from "./browse.js";
import { renderLineage } from "./lineage.js";
import { renderLive } from "./live.js";
import { renderQuery } from "./query.js";

const VIEWS = {
  "": renderHome,
  ns: renderNamespace,
  entity: renderEntity,
  memory: renderMemory,
  fact: renderFact,
  stream: renderStream,
  query: renderQuery,
  lineage: renderLineage,
  audit: renderAudit,
  live: renderLive,
};
const TITLES = {
  "": "Namespaces", ns: "Entities", entity: "Entity", memory: "Memory history",
  fact: "Fact history", stream: "Stream", query: "Query", lineage: "Lineage", audit: "Audit", live: "Live",
};
const NEEDS_NS = new Set(["ns", "entity", "memory", "fact", "stream", "query", "lineage", "audit", "live"]);

let who = null;
let current = null; // the AbortController of the view on screen
const span = { lo: null, ns: null };

// -- URL state --------------------------------------------------------------------------------

function parseHash() {
  const raw = window.location.hash.replace(/^#\/?/, "");
  const q = raw.indexOf("?");
  const view = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? "" : raw.slice(q + 1));
  return { view: VIEWS[view] ? view : "", params };
}

// The hash for a view: ns and as_of carry over unless given; the API key never appears here.
export function link(view, params = {}) {
  const { params: now } = parseHash();
  const out = new URLSearchParams();
  const merged = { ns: now.get("ns"), as_of: now.get("as_of"), ...params };
  for (const [name, value] of Object.entries(merged)) {
    if (value !== undefined && value !== null && value !== "") out.set(name, value);
  }
  const qs = out.toString();
  return `#/${view}${qs ? `?${qs}` : ""}`;
}

export function go(view, params) {
  window.location.hash = link(view, params);
}

// -- who the key is ---------------------------------------------------------------------------

function loginView(main, message) {
  const input = h("input", {
    id: "api-key", type: "password", autocomplete: "off", required: true,
    spellcheck: "false", "aria-describedby": "key-help",
  });
  const form = h("form", { class: "login card", "aria-labelledby": "login-title" },
    h("h1", { id: "login-title" }, "Sign in with an API key"),
    message ? errorBox(message) : null,
    h("label", { for: "api-key" }, "API key"),
    input,
    h("p", { id: "key-help", class: "muted" },
      "The key stays in this browser tab (session storage) and is sent only to this server, "
      + "in the Authorization header. It is never put in the page address."),
    h("button", { type: "submit" }, "Sign in"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    session.key = input.value.trim();
    start();
  });
  clear(main).append(form);
  input.focus();
}

function whoLine() {
  const box = clear(document.getElementById("who"));
  if (!who) return;
  const scopes = who.scopes.join(", ");
  const label = who.auth === "none" ? "open server (no keys)" : `key ${who.key} · ${who.tenant}`;
  box.append(h("span", { class: "muted" }, `${label} · ${scopes}`));
  if (who.agents && who.agents.length) {
    const select = h("select", { id: "agent-select" },
      who.agents.map((a) => h("option", { value: a, selected: session.agent === a }, a)));
    if (!who.agents.includes(session.agent)) session.agent = who.agents[0];
    select.addEventListener("change", () => { session.agent = select.value; });
    box.append(h("label", { for: "agent-select" }, "agent"), select);
  } else {
    const input = h("input", { id: "agent-input", value: session.agent, size: 10,
      placeholder: "console", autocomplete: "off" });
    input.addEventListener("change", () => { session.agent = input.value.trim(); });
    box.append(h("label", { for: "agent-input" }, "act as agent"), input);
  }
  if (who.auth === "keys") {
    box.append(h("button", { type: "button", onclick: () => { session.key = ""; start(); } },
      "Sign out"));
  }
}

// -- the time slider --------------------------------------------------------------------------

async function timeSpan(ns, signal) {
  if (span.ns !== ns) {
    span.ns = ns;
    span.lo = null;
    try {
      const first = await get(nsPath(ns, "/audit"), { limit: 1 }, signal);
      if (first.length) span.lo = new Date(first[0].at).getTime();
    } catch (err) {
      if (err.name === "AbortError") throw err;
    }
  }
  const hi = Date.now();
  return { lo: span.lo ?? hi - 7 * 86400e3, hi };
}

async function drawTimebar(ns, asOf, signal) {
  const bar = document.getElementById("timebar");
  bar.hidden = !ns;
  if (!ns) return;
  const { lo, hi } = await timeSpan(ns, signal);
  const range = document.getElementById("time-range");
  const input = document.getElementById("time-input");
  const shown = document.getElementById("time-shown");
  const t = asOf ? new Date(asOf).getTime() : hi;
  range.value = String(Math.round(Math.max(0, Math.min(1, (t - lo) / Math.max(1, hi - lo))) * 1000));
  range.setAttribute("aria-valuetext", asOf ? new Date(asOf).toLocaleString() : "now");
  input.value = toLocalInput(new Date(t));
  shown.textContent = asOf ? `viewing ${new Date(asOf).toLocaleString()}` : "now (live)";
  bar.classList.toggle("past", Boolean(asOf));
  range.onchange = () => {
    const v = Number(range.value);
    if (v >= 1000) return setAsOf(null);
    return setAsOf(new Date(lo + ((hi - lo) * v) / 1000));
  };
  input.onchange = () => {
    const d = fromLocalInput(input.value);
    if (d) setAsOf(d.getTime() >= Date.now() ? null : d);
  };
  document.getElementById("time-now").onclick = () => setAsOf(null);
}

function setAsOf(date) {
  const { view, params } = parseHash();
  const rest = Object.fromEntries(params.entries());
  go(view, { ...rest, as_of: date ? date.toISOString() : "" });
}

// -- rendering --------------------------------------------------------------------------------

function tabs(view, ns) {
  const nav = document.getElementById("tabs");
  nav.hidden = !ns;
  for (const a of nav.querySelectorAll("a")) {
    a.href = link(a.dataset.view, { ns });
    if (a.dataset.view === view || (a.dataset.view === "ns" && ["entity", "memory", "fact", "stream"]
      .includes(view))) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.getElementById("home-link").href = link("", { ns: "" });
}

async function render() {
  if (!who) return;
  if (current) current.abort();
  current = new AbortController();
  const { signal } = current;
  let { view, params } = parseHash();
  const ns = params.get("ns") || "";
  if (NEEDS_NS.has(view) && !ns) view = "";
  const asOf = params.get("as_of") || null;
  const main = document.getElementById("main");
  tabs(view, ns);
  document.title = `${TITLES[view]}${ns ? ` · ${ns}` : ""} · SynapseDB console`;
  say("");
  const ctx = {
    ns, params, asOf, who, signal, link, go, refresh: () => render(),
    can: (scope) => who.scopes.includes(scope),
    get canWrite() { return who.scopes.includes("write") && !asOf; },
    get canAdmin() { return who.scopes.includes("admin") && !asOf; },
  };
  const page = h("div", { class: "view", "data-view": view || "home" });
  clear(main).append(page);
  if (asOf) {
    page.append(h("p", { class: "banner", role: "note" },
      `Everything below is as the agents knew it at ${new Date(asOf).toLocaleString()} `
      + `(${asOf}). Edits are off while you look at the past.`));
  }
  try {
    await drawTimebar(ns, asOf, signal);
    await VIEWS[view](page, ctx);
  } catch (err) {
    if (err.name === "AbortError") return;
    page.append(errorBox(err));
  }
}

async function start() {
  const main = document.getElementById("main");
  try {
    who = await get("/v1/whoami");
  } catch (err) {
    who = null;
    document.getElementById("tabs").hidden = true;
    document.getElementById("timebar").hidden = true;
    clear(document.getElementById("who"));
    if (err instanceof ApiError && err.status === 401) {
      const had = Boolean(session.key);
      session.key = "";
      loginView(main, had ? err : null);
    } else {
      clear(main).append(errorBox(err));
    }
    return;
  }
  whoLine();
  await render();
}

window.addEventListener("hashchange", () => { render(); });
window.addEventListener("console:unauthorized", () => {
  if (who && who.auth === "keys") { // the key was revoked: ask again (once)
    who = null;
    start();
  }
});
start();
