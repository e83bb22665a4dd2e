// busbar console: asks for a token, keeps it in this tab's sessionStorage, and calls the
// JSON API with HTTP Basic auth. Every piece of data goes into the page as text
// (textContent, createElement), never as HTML. No library, no build step.
"use strict";

(() => {
  const TOKEN = "busbar.token";
  const REFRESH_MS = 3000;
  const HOUR_MS = 3600000;
  const SVG = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);
  const state = {
    kind: null, name: null, timer: null, selected: null, confirm: null, offset: 0, session: 0,
    attempts: null, // {name, before, next}: the attempt log shown, and its page
    pausing: null, // the pause or resume waiting for its confirmation
  };

  class AuthError extends Error {}

  function basic(token) {
    try {
      return "Basic " + btoa(token + ":");
    } catch (_) {
      throw new AuthError("A token is plain ASCII; this one is not.");
    }
  }

  // credentials "omit": the explicit Authorization header is sent, but the browser never
  // uses cookies or its own login dialog.
  async function api(method, path) {
    const response = await fetch(path, {
      method,
      credentials: "omit",
      cache: "no-store",
      headers: { Authorization: basic(sessionStorage.getItem(TOKEN) || ""), Accept: "application/json" },
    });
    if (response.status === 401) {
      throw new AuthError("The bus does not know this token (401 Unauthorized). Check it and sign in again.");
    }
    if (response.status === 204) return null;
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok) {
      const reason = body && body.error ? body.error : response.statusText;
      const error = new Error(`${method} ${path}: ${response.status} ${reason}`);
      error.status = response.status;
      throw error;
    }
    return body;
  }

  // --- DOM helpers: text only -------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    for (const child of children) node.append(child instanceof Node ? child : String(child));
    return node;
  }

  function fill(tbody, rows, columns, emptyText) {
    tbody.replaceChildren(
      ...(rows.length ? rows : [el("tr", {}, el("td", { class: "empty", colspan: columns }, emptyText))]),
    );
  }

  function show(id, text) {
    const node = $(id);
    node.textContent = text || "";
    node.hidden = !text;
  }

  // --- formatting -----------------------------------------------------------------
  const now = () => Date.now() + state.offset;

  function duration(ms) {
    if (ms < 1000) return `${Math.round(ms)} ms`;
    if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
    if (ms < HOUR_MS) return `${Math.round(ms / 60000)} min`;
    return `${(ms / HOUR_MS).toFixed(1)} h`;
  }

  const laneName = (lane) => (lane === 10 ? "none" : `p${lane}`);
  const when = (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : "");

  // --- sections ---------------------------------------------------------------------
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
    const cell = (value, cls) => el("td", cls ? { class: cls } : {}, value);
    const d = s.dropped;
    const dropped = [["expired", d.expired], ["autodropped", d.autodropped], ["dead letters trimmed", d.deadletters_trimmed]]
      .filter(([, n]) => n).map(([why, n]) => `${n} ${why}`).join(" · ");
    const c = s.circuit;
    const circuit = c.state === "open"
      ? `open ${duration(Math.max(0, now() - c.opened_at))}, probe ${c.next_probe_at > now() ? `in ${duration(c.next_probe_at - now())}` : "now"}`
      : c.failures_in_a_row ? `closed, ${c.failures_in_a_row} failed in a row` : "closed";
    const row = el(
      "tr",
      { "data-subscriber": s.name || "" },
      cell(s.name || "?"),
      cell(s.topics.join(", ")),
      cell(`${s.health_points}/100`, s.health_points < 50 ? "num bad" : "num"),
      cell(s.events.queued, "num queued"),
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
    );
    return row;
  }

  function renderSubscribers(list) {
    fill($("subscribers").tBodies[0], list.map(subscriberRow), 15, "No subscription.");
  }

  function renderTopics(list) {
    const rows = list.map((t) =>
      el("tr", { "data-topic": t.name }, el("td", {}, t.name), el("td", {}, t.publisher_name || "—"), el("td", { class: "num" }, t.events)),
    );
    fill($("topics").tBodies[0], rows, 3, "No topic.");
  }

  function renderWorkers(list) {
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

  function renderReplays(list) {
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

  const SHOWN_DEAD = 100; // the API returns up to 10,000; the table shows the oldest

  function renderDeadLetters(list) {
    const rows = list.slice(0, SHOWN_DEAD).map((d) =>
      el(
        "tr",
        {},
        el("td", {}, d.topic),
        el("td", {}, d.type),
        el("td", {}, d.url),
        el("td", {}, when(d.t)),
        el("td", { class: "num" }, d.attempts),
        el("td", {}, when(d.failed_at)),
        el("td", {}, d.last_status),
      ),
    );
    if (list.length > SHOWN_DEAD) {
      rows.push(el("tr", {}, el("td", { class: "empty", colspan: 7 }, `and ${list.length - SHOWN_DEAD} more`)));
    }
    fill($("dl-table").tBodies[0], rows, 7, "No dead letters.");
    state.deadCount = list.length;
  }

  // --- pause and resume, each after a confirmation ----------------------------------
  function askPausing(name, pause) {
    const path = state.kind === "root" ? `/subscribers/${encodeURIComponent(name)}` : "/subscriber";
    state.pausing = async () => {
      await api("POST", `${path}/${pause ? "pause" : "resume"}`);
      return pause ? `Paused ${name}: its events queue, nothing is sent.` : `Resumed ${name}.`;
    };
    $("sub-question").textContent = pause
      ? `Pause ${name}? Its delivery in flight finishes; then nothing is sent until it is resumed. Events keep queuing.`
      : `Resume ${name}? Its queued events are sent again, in order.`;
    $("sub-confirm").hidden = false;
  }

  function wirePausing() {
    $("sub-yes").addEventListener("click", async () => {
      const action = state.pausing;
      state.pausing = null;
      $("sub-confirm").hidden = true;
      await perform(action);
    });
    $("sub-no").addEventListener("click", () => {
      state.pausing = null;
      $("sub-confirm").hidden = true;
    });
  }

  // --- the attempt log: a page at a time, newest first, filtered ----------------------
  function attemptsPath() {
    const a = state.attempts;
    const base = state.kind === "root" ? `/subscribers/${encodeURIComponent(a.name)}/attempts` : "/subscriber/attempts";
    const query = new URLSearchParams({ limit: "50" });
    if ($("at-outcome").value) query.set("outcome", $("at-outcome").value);
    if ($("at-batch").value.trim()) query.set("batch", $("at-batch").value.trim());
    if (a.before) query.set("before", a.before);
    return `${base}?${query}`;
  }

  function renderAttempts(page) {
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
      if (error instanceof AuthError) return failed(error);
      box.replaceChildren(el("p", {}, error.status === 404 ? `Batch ${id} is not queued: delivered (see the lake), dead-lettered or dropped.` : error.message));
    }
  }

  function selectAttempts(name) {
    state.attempts = { name, before: null, next: null };
    $("at-name").textContent = name;
    $("at-outcome").value = "";
    $("at-batch").value = "";
    $("at-events").hidden = true;
    $("attempts").hidden = false;
    refresh();
  }

  function newestAttempts() {
    state.attempts.before = null;
    refresh();
  }

  function wireAttempts() {
    $("at-outcome").addEventListener("change", newestAttempts);
    $("at-batch").addEventListener("change", newestAttempts);
    $("at-newest").addEventListener("click", newestAttempts);
    $("at-older").addEventListener("click", () => {
      state.attempts.before = state.attempts.next;
      refresh();
    });
    $("at-close").addEventListener("click", () => {
      state.attempts = null;
      $("attempts").hidden = true;
    });
  }

  // --- charts: inline SVG, drawn here ------------------------------------------------
  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

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

  function renderHistory(history) {
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

  // --- dead letters: select, replay, purge (each after a confirmation) --------------
  function deadLettersPath(name) {
    return state.kind === "root" ? `/subscribers/${encodeURIComponent(name)}/deadletters` : "/subscriber/deadletters";
  }

  function selectDeadLetters(name) {
    state.selected = name;
    $("dl-name").textContent = name;
    $("deadletters").hidden = false;
    askNothing();
    refresh();
  }

  function ask(question, action) {
    state.confirm = action;
    $("dl-question").textContent = question;
    $("dl-confirm").hidden = false;
  }

  function askNothing() {
    state.confirm = null;
    $("dl-confirm").hidden = true;
  }

  async function confirmed() {
    const action = state.confirm;
    askNothing();
    await perform(action);
  }

  // a confirmed action: its notice, or its failure, then the page as it is now
  async function perform(action) {
    if (!action) return;
    try {
      show("notice", await action());
    } catch (error) {
      failed(error);
    }
    refresh();
  }

  function wireDeadLetters() {
    $("dl-replay").addEventListener("click", () => {
      const name = state.selected;
      ask(`Replay ${state.deadCount || 0} dead letters of ${name}? They are queued again, in their order and lanes.`, async () => {
        const body = await api("POST", `${deadLettersPath(name)}/replay`);
        return `Replayed ${body.replayed} dead letters of ${name}.`;
      });
    });
    $("dl-purge").addEventListener("click", () => {
      const name = state.selected;
      ask(`Purge ${state.deadCount || 0} dead letters of ${name}? They are deleted for good.`, async () => {
        await api("DELETE", deadLettersPath(name));
        return `Purged the dead letters of ${name}.`;
      });
    });
    $("dl-yes").addEventListener("click", confirmed);
    $("dl-no").addEventListener("click", askNothing);
    $("dl-close").addEventListener("click", () => {
      state.selected = null;
      askNothing();
      $("deadletters").hidden = true;
    });
  }

  // --- refresh loop -------------------------------------------------------------------
  // A refresh still in flight when the user signs out must neither draw its answers
  // nor schedule another: `session` changes at every sign-out.
  async function refresh() {
    clearTimeout(state.timer);
    const session = state.session;
    try {
      const root = state.kind === "root";
      const [subscribers, topics, workers, history, replays] = await Promise.all([
        api("GET", "/subscriptions"),
        api("GET", root ? "/topics" : "/topics?mine=true"),
        root ? api("GET", "/workers") : null,
        root ? api("GET", "/history") : null,
        root ? api("GET", "/replays") : null,
      ]);
      if (session !== state.session) return;
      if (history) state.offset = history.now - Date.now();
      renderSubscribers(subscribers || []);
      renderTopics(topics || []);
      if (root) {
        renderWorkers(workers || []);
        renderReplays(replays || []);
        renderHistory(history);
      } else if (subscribers && subscribers[0]) {
        state.name = subscribers[0].name;
      }
      $("who").textContent = root ? "root" : `client ${state.name || ""}`.trim();
      if (state.selected !== null) {
        const dead = await api("GET", deadLettersPath(state.selected));
        if (session !== state.session) return;
        renderDeadLetters(dead || []);
      }
      if (state.attempts !== null) {
        const page = await api("GET", attemptsPath());
        if (session !== state.session) return;
        renderAttempts(page);
      }
      $("refreshed").textContent = `refreshed ${new Date().toLocaleTimeString()}`;
      show("message", "");
    } catch (error) {
      if (session !== state.session) return;
      failed(error);
      if (error instanceof AuthError) return;
    }
    state.timer = setTimeout(refresh, REFRESH_MS);
  }

  function failed(error) {
    if (error instanceof AuthError) {
      signOut();
      show("message", error.message);
      return;
    }
    if (error.status === 404 && state.selected !== null) {
      renderDeadLetters([]);
    }
    show("message", `Could not refresh: ${error.message}`);
  }

  // --- signing in and out -----------------------------------------------------------
  async function start() {
    show("message", "");
    try {
      await api("GET", "/workers");
      state.kind = "root";
    } catch (error) {
      if (error instanceof AuthError) return failed(error);
      if (error.status !== 403) return failed(error);
      state.kind = "client";
    }
    for (const node of document.querySelectorAll("[data-root-only]")) node.hidden = state.kind !== "root";
    $("login").hidden = true;
    $("console").hidden = false;
    $("signout").hidden = false;
    refresh();
  }

  function signOut() {
    clearTimeout(state.timer);
    sessionStorage.removeItem(TOKEN);
    Object.assign(state, { kind: null, name: null, selected: null, confirm: null, offset: 0, attempts: null, pausing: null });
    state.session += 1;
    for (const tbody of document.querySelectorAll("tbody")) tbody.replaceChildren();
    for (const id of ["chart-events", "chart-latency"]) $(id).replaceChildren();
    for (const id of ["summary-events", "summary-latency", "who", "refreshed"]) $(id).textContent = "";
    show("notice", "");
    $("deadletters").hidden = true;
    $("attempts").hidden = true;
    $("sub-confirm").hidden = true;
    $("console").hidden = true;
    $("signout").hidden = true;
    $("login").hidden = false;
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("login").addEventListener("submit", (event) => {
      event.preventDefault();
      signOut();
      sessionStorage.setItem(TOKEN, $("token").value.trim());
      $("token").value = "";
      start();
    });
    $("signout").addEventListener("click", () => {
      signOut();
      show("message", "");
    });
    wireDeadLetters();
    wireAttempts();
    wirePausing();
    if (sessionStorage.getItem(TOKEN)) start();
  });
})();
