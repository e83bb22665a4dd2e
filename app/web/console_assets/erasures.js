// Erasures: ask for one (a url or an ordering key, maybe some topics) after a
// confirmation, and the receipts, newest first. Root sees every erasure; a client its
// own, and may erase on the topics it publishes only (the API says so if not).
import { perform } from "./page.js";
import { $, el, fill, when } from "./dom.js";
import { api, state } from "./session.js";

function asked() {
  const value = $("er-value").value.trim();
  const topics = $("er-topics").value.split(",").map((t) => t.trim()).filter(Boolean);
  const body = { [$("er-by").value]: value };
  if (topics.length) body.topics = topics;
  return body;
}

function removed(stores) {
  return Object.entries(stores)
    .map(([store, counts]) => [store, Object.values(counts)[0]])
    .filter(([, n]) => n > 0)
    .map(([store, n]) => `${store} ${n}`)
    .join(", ") || "nothing";
}

function lakes(list) {
  return list.map((l) => (l.state === "erased" ? `${l.path}: ${l.events} rows` : `${l.path}: ${l.state}`)).join("; ");
}

export function renderErasures(list) {
  const rows = list.map((e) =>
    el(
      "tr",
      { "data-erasure": e.id },
      el("td", {}, e.id),
      el("td", {}, e.url || e.key || e.url_fingerprint || e.key_fingerprint),
      el("td", {}, e.topics ? e.topics.join(", ") : "all"),
      el("td", { class: "state" }, e.state),
      el("td", { class: "removed" }, removed(e.stores)),
      el("td", {}, lakes(e.lakes)),
      el("td", {}, e.by),
      el("td", {}, when(e.created_at)),
    ),
  );
  fill($("erasures-table").tBodies[0], rows, 8, "No erasure yet.");
}

export function wireErasures() {
  $("er-ask").addEventListener("click", () => {
    const body = asked();
    const value = Object.values(body)[0];
    if (!value) return;
    state.erasing = async () => {
      const receipt = await api("POST", "/erasures", body);
      return `Erasure ${receipt.id} asked for: the workers carry it out.`;
    };
    $("er-question").textContent = `Erase every event of ${$("er-by").value} ${value}${
      body.topics ? ` on ${body.topics.join(", ")}` : ""
    } from every store? This cannot be undone.`;
    $("er-confirm").hidden = false;
  });
  $("er-yes").addEventListener("click", async () => {
    const action = state.erasing;
    state.erasing = null;
    $("er-confirm").hidden = true;
    $("er-value").value = "";
    await perform(action);
  });
  $("er-no").addEventListener("click", () => {
    state.erasing = null;
    $("er-confirm").hidden = true;
  });
}
