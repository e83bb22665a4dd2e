// A subscriber's dead letters: listed, replayed or purged, each after a confirmation.
import { $, el, fill, when } from "./dom.js";
import { page, perform } from "./page.js";
import { api, state } from "./session.js";

const SHOWN_DEAD = 100; // the API returns up to 10,000; the table shows the oldest

export function renderDeadLetters(list) {
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

export function deadLettersPath(name) {
  return state.kind === "root" ? `/subscribers/${encodeURIComponent(name)}/deadletters` : "/subscriber/deadletters";
}

export function selectDeadLetters(name) {
  state.selected = name;
  $("dl-name").textContent = name;
  $("deadletters").hidden = false;
  askNothing();
  page.refresh();
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

export function wireDeadLetters() {
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
