// Every URL the pages request is built here: same host as the page, and the page's own
// `?key=` passed on, so that authentication is added in this one place.

export class HttpError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
  }
}

export function apiUrl(path, { websocket = false } = {}) {
  const url = new URL(path, window.location.href);
  const key = new URLSearchParams(window.location.search).get("key");
  if (key) url.searchParams.set("key", key);
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

export async function postJson(path, body, { signal, accept, headers: extra } = {}) {
  const headers = { "Content-Type": "application/json", ...extra };
  if (accept) headers.Accept = accept;
  const response = await fetch(apiUrl(path), {
    method: "POST", headers, body: JSON.stringify(body), signal,
  });
  return checkResponse(response);
}

export async function getJson(path, { signal } = {}) {
  return (await checkResponse(await fetch(apiUrl(path), { signal }))).json();
}
