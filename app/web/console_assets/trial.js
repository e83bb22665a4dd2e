// A subscriber's test call (POST /subscription/test, or root's by name): one request of
// [] to its callback, authenticated as its deliveries are; what came back, as a notice.
import { perform } from "./page.js";
import { api, state } from "./session.js";

export function tryCallback(name) {
  const path = state.kind === "root" ? `/subscribers/${encodeURIComponent(name)}/test` : "/subscription/test";
  return perform(async () => {
    const t = await api("POST", path);
    const answer = t.status === null ? `no answer (${t.reason})` : `${t.status}`;
    const body = t.body ? `: ${t.body.slice(0, 200)}` : "";
    return `Test call to ${name}: ${answer} in ${t.took_ms} ms${body}`;
  });
}
