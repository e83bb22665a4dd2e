// The two charts of the last hour, inline SVG drawn here, and their summaries.
import { $, HOUR_MS, now, svg } from "./dom.js";

function drawChart(target, points, series, unit) {
  const W = 600, H = 200, L = 46, R = 8, T = 10, B = 22;
  const end = now(), start = end - HOUR_MS;
  const values = points.flatMap((p) => series.map((s) => s.value(p))).filter((v) => v !== null);
  const top = Math.max(1, ...values) * 1.1;
  const x = (t) => L + ((t - start) / HOUR_MS) * (W - L - R);
  const y = (v) => T + (1 - v / top) * (H - T - B);
  const nodes = [
    svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }),
    svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }),
    svg("text", { class: "label", x: 2, y: T + 10 }, `${Math.round(top)} ${unit}`),
    svg("text", { class: "label", x: 2, y: H - B }, `0`),
    svg("text", { class: "label", x: L, y: H - 6 }, "-60 min"),
    svg("text", { class: "label", x: (L + W) / 2 - 20, y: H - 6 }, "-30 min"),
    svg("text", { class: "label", x: W - R - 24, y: H - 6 }, "now"),
  ];
  for (const s of series) {
    const at = points.filter((p) => s.value(p) !== null && p.end >= start).map((p) => [x(p.end), y(s.value(p))]);
    if (at.length > 1) nodes.push(svg("polyline", { class: s.cls, points: at.map((xy) => xy.join(",")).join(" ") }));
    for (const [cx, cy] of at) nodes.push(svg("circle", { class: s.cls, cx, cy, r: 2.5 }));
  }
  target.replaceChildren(...nodes);
}

const perMinute = (key) => (p) => Math.round((p[key] * 60000) / Math.max(1, p.end - p.start));

// The last point runs from the latest sample to now: too short a stretch (seconds)
// would make a wild per-minute rate, so the chart waits until it spans 10 s.
const charted = (p) => !p.partial || p.end - p.start >= 10000;

export function renderHistory(history) {
  const points = history.points.filter(charted);
  drawChart($("chart-events"), points, [
    { cls: "published", value: perMinute("published") },
    { cls: "delivered", value: perMinute("delivered") },
    { cls: "failed", value: perMinute("failed") },
  ], "/min");
  drawChart($("chart-latency"), points, [
    { cls: "p50", value: (p) => p.latency_p50_ms },
    { cls: "p99", value: (p) => p.latency_p99_ms },
    { cls: "mean", value: (p) => p.latency_mean_ms },
  ], "ms");
  const total = history.total;
  if (!total) {
    $("summary-events").textContent =
      "No samples yet: the Monitor job of a running worker takes one a minute.";
    $("summary-latency").textContent = "";
    return;
  }
  const since = `Since ${new Date(total.start).toLocaleTimeString()}`;
  $("summary-events").textContent =
    `${since}: ${total.published} published, ${total.delivered} delivered, ${total.failed} failed attempts.`;
  const percentiles =
    total.latency_p50_ms === null ? "" : `, p50 ≤ ${total.latency_p50_ms} ms, p99 ≤ ${total.latency_p99_ms} ms`;
  $("summary-latency").textContent = total.batches
    ? `${since}: ${total.batches} batches acknowledged${percentiles}, mean ${total.latency_mean_ms} ms.`
    : `${since}: no batch acknowledged.`;
}
