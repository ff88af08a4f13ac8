// The console's only way to the server: the public HTTP API, with the user's key.
// The key lives in sessionStorage (this tab, until it closes), never in the URL.

const KEY_SLOT = "synapsedb.console.key";
const AGENT_SLOT = "synapsedb.console.agent";

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || {};
  }
}

// Paths are resolved against the page (/ui), so a console served under a prefix still works.
const ROOT = new URL(".", window.location.href);

function url(path, params) {
  const u = new URL(path.replace(/^\//, ""), ROOT);
  for (const [name, value] of Object.entries(params || {})) {
    if (value === undefined || value === null || value === "") continue;
    if (Array.isArray(value)) value.forEach((v) => u.searchParams.append(name, v));
    else u.searchParams.set(name, String(value));
  }
  return u;
}

export function nsPath(ns, rest) {
  return `/v1/namespaces/${encodeURIComponent(ns)}${rest}`;
}

export const session = {
  get key() { return sessionStorage.getItem(KEY_SLOT) || ""; },
  set key(value) {
    if (value) sessionStorage.setItem(KEY_SLOT, value);
    else sessionStorage.removeItem(KEY_SLOT);
  },
  get agent() { return sessionStorage.getItem(AGENT_SLOT) || ""; },
  set agent(value) {
    if (value) sessionStorage.setItem(AGENT_SLOT, value);
    else sessionStorage.removeItem(AGENT_SLOT);
  },
};

function headers(extra) {
  const out = { Accept: "application/json", ...(extra || {}) };
  if (session.key) out.Authorization = `Bearer ${session.key}`;
  if (session.agent) out["X-Agent"] = session.agent;
  return out;
}

async function failure(resp) {
  let body = null;
  try { body = await resp.json(); } catch { /* not JSON: keep the status */ }
  const err = body && body.error;
  if (err) return new ApiError(resp.status, err.code, err.message, err.details);
  return new ApiError(resp.status, "http", `HTTP ${resp.status}`, {});
}

export async function request(method, path, { params, body, signal } = {}) {
  const init = { method, headers: headers(), signal, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(url(path, params), init);
  } catch (exc) {
    if (exc.name === "AbortError") throw exc;
    throw new ApiError(0, "network", `the server could not be reached (${exc.message})`, {});
  }
  if (!resp.ok) {
    const err = await failure(resp);
    if (err.status === 401) window.dispatchEvent(new CustomEvent("console:unauthorized"));
    throw err;
  }
  return resp.status === 204 ? null : resp.json();
}

export const get = (path, params, signal) => request("GET", path, { params, signal });

// Server-Sent Events over fetch (EventSource cannot send an Authorization header).
// Calls onEvent({id, event, data}) for each event until the signal aborts or the feed ends;
// resolves with the last id seen, so a caller can resume with Last-Event-ID.
export async function follow(path, params, { onEvent, onOpen, signal, lastEventId }) {
  const extra = { Accept: "text/event-stream" };
  if (lastEventId) extra["Last-Event-ID"] = lastEventId;
  const resp = await fetch(url(path, params), {
    headers: headers(extra), signal, cache: "no-store", credentials: "omit",
  });
  if (!resp.ok) throw await failure(resp);
  if (onOpen) onOpen();
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let last = lastEventId || "";
  let frame = { id: "", event: "message", data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return last;
    buffer += value;
    let nl;
    while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + (buffer.startsWith("\r\n", nl) ? 2 : 1));
      if (line === "") {
        if (frame.data.length) {
          if (frame.id) last = frame.id;
          let data = frame.data.join("\n");
          try { data = JSON.parse(data); } catch { /* plain text data */ }
          if (frame.event === "error") throw new ApiError(0, data?.error?.code || "feed",
            data?.error?.message || "the feed ended with an error", {});
          onEvent({ id: frame.id, event: frame.event, data });
        }
        frame = { id: "", event: "message", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue; // keep-alive comment
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "data") frame.data.push(val);
      else if (field === "event") frame.event = val;
      else if (field === "id") frame.id = val;
    }
  }
}
