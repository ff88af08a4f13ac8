// Live: the namespace's change feed (Server-Sent Events) as it happens, newest on top. It
// reconnects by itself with the last id seen, so nothing is missed or shown twice.

import { follow, nsPath } from "./api.js";
import { errorText, h, timeEl } from "./dom.js";
import { targetLink } from "./audit.js";

const KEEP = 500; // rows kept on screen

export async function renderLive(page, ctx) {
  const entity = ctx.params.get("entity") || "";
  page.append(h("h1", {}, "Live changes"));
  const filterInput = h("input", { id: "live-entity", value: entity, autocomplete: "off" });
  const form = h("form", { class: "inline" },
    h("label", { for: "live-entity" }, "Only entity"), filterInput,
    h("button", { type: "submit" }, "Follow"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    ctx.go("live", { entity: filterInput.value.trim() });
  });
  const state = h("p", { class: "feed-state", role: "status" }, "connecting…");
  const pause = h("button", { type: "button", "aria-pressed": "false" }, "Pause");
  const body = h("tbody");
  const table = h("table", { class: "grid live" },
    h("caption", {}, ctx.asOf ? `From ${ctx.asOf} (history first), then live; newest on top`
      : "From now on; newest on top"),
    h("thead", {}, h("tr", {}, ["at", "agent", "action", "entity", "target", "version"]
      .map((c) => h("th", { scope: "col" }, c)))), body);
  page.append(form, h("div", { class: "row" }, state, pause), table);
  let paused = false;
  const held = [];
  const show = (change) => {
    body.prepend(h("tr", { class: "fresh" },
      h("td", {}, timeEl(change.at)), h("td", {}, change.agent || "—"), h("td", {}, change.action),
      h("td", {}, change.entity ? h("a", { href: ctx.link("entity", { entity: change.entity }) },
        change.entity) : "—"),
      h("td", {}, targetLink(change, ctx)), h("td", { class: "num" }, change.version ?? "")));
    while (body.children.length > KEEP) body.lastChild.remove();
  };
  pause.addEventListener("click", () => {
    paused = !paused;
    pause.textContent = paused ? "Resume" : "Pause";
    pause.setAttribute("aria-pressed", String(paused));
    if (!paused) held.splice(0).forEach(show);
  });
  let count = 0;
  let last = "";
  const params = { entity: entity || undefined, since: ctx.asOf || undefined };
  // runs until the view changes (its signal aborts); reconnects after a pause on errors
  (async () => {
    for (let attempt = 0; !ctx.signal.aborted; attempt += 1) {
      try {
        state.textContent = attempt ? "reconnecting…" : "connecting…";
        state.dataset.state = "connecting";
        const connected = follow(nsPath(ctx.ns, "/changes"), last ? { entity: params.entity }
          : params, {
          signal: ctx.signal,
          lastEventId: last,
          onOpen: () => {
            state.textContent = `live · ${count} change${count === 1 ? "" : "s"} seen`;
            state.dataset.state = "live";
          },
          onEvent: ({ id, event, data }) => {
            if (event !== "change") return;
            last = id;
            count += 1;
            state.textContent = `live · ${count} change${count === 1 ? "" : "s"} seen`;
            if (paused) held.push(data);
            else show(data);
          },
        });
        last = (await connected) || last;
        attempt = 0;
      } catch (err) {
        if (ctx.signal.aborted || err.name === "AbortError") return;
        state.textContent = `disconnected: ${errorText(err)}; retrying`;
        state.dataset.state = "error";
        if (err.status === 401 || err.status === 403 || err.code === "unauthorized") return;
      }
      await new Promise((r) => { setTimeout(r, Math.min(10000, 500 * 2 ** attempt)); });
    }
  })();
}
