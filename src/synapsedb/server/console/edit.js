// Edits, offered only where the key has the scope (write: correct, pin, forget; admin: purge)
// and never while looking at the past. The API checks every one of them again.

import { get, nsPath, request } from "./api.js";
import { clear, confirmDialog, errorText, fmtNum, h, say } from "./dom.js";

function act(label, run, cls) {
  return h("button", { type: "button", class: cls, onclick: run }, label);
}

async function attempt(what, call, onDone) {
  try {
    await call();
    say(`${what}: done.`, "ok");
    if (onDone) await onDone();
  } catch (err) {
    say(`${what} failed: ${errorText(err)}`, "error");
  }
}

// An inline editor in place of ``box``'s actions; resolves when saved or cancelled.
function inlineEditor(box, { label, value, multiline, save, onDone }) {
  const id = `edit-${Math.random().toString(36).slice(2)}`;
  const input = multiline
    ? h("textarea", { id, rows: 4, required: true }, value)
    : h("input", { id, value, required: true, autocomplete: "off" });
  const form = h("form", { class: "editor" },
    h("label", { for: id }, label), input,
    h("div", { class: "actions" },
      h("button", { type: "submit" }, "Save"),
      h("button", { type: "button", onclick: () => onDone() }, "Cancel")));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    attempt(label, () => save(input.value), onDone);
  });
  clear(box).append(form);
  input.focus();
}

export function memoryActions(m, ctx, redraw) {
  const box = h("div", { class: "actions", role: "group", "aria-label": "Edit this memory" });
  if (!ctx.canWrite || m.deleted) return box;
  const path = nsPath(ctx.ns, `/memories/${encodeURIComponent(m.id)}`);
  const patch = (changes) => request("PATCH", path, { body: { changes, if_version: m.version } });
  box.append(
    act("Correct", () => inlineEditor(box, {
      label: "Corrected content (saved as a new version)", value: m.content, multiline: true,
      save: (content) => patch({ content }), onDone: redraw,
    })),
    act(m.pinned ? "Unpin" : "Pin",
      () => attempt(m.pinned ? "Unpin" : "Pin", () => patch({ pinned: !m.pinned }), redraw)),
    act("Forget", async () => {
      const ok = await confirmDialog({
        title: "Forget this memory?",
        body: h("p", {}, "It gets a tombstone version: it no longer appears in lists or queries, "
          + "but its history keeps every version and reads as of an earlier time still see it."),
        action: "Forget",
      });
      if (ok) {
        await attempt("Forget", () => request("DELETE", path,
          { params: { if_version: m.version } }), redraw);
      }
    }, "danger"),
  );
  return box;
}

export function factActions(f, ctx, redraw) {
  const box = h("div", { class: "actions", role: "group", "aria-label": "Edit this fact" });
  if (!ctx.canWrite || f.deleted) return box;
  const path = nsPath(ctx.ns, "/facts");
  box.append(
    act("Edit value", () => inlineEditor(box, {
      label: `New value of ${f.key} (JSON)`, value: JSON.stringify(f.value), multiline: false,
      save: (text) => {
        let value;
        try { value = JSON.parse(text); } catch (exc) {
          throw new Error(`the value is not JSON (${exc.message})`);
        }
        return request("PUT", path,
          { body: { entity: f.entity, key: f.key, value, if_version: f.version } });
      },
      onDone: redraw,
    })),
    act("Unset", () => attempt("Unset", () => request("DELETE", path,
      { params: { entity: f.entity, key: f.key, if_version: f.version } }), redraw), "danger"),
  );
  return box;
}

// What an erasure of ``entity`` would take, counted from the API (at most 10,000 of each).
async function whatWouldGo(ctx, entity) {
  const cap = 10000;
  const [mems, facts, events] = await Promise.all([
    get(nsPath(ctx.ns, "/memories"), { entity, limit: cap }, ctx.signal),
    get(nsPath(ctx.ns, "/facts"), { entity }, ctx.signal),
    get(nsPath(ctx.ns, "/events"), { stream: entity, limit: cap }, ctx.signal),
  ]);
  const n = (list) => (list.length >= cap ? `at least ${fmtNum(cap)}` : fmtNum(list.length));
  return { memories: n(mems), facts: n(facts), events: n(events) };
}

export function entityActions(entity, ctx) {
  const box = h("div", { class: "actions", role: "group", "aria-label": "Edit this entity" });
  const after = () => ctx.go("ns", {});
  if (ctx.canWrite) {
    box.append(act("Forget entity", async () => {
      const counts = await whatWouldGo(ctx, entity);
      const ok = await confirmDialog({
        title: `Forget ${entity}?`,
        body: h("p", {}, `Tombstones its ${counts.memories} memories and ${counts.facts} KV `
          + "facts. Nothing is erased: history and reads as of an earlier time still see them."),
        action: "Forget entity",
      });
      if (ok) {
        await attempt(`Forget ${entity}`, () => request("POST", nsPath(ctx.ns, "/forget"),
          { body: { entity } }), after);
      }
    }, "danger"));
  }
  if (ctx.canAdmin) {
    box.append(act("Purge entity", async () => {
      const counts = await whatWouldGo(ctx, entity);
      const ok = await confirmDialog({
        title: `Erase ${entity} for good?`,
        body: [
          h("p", {}, "Purge overwrites, in one transaction, and cannot be undone:"),
          h("ul", { class: "erase-list" },
            h("li", {}, `the content, metadata and vector of every version of its `
              + `${counts.memories} memories;`),
            h("li", {}, `every version of its ${counts.facts} KV facts;`),
            h("li", {}, `the payloads of the ${counts.events} events of stream ${entity}, `
              + "and of other events about it;"),
            h("li", {}, "the texts of logged queries that name it or returned its memories, "
              + "and the text of answers built on its memories.")),
          h("p", {}, "Ids, versions, times and agents stay, marked erased, and the audit trail "
            + "records who erased it and when (the entity only as a keyed hash)."),
        ],
        action: "Erase",
        typed: entity,
      });
      if (ok) {
        await attempt(`Purge ${entity}`, () => request("POST", nsPath(ctx.ns, "/forget"),
          { body: { entity, purge: true } }), after);
      }
    }, "danger"));
  }
  return box;
}
