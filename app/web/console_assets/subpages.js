// Root's subscriber table a page at a time: GET /subscriptions?limit=PAGE in the order of
// the clients' names, the next page's cursor from the answer's Link header. The refresh
// redraws the page shown; First and Next move it. A client sees its own entry only.
import { $ } from "./dom.js";
import { page } from "./page.js";
import { state } from "./session.js";

export const PAGE = 100;

// the listing to ask for at this refresh
export function subscribersPath() {
  if (state.kind !== "root") return "/subscriptions";
  const query = new URLSearchParams({ limit: String(PAGE) });
  if (state.subscribers.after) query.set("after", state.subscribers.after);
  return `/subscriptions?${query}`;
}

// the rel="next" target's cursor of a Link header, or null on the last page
export function nextCursor(link) {
  const found = /<([^>]*)>;\s*rel="next"/.exec(link || "");
  return found ? new URL(found[1], location.origin).searchParams.get("after") : null;
}

export function renderSubscriberPage(shown, next) {
  const s = state.subscribers;
  s.next = next;
  const first = s.index * PAGE + 1;
  $("sub-range").textContent = shown ? `subscribers ${first} to ${first + shown - 1}` : "";
  $("sub-first").disabled = s.index === 0;
  $("sub-next").disabled = !next;
}

export function wireSubscriberPages() {
  $("sub-first").addEventListener("click", () => {
    Object.assign(state.subscribers, { after: null, next: null, index: 0 });
    page.refresh();
  });
  $("sub-next").addEventListener("click", () => {
    const s = state.subscribers;
    if (!s.next) return;
    Object.assign(s, { after: s.next, next: null, index: s.index + 1 });
    page.refresh();
  });
}
