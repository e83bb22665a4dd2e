// The console's session: the token (in this tab's sessionStorage), what the page shows,
// and the one way to call the JSON API, with HTTP Basic auth.

export const TOKEN = "busbar.token";

export const state = {
  kind: null, name: null, timer: null, selected: null, confirm: null, offset: 0, session: 0,
  attempts: null, // {name, before, next}: the attempt log shown, and its page
  pausing: null, // the pause or resume waiting for its confirmation
  erasing: null, // the erasure waiting for its confirmation
  subscribers: { after: null, next: null, index: 0 }, // root's page of subscribers (subpages.js)
};

export class AuthError extends Error {}

function basic(token) {
  try {
    return "Basic " + btoa(token + ":");
  } catch (_) {
    throw new AuthError("A token is plain ASCII; this one is not.");
  }
}

// credentials "omit": the explicit Authorization header is sent, but the browser never
// uses cookies or its own login dialog.
export async function api(method, path, payload) {
  return (await call(method, path, payload)).body;
}

// api(), with the answer's Link header (a listing's next page)
export async function apiPage(path) {
  return call("GET", path);
}

async function call(method, path, payload) {
  const headers = { Authorization: basic(sessionStorage.getItem(TOKEN) || ""), Accept: "application/json" };
  if (payload !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    credentials: "omit",
    cache: "no-store",
    headers,
    body: payload === undefined ? undefined : JSON.stringify(payload),
  });
  if (response.status === 401) {
    throw new AuthError("The bus does not know this token (401 Unauthorized). Check it and sign in again.");
  }
  if (response.status === 204) return { body: null, link: null };
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
  return { body, link: response.headers.get("Link") };
}
