// Small DOM helpers: elements built node by node, never parsed from strings (every text is a
// text node, so stored content never becomes markup), times, diffs, pagers, the status line
// and the confirm dialog.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// -- times ------------------------------------------------------------------------------------

export function fmtTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(undefined, {
    year: "numeric", month: "short", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

export function timeEl(iso) {
  return h("time", { datetime: iso, title: iso }, fmtTime(iso));
}

// A Date as the value of an <input type="datetime-local"> (the user's local time).
export function toLocalInput(date) {
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T`
    + `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`
    + `.${pad(date.getMilliseconds(), 3)}`;
}

export function fromLocalInput(value) {
  if (!value) return null;
  const d = new Date(value); // no zone in the value: the browser reads it as local time
  return Number.isNaN(d.getTime()) ? null : d;
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${i ? v.toFixed(1) : v} ${units[i]}`;
}

export const fmtNum = (n) => (n === null || n === undefined ? "none" : Number(n).toLocaleString());

export function json(value) {
  return JSON.stringify(value, null, 2);
}

// -- diffs ------------------------------------------------------------------------------------

const MAX_DIFF_TOKENS = 2000;

// Word-level diff of two texts: [[op, text]...], op " " kept, "-" removed, "+" added.
export function diffWords(before, after) {
  const a = String(before ?? "").split(/(\s+)/);
  const b = String(after ?? "").split(/(\s+)/);
  if (a.length > MAX_DIFF_TOKENS || b.length > MAX_DIFF_TOKENS) {
    return before === after ? [[" ", after]] : [["-", before], ["+", after]];
  }
  const dp = Array.from({ length: a.length + 1 }, () => new Uint16Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i -= 1) {
    for (let j = b.length - 1; j >= 0; j -= 1) {
      dp[i][j] = a[i] === b[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
    }
  }
  const out = [];
  const push = (op, text) => {
    if (!text) return;
    if (out.length && out[out.length - 1][0] === op) out[out.length - 1][1] += text;
    else out.push([op, text]);
  };
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) { push(" ", a[i]); i += 1; j += 1; }
    else if (dp[i + 1][j] >= dp[i][j + 1]) { push("-", a[i]); i += 1; }
    else { push("+", b[j]); j += 1; }
  }
  while (i < a.length) { push("-", a[i]); i += 1; }
  while (j < b.length) { push("+", b[j]); j += 1; }
  return out;
}

export function diffEl(before, after) {
  const parts = diffWords(before, after).map(([op, text]) => {
    if (op === "-") return h("del", { title: "removed" }, text);
    if (op === "+") return h("ins", { title: "added" }, text);
    return text;
  });
  return h("p", { class: "diff" }, parts);
}

// -- paging -----------------------------------------------------------------------------------

// Prev/next buttons for a page of a list; onPage(n) is called with the page wanted.
// Previous / next buttons and the rows shown. After a page turn the focus goes back to the
// button that was pressed (the pager is redrawn), or its twin when that one is now disabled, so
// a keyboard user can keep paging.
export function pager({ page, size, shown, total, more, onPage, label,
  prev = "← Newer", next = "Older →" }) {
  const from = shown ? page * size + 1 : 0;
  const to = page * size + shown;
  const of = total === undefined ? "" : ` of ${fmtNum(total)}`;
  const name = `${label} pages`;
  const turn = async (to, dir) => {
    await onPage(to);
    const nav = [...document.querySelectorAll("nav.pager")].find(
      (n) => n.getAttribute("aria-label") === name);
    const buttons = nav ? [...nav.querySelectorAll("button")] : [];
    const same = buttons.find((b) => b.dataset.dir === dir && !b.disabled);
    (same || buttons.find((b) => !b.disabled))?.focus();
  };
  return h("nav", { class: "pager", "aria-label": name },
    h("button", { type: "button", disabled: page === 0, dataset: { dir: "prev" },
      onclick: () => turn(page - 1, "prev") }, prev),
    h("span", { class: "muted", "aria-live": "polite" },
      shown ? `${fmtNum(from)}–${fmtNum(to)}${of}` : "none"),
    h("button", { type: "button", disabled: !more, dataset: { dir: "next" },
      onclick: () => turn(page + 1, "next") }, next));
}

// -- status and confirmation -----------------------------------------------------------------

export function say(message, kind = "info") {
  const el = document.getElementById("status");
  clear(el);
  el.className = `status ${kind}`;
  if (message) el.append(message);
}

export function errorText(err) {
  if (err && err.code) return `${err.message} [${err.code}]`;
  return String(err && err.message ? err.message : err);
}

export function errorBox(err) {
  return h("p", { class: "error", role: "alert" }, errorText(err));
}

// The modal confirm dialog: resolves true when the user confirms. With ``typed``, the confirm
// button stays disabled until that exact text is typed (for erasures).
export function confirmDialog({ title, body, action, typed }) {
  const dialog = document.getElementById("confirm");
  const ok = document.getElementById("confirm-ok");
  const cancel = document.getElementById("confirm-cancel");
  document.getElementById("confirm-title").textContent = title;
  const content = clear(document.getElementById("confirm-body"));
  append(content, [body]);
  ok.textContent = action;
  ok.disabled = false;
  if (typed) {
    const input = h("input", { id: "confirm-typed", autocomplete: "off", spellcheck: "false" });
    ok.disabled = true;
    input.addEventListener("input", () => { ok.disabled = input.value !== typed; });
    content.append(h("label", { for: "confirm-typed" }, `Type ${typed} to confirm`), input);
  }
  return new Promise((resolve) => {
    const done = (value) => {
      ok.removeEventListener("click", yes);
      cancel.removeEventListener("click", no);
      dialog.removeEventListener("cancel", no);
      if (dialog.open) dialog.close();
      resolve(value);
    };
    const yes = () => done(true);
    const no = () => done(false);
    ok.addEventListener("click", yes);
    cancel.addEventListener("click", no);
    dialog.addEventListener("cancel", no);
    dialog.showModal();
    (typed ? content.querySelector("input") : cancel).focus();
  });
}
