// The speech server's bidirectional session (PROTOCOL.md 1.1) in the browser: JSON control
// frames arrive as text frames, audio as binary frames; opened on first use, reopened on
// the next send after it closed.

import { apiUrl, socketProtocols } from "./api.js";

const OPEN_TIMEOUT_MS = 5000;

export class SpeechSocket {
  /** `handlers`: control(frame), audio(Uint8Array), closed(event). */
  constructor(handlers) {
    this.handlers = handlers;
    this.socket = null;
    this.opening = null;
  }

  async open() {
    if (this.socket?.readyState === WebSocket.OPEN) return this.socket;
    this.opening ??= new Promise((resolve, reject) => {
      const socket = new WebSocket(apiUrl("invocations-bidirectional-stream", { websocket: true }), socketProtocols());
      socket.binaryType = "arraybuffer";
      const timer = setTimeout(() => { socket.close(); reject(new Error("the speech session did not open")); }, OPEN_TIMEOUT_MS);
      socket.onopen = () => { clearTimeout(timer); this.socket = socket; resolve(socket); };
      socket.onerror = () => { clearTimeout(timer); reject(new Error("the speech session could not be opened")); };
      socket.onmessage = (event) => {
        if (typeof event.data === "string") this.handlers.control(JSON.parse(event.data));
        else this.handlers.audio(new Uint8Array(event.data));
      };
      socket.onclose = (event) => { this.socket = null; this.handlers.closed(event); };
    }).finally(() => { this.opening = null; });
    return this.opening;
  }

  async send(message) {
    (await this.open()).send(JSON.stringify(message));
  }
}
