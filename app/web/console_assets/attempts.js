// The attempt log: a page at a time, newest first, filtered; a batch's events a click
// away.
import { $, duration, el, fill, laneName, when } from "./dom.js";
import { page } from "./page.js";
import { api, AuthError, state } from "./session.js";

export function attemptsPath() {
  const a = state.attempts;
  const base = state.kind === "root" ? `/subscribers/${encodeURIComponent(a.name)}/attempts` : "/subscriber/attempts";
  const query = new URLSearchParams({ limit: "50" });
  if ($("at-outcome").value) query.set("outcome", $("at-outcome").value);
  if ($("at-batch").value.trim()) query.set("batch", $("at-batch").value.trim());
  if (a.before) query.set("before", a.before);
  return `${base}?${query}`;
}

export function renderAttempts(page) {
  const rows = page.attempts.map((a) => {
    const batch = el("button", { type: "button", class: "link", title: "this batch's attempts" }, a.batch);
    batch.addEventListener("click", () => {
      $("at-batch").value = a.batch;
      showBatch(a.batch);
      newestAttempts();
    });
    const bad = a.outcome !== "2xx";
    return el(
      "tr",
      { "data-attempt": a.id },
      el("td", {}, when(a.at)),
      el("td", {}, batch),
      el("td", { class: "num" }, a.events),
      el("td", {}, laneName(a.lane)),
      el("td", { class: "num" }, a.attempt),
      el("td", bad ? { class: "bad outcome" } : { class: "outcome" }, a.outcome),
      el("td", {}, a.status === null ? a.reason : a.status),
      el("td", { class: "num" }, duration(a.duration_ms)),
      el("td", { class: "num" }, a.retry_after_ms === null ? "" : duration(a.retry_after_ms)),
      el("td", { class: "body" }, a.body),
      el("td", {}, a.worker),
    );
  });
  fill($("at-table").tBodies[0], rows, 11, "No attempt on record.");
  state.attempts.next = page.next;
  $("at-older").disabled = !page.next;
}

// a batch's events while it is queued; else why they are not here any more
async function showBatch(id) {
  const a = state.attempts;
  const base = state.kind === "root" ? `/subscribers/${encodeURIComponent(a.name)}` : "/subscriber";
  const box = $("at-events");
  box.hidden = false;
  try {
    const found = await api("GET", `${base}/batches/${encodeURIComponent(id)}`);
    const items = found.events.map((e) => el("li", {}, `${e.type} ${e.url} (${e.topic}, ${when(e.t)})`));
    box.replaceChildren(
      el("p", {}, `Batch ${id}: ${found.events.length} events queued in lane ${laneName(found.lane)}${found.in_flight ? ", in flight" : ""}`),
      el("ul", {}, ...items),
    );
  } catch (error) {
    if (error instanceof AuthError) return page.failed(error);
    box.replaceChildren(el("p", {}, error.status === 404 ? `Batch ${id} is not queued: delivered (see the lake), dead-lettered or dropped.` : error.message));
  }
}

export function selectAttempts(name) {
  state.attempts = { name, before: null, next: null };
  $("at-name").textContent = name;
  $("at-outcome").value = "";
  $("at-batch").value = "";
  $("at-events").hidden = true;
  $("attempts").hidden = false;
  page.refresh();
}

function newestAttempts() {
  state.attempts.before = null;
  page.refresh();
}

export function wireAttempts() {
  $("at-outcome").addEventListener("change", newestAttempts);
  $("at-batch").addEventListener("change", newestAttempts);
  $("at-newest").addEventListener("click", newestAttempts);
  $("at-older").addEventListener("click", () => {
    state.attempts.before = state.attempts.next;
    page.refresh();
  });
  $("at-close").addEventListener("click", () => {
    state.attempts = null;
    $("attempts").hidden = true;
  });
}
