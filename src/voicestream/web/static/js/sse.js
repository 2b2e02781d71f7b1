// Server-Sent Events read from a POST with fetch and a streaming reader (EventSource can
// only GET). Each event's `data` is one JSON object (PROTOCOL.md section 2).

import { postJson } from "./api.js";

/** Yields the JSON object of every event in `response`'s body, as the bytes arrive. */
export async function* readEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop();
      for (const line of lines) {
        if (line === "") {
          if (data.length) yield JSON.parse(data.join("\n"));
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line[5] === " " ? 6 : 5));
        }
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/** POSTs `body` as JSON to `path` and yields the events of the answer. */
export async function* postEvents(path, body, { signal, headers } = {}) {
  const response = await postJson(path, body, { signal, accept: "text/event-stream", headers });
  yield* readEvents(response);
}
