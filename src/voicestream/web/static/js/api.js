// Every URL the pages request is built here (same host as the page), and the API key is
// added here, in this one place. The key comes from the page's `#key=KEY` fragment, which
// the browser never sends to a server; it goes out as an Authorization header on fetch and
// as the WebSocket subprotocol `voicestream.key.KEY` (a WebSocket cannot carry headers),
// never in a URL.

export class HttpError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
  }
}

function pageKey() {
  return new URLSearchParams(window.location.hash.slice(1)).get("key");
}

function authHeaders() {
  const key = pageKey();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

/** The subprotocols a WebSocket offers with a key; the server answers `voicestream`. */
export function socketProtocols() {
  const key = pageKey();
  return key ? ["voicestream", `voicestream.key.${key}`] : [];
}

export function apiUrl(path, { websocket = false } = {}) {
  const url = new URL(path, window.location.href);
  url.hash = "";
  if (websocket) url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.toString();
}

/** Throws an HttpError naming the server's `{"error":{"code","message"}}` when not 2xx. */
export async function checkResponse(response) {
  if (response.ok) return response;
  let code = "http_error";
  let message = response.statusText || "request failed";
  try {
    const body = await response.json();
    const error = body.error ?? body;
    code = error.code ?? code;
    message = error.message ?? (typeof error === "string" ? error : message);
  } catch {
    // not JSON: keep the status line
  }
  throw new HttpError(response.status, code, message);
}

export async function postJson(path, body, { signal, accept } = {}) {
  const headers = { "Content-Type": "application/json", ...authHeaders() };
  if (accept) headers.Accept = accept;
  const response = await fetch(apiUrl(path), {
    method: "POST", headers, body: JSON.stringify(body), signal,
  });
  return checkResponse(response);
}

export async function getJson(path, { signal } = {}) {
  const response = await fetch(apiUrl(path), { headers: authHeaders(), signal });
  return (await checkResponse(response)).json();
}
