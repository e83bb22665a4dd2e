// Pause and resume a subscriber, each after a confirmation.
import { perform } from "./page.js";
import { $ } from "./dom.js";
import { api, state } from "./session.js";

export function askPausing(name, pause) {
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

export function wirePausing() {
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
