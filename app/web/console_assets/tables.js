// The tables the refresh fills: subscribers (with their buttons), topics, workers and
// replays.
import { askPausing } from "./pausing.js";
import { tryCallback } from "./trial.js";
import { transformLine } from "./transform.js";
import { selectAttempts } from "./attempts.js";
import { selectDeadLetters } from "./deadletters.js";
import { $, duration, el, fill, laneName, now, when } from "./dom.js";
import { api } from "./session.js";

function subscriberRow(s) {
  const lanes = s.lanes
    .map((l) => `${laneName(l.lane)}: ${l.events} (${l.batches} b, ${duration(Math.max(0, now() - l.oldest))})`)
    .join(" · ");
  const attempts = Object.entries(s.attempts).filter(([, n]) => n).map(([o, n]) => `${o} ${n}`).join(" · ");
  const next = s.next_attempt_at && s.next_attempt_at > now() ? `in ${duration(s.next_attempt_at - now())}` : "now";
  const button = el("button", { type: "button", "data-subscriber": s.name || "" }, "dead letters");
  button.addEventListener("click", () => selectDeadLetters(s.name));
  const tried = el("button", { type: "button", "data-subscriber": s.name || "", title: attempts || "none yet" }, "attempts");
  tried.addEventListener("click", () => selectAttempts(s.name));
  const pausing = el("button", { type: "button", "data-subscriber": s.name || "" }, s.paused ? "resume" : "pause");
  pausing.addEventListener("click", () => askPausing(s.name, !s.paused));
  const test = el("button", { type: "button", "data-subscriber": s.name || "", title: s.destination ? "its broker, credentials and stream checked; nothing published" : "one request to its callback, as a delivery" }, "test");
  test.addEventListener("click", () => tryCallback(s.name));
  const cell = (value, cls) => el("td", cls ? { class: cls } : {}, value);
  const d = s.dropped;
  const dropped = [["expired", d.expired], ["autodropped", d.autodropped], ["dead letters trimmed", d.deadletters_trimmed],
    ["given nothing by a transform", d.transformed_out]]
    .filter(([, n]) => n).map(([why, n]) => `${n} ${why}`).join(" · ");
  // each route's content filter under the topics, and what the filters kept out
  const filters = s.routes.filter((r) => r.filter).map((r) => el("div", { class: "filter" }, `${r.topic}: ${JSON.stringify(r.filter)}`));
  // a broker in place of the callback (docs/destinations.md): where, never its secrets
  const to = s.destination;
  const where = to && ({
    rabbitmq: () => `exchange "${to.exchange}" · ${to.routing_key}`,
    sqs: () => `${to.region} · group ${to.message_group}`,
  }[to.type] || (() => `${to.subject}${to.stream ? ` (stream ${to.stream})` : ""}`))();
  if (to) filters.unshift(el("div", { class: "destination" }, `to ${to.type} ${to.url || to.queue_url} · ${where}`));
  if (s.events.filtered) filters.push(el("div", { class: "filter" }, `${s.events.filtered} kept out by filters`));
  // each route's transform, which runs on its last delivered event at a click
  filters.push(...s.routes.filter((r) => r.transform).map((r) => transformLine(s.name, r)));
  const c = s.circuit;
  const circuit = c.state === "open"
    ? `open ${duration(Math.max(0, now() - c.opened_at))}, probe ${c.next_probe_at > now() ? `in ${duration(c.next_probe_at - now())}` : "now"}`
    : c.failures_in_a_row ? `closed, ${c.failures_in_a_row} failed in a row` : "closed";
  const row = el(
    "tr",
    { "data-subscriber": s.name || "" },
    cell(s.name || "?"),
    el("td", { class: "topics" }, s.topics.join(", "), ...filters),
    cell(`${s.health_points}/100`, s.health_points < 50 ? "num bad" : "num"),
    cell(s.events.queued, "num queued"),
    cell(`${s.in_flight}/${s.concurrency}${s.draining ? `, draining ${s.draining}` : ""}`, "num in-flight"),
    cell(lanes || "—"),
    cell(s.events.oldest ? duration(Math.max(0, now() - s.events.oldest)) : "—", "num"),
    cell(s.events.sent, "num sent"),
    cell(s.failures, s.failures ? "num bad failures" : "num failures"),
    cell(s.deadletters, s.deadletters ? "num bad deadletters" : "num deadletters"),
    cell(dropped || "0", dropped ? "num bad dropped" : "num dropped"),
    cell(circuit, c.state === "open" ? "bad circuit" : "circuit"),
    cell(s.paused ? `paused by ${s.paused.by} ${duration(Math.max(0, now() - s.paused.at))} ago` : next, s.paused ? "bad next" : "next"),
    el("td", {}, button),
    el("td", {}, tried),
    el("td", {}, pausing),
    el("td", {}, test),
  );
  return row;
}

export function renderSubscribers(list) {
  fill($("subscribers").tBodies[0], list.map(subscriberRow), 17, "No subscription.");
}

// a type's current schema, fetched when its button is pressed and shown under it
async function showSchema(topic, type, cell) {
  const found = await api("GET", `/topics/${encodeURIComponent(topic)}/schemas/${type}`);
  const note = found.deprecated ? " (deprecated)" : "";
  cell.querySelector("pre")?.remove();
  cell.append(el("pre", { class: "schema" }, `${type} v${found.version}${note}\n${JSON.stringify(found.schema, null, 2)}`));
}

function schemasCell(t) {
  const cell = el("td", { class: "schemas" });
  const types = Object.entries(t.schemas || {});
  if (!types.length) cell.append("—");
  for (const [type, version] of types) {
    const button = el("button", { type: "button", class: "link" }, `${type} v${version}`);
    button.addEventListener("click", () => showSchema(t.name, type, cell));
    cell.append(button, " ");
  }
  return cell;
}

export function renderTopics(list) {
  const rows = list.map((t) =>
    el(
      "tr",
      { "data-topic": t.name },
      el("td", {}, t.name),
      el("td", {}, t.publisher_name || "—"),
      el("td", { class: "num" }, t.events),
      schemasCell(t),
    ),
  );
  fill($("topics").tBodies[0], rows, 4, "No topic.");
}

export function renderWorkers(list) {
  const rows = list.map((w) =>
    el(
      "tr",
      { "data-worker": w.worker },
      el("td", {}, w.worker),
      el("td", { class: "num" }, w.heartbeat_age_ms === null ? "none" : `${duration(w.heartbeat_age_ms)} ago`),
      el("td", { class: "num" }, w.jobs_in_flight),
      el("td", w.alive ? {} : { class: "bad" }, w.alive ? "alive" : "silent: its jobs go back to the queue"),
    ),
  );
  fill($("workers-table").tBodies[0], rows, 4, "No worker is running.");
}

export function renderOrigins(list) {
  const rows = list.map((o) =>
    el(
      "tr",
      { "data-origin": o.origin },
      el("td", {}, o.origin),
      el("td", { class: "num" }, `${o.limit} of ${o.ceiling}`),
      el("td", { class: "num" }, o.open),
      el("td", { class: "num" }, o.connecting),
      el("td", o.waiting ? { class: "num bad" } : { class: "num" }, o.waiting),
      el("td", { class: "num" }, `${o.answer_ms} ms`),
      el("td", {}, `${o.reason}, ${duration(o.changed_ms)} ago`),
      el("td", { class: "num" }, o.workers),
    ),
  );
  fill($("origins-table").tBodies[0], rows, 8, "No worker has delivered to an origin lately.");
}

export function renderReplays(list) {
  const rows = list.map((r) =>
    el(
      "tr",
      { "data-replay": r.id },
      el("td", {}, r.id),
      el("td", {}, r.target),
      el("td", {}, JSON.stringify(r.selection)),
      el("td", { class: "num" }, `${r.position} of ${r.selected}`),
      el("td", r.state === "failed" ? { class: "bad" } : {}, r.note ? `${r.state}: ${r.note}` : r.state),
      el("td", {}, r.by),
      el("td", {}, when(r.started_at)),
    ),
  );
  fill($("replays-table").tBodies[0], rows, 7, "No replay yet (busbar spark replay).");
}
