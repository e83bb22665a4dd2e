// busbar console: asks for a token, keeps it in this tab's sessionStorage, and calls the
// JSON API with HTTP Basic auth. Every piece of data goes into the page as text
// (textContent, createElement), never as HTML. No library, no build step: the browser
// loads these ES modules as they are, from this origin only.
//
// This module is the page's loop: signing in and out, and the refresh every few
// seconds that fills the tables the other modules draw.
import { attemptsPath, renderAttempts, wireAttempts } from "./attempts.js";
import { renderHistory } from "./charts.js";
import { deadLettersPath, renderDeadLetters, wireDeadLetters } from "./deadletters.js";
import { $, show } from "./dom.js";
import { renderErasures, wireErasures } from "./erasures.js";
import { page } from "./page.js";
import { wirePausing } from "./pausing.js";
import { api, apiPage, AuthError, state, TOKEN } from "./session.js";
import { nextCursor, renderSubscriberPage, subscribersPath, wireSubscriberPages } from "./subpages.js";
import { renderOrigins, renderReplays, renderSubscribers, renderTopics, renderWorkers } from "./tables.js";

// Every REFRESH_MS, or SPACING times as long as the last refresh took when that is
// longer: a console open on a large bus takes a bounded share of a web process.
const REFRESH_MS = 3000;
const SPACING = 10;

// --- refresh loop -------------------------------------------------------------------
// A refresh still in flight when the user signs out must neither draw its answers
// nor schedule another: `session` changes at every sign-out.
async function refresh() {
  clearTimeout(state.timer);
  const session = state.session;
  const began = performance.now();
  try {
    const root = state.kind === "root";
    const [listing, topics, workers, history, replays, origins, erasures] = await Promise.all([
      apiPage(subscribersPath()),
      api("GET", root ? "/topics" : "/topics?mine=true"),
      root ? api("GET", "/workers") : null,
      root ? api("GET", "/history") : null,
      root ? api("GET", "/replays") : null,
      root ? api("GET", "/origins") : null,
      api("GET", "/erasures"),
    ]);
    if (session !== state.session) return;
    if (history) state.offset = history.now - Date.now();
    const subscribers = listing.body || [];
    renderSubscribers(subscribers);
    renderSubscriberPage(subscribers.length, root ? nextCursor(listing.link) : null);
    renderTopics(topics || []);
    renderErasures(erasures || []);
    if (root) {
      renderWorkers(workers || []);
      renderOrigins(origins || []);
      renderReplays(replays || []);
      renderHistory(history);
    } else if (subscribers[0]) {
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
  state.timer = setTimeout(refresh, Math.max(REFRESH_MS, SPACING * (performance.now() - began)));
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
  Object.assign(state, { kind: null, name: null, selected: null, confirm: null, offset: 0, attempts: null, pausing: null, erasing: null });
  state.subscribers = { after: null, next: null, index: 0 };
  state.session += 1;
  for (const tbody of document.querySelectorAll("tbody")) tbody.replaceChildren();
  for (const id of ["chart-events", "chart-latency"]) $(id).replaceChildren();
  for (const id of ["summary-events", "summary-latency", "who", "refreshed"]) $(id).textContent = "";
  show("notice", "");
  $("deadletters").hidden = true;
  $("attempts").hidden = true;
  $("sub-confirm").hidden = true;
  $("er-confirm").hidden = true;
  $("console").hidden = true;
  $("signout").hidden = true;
  $("login").hidden = false;
}

Object.assign(page, { refresh, failed });

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
  wireSubscriberPages();
  wirePausing();
  wireErasures();
  if (sessionStorage.getItem(TOKEN)) start();
});
