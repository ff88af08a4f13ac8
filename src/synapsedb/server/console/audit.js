// The audit trail: who wrote and read what, when, filtered by agent, entity and time, a page
// at a time (oldest first, as the API gives it).

import { get, nsPath } from "./api.js";
import { clear, errorBox, fromLocalInput, h, timeEl, toLocalInput } from "./dom.js";

export const AUDIT_PAGE = 100;

// Pages of the audit trail. The API takes ``since`` (inclusive) and ``limit``; a page starts
// at the last time of the one before and skips the entries of that time already shown, so
// paging neither repeats nor loses entries that share a microsecond.
export class AuditCursor {
  constructor(ns, filters, signal) {
    this.ns = ns;
    this.filters = filters;
    this.signal = signal;
    this.since = filters.since || null;
    this.seenAtSince = 0;
    this.done = false;
  }

  async next(size = AUDIT_PAGE) {
    if (this.done) return [];
    const got = await get(nsPath(this.ns, "/audit"), {
      ...this.filters, since: this.since, limit: size + this.seenAtSince,
    }, this.signal);
    const fresh = got.slice(this.seenAtSince);
    if (got.length < size + this.seenAtSince) this.done = true;
    if (fresh.length) {
      const last = fresh[fresh.length - 1].at;
      const same = got.filter((e) => e.at === last).length;
      this.seenAtSince = last === this.since ? this.seenAtSince + fresh.length : same;
      this.since = last;
    }
    return fresh;
  }
}

export function targetLink(entry, ctx) {
  const t = entry.target;
  if (["write", "update", "delete", "demote", "promote"].includes(entry.action)) {
    return h("a", { href: ctx.link("memory", { id: t }) }, t);
  }
  if (["set", "unset"].includes(entry.action) && entry.entity) {
    return h("a", { href: ctx.link("fact", { entity: entry.entity, key: t }) }, t);
  }
  if (entry.action === "answer") return h("a", { href: ctx.link("lineage", { answer: t }) }, t);
  return h("code", {}, t);
}

function entryRow(e, ctx) {
  return h("tr", {},
    h("td", {}, timeEl(e.at)), h("td", {}, e.agent || "—"), h("td", {}, e.action),
    h("td", {}, e.entity ? h("a", { href: ctx.link("entity", { entity: e.entity }) }, e.entity)
      : "—"),
    h("td", {}, targetLink(e, ctx)), h("td", { class: "num" }, e.version ?? ""));
}

export async function renderAudit(page, ctx) {
  const p = ctx.params;
  page.append(h("h1", {}, "Audit"));
  const input = (id, label, value, type = "text") => {
    const el = h("input", { id, type, value: value || "", autocomplete: "off", step: type ===
      "datetime-local" ? "0.001" : undefined });
    return [el, h("div", { class: "field" }, h("label", { for: id }, label), el)];
  };
  const localOf = (iso) => (iso ? toLocalInput(new Date(iso)) : "");
  const [agent, agentField] = input("a-agent", "Agent", p.get("agent"));
  const [entity, entityField] = input("a-entity", "Entity", p.get("entity"));
  const [since, sinceField] = input("a-since", "Since", localOf(p.get("since")), "datetime-local");
  const [until, untilField] = input("a-until", "Until", localOf(p.get("until") || ctx.asOf),
    "datetime-local");
  const form = h("form", { class: "card row", "aria-label": "Audit filters" },
    agentField, entityField, sinceField, untilField, h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const iso = (el) => fromLocalInput(el.value)?.toISOString() || "";
    ctx.go("audit", { agent: agent.value.trim(), entity: entity.value.trim(),
      since: iso(since), until: iso(until) });
  });
  const body = h("tbody");
  const table = h("table", { class: "grid audit" },
    h("caption", {}, "Oldest first"),
    h("thead", {}, h("tr", {}, ["at", "agent", "action", "entity", "target", "version"]
      .map((c) => h("th", { scope: "col" }, c)))), body);
  const more = h("button", { type: "button" }, "Load the next 100");
  const note = h("p", { class: "muted" });
  page.append(form, table, more, note);
  const filters = { agent: p.get("agent"), entity: p.get("entity"), since: p.get("since"),
    until: p.get("until") || ctx.asOf };
  const cursor = new AuditCursor(ctx.ns, filters, ctx.signal);
  let shown = 0;
  const load = async () => {
    more.disabled = true;
    try {
      const rows = await cursor.next();
      shown += rows.length;
      body.append(...rows.map((e) => entryRow(e, ctx)));
      note.textContent = `${shown.toLocaleString()} entries shown${cursor.done ? " (the end)" : ""}.`;
      more.hidden = cursor.done;
    } catch (err) {
      if (err.name !== "AbortError") clear(note).append(errorBox(err));
    } finally {
      more.disabled = false;
    }
  };
  more.addEventListener("click", load);
  await load();
}
