// DOM helpers: every piece of data goes into the page as text (textContent,
// createElement), never as HTML; and the formats the tables share.
import { state } from "./session.js";

export const HOUR_MS = 3600000;
const SVG = "http://www.w3.org/2000/svg";
export const $ = (id) => document.getElementById(id);

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

export function fill(tbody, rows, columns, emptyText) {
  tbody.replaceChildren(
    ...(rows.length ? rows : [el("tr", {}, el("td", { class: "empty", colspan: columns }, emptyText))]),
  );
}

export function show(id, text) {
  const node = $(id);
  node.textContent = text || "";
  node.hidden = !text;
}

export function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

export const now = () => Date.now() + state.offset;

export function duration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < HOUR_MS) return `${Math.round(ms / 60000)} min`;
  return `${(ms / HOUR_MS).toFixed(1)} h`;
}

export const laneName = (lane) => (lane === 10 ? "none" : `p${lane}`);
export const when = (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : "");
