// What the panels ask of the page loop (console.js) without importing it back: the loop
// fills in `page` when it loads, so the modules form no circle.
import { show } from "./dom.js";

export const page = {
  refresh() {}, // console.js: fetch everything again and redraw
  failed(_error) {}, // console.js: sign out on a 401, else say what failed
};

// a confirmed action: its notice, or its failure, then the page as it is now
export async function perform(action) {
  if (!action) return;
  try {
    show("notice", await action());
  } catch (error) {
    page.failed(error);
  }
  page.refresh();
}
