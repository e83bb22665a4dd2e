// A route's transform under its subscriber's topics, with a button that runs it on the
// subscriber's last delivered event as published (GET .../delivered/last, then POST
// /transforms/test): what it gives, or why it fails, as a notice.
import { el } from "./dom.js";
import { perform } from "./page.js";
import { api, state } from "./session.js";

function lastPath(name) {
  return state.kind === "root" ? `/subscribers/${encodeURIComponent(name)}/delivered/last` : "/subscriber/delivered/last";
}

export function tryTransform(name, route) {
  return perform(async () => {
    const last = await api("GET", lastPath(name));
    const t = await api("POST", "/transforms/test", { transform: route.transform, event: last.event });
    const on = `${route.topic} transform of ${name} on ${last.event.url}`;
    if (t.failed) return `${on}: fails (${t.failed.bound}): ${t.failed.message}`;
    if (t.dropped) return `${on}: gives nothing, the event is not sent (${t.took_ms} ms)`;
    return `${on}: ${JSON.stringify(t.output)} (${t.took_ms} ms)`;
  });
}

export function transformLine(name, route) {
  const button = el("button", { type: "button", class: "link", title: "run it on the last event delivered" }, "try");
  button.addEventListener("click", () => tryTransform(name, route));
  return el("div", { class: "filter transform" }, `${route.topic}: ${route.transform} `, button);
}
