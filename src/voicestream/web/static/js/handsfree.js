// Hands-free: the agent page as a full-duplex voice client. One WebSocket to /v1/realtime
// (the OpenAI Realtime API's GA events; the access key offered as a subprotocol, as on every
// socket of the pages, never in the URL); the microphone streamed up as 24 kHz pcm16 in
// input_audio_buffer.append (mic-worklet.js), the server's VAD deciding where turns end; each
// answer's response.output_audio.delta played gapless by the pages' player (player.js). When
// the server hears the user start speaking (input_audio_buffer.speech_started), the answer
// is silenced at once and conversation.item.truncate tells the agent how much of it had
// played (audio_end_ms, the player's own count): what the listener heard is all the agent
// keeps. Both transcripts are shown as turns. While Hands-free is on, Send puts the typed
// question into the same conversation, and Stop silences the answer the same way.
//
// `window.voicestreamHandsFree` holds the page's own account (events by type, audio sent,
// each response's audio received and played, every cut): the console's and the tests' view.

import { AnswerView } from "./answer-view.js";
import { apiUrl, socketProtocols } from "./api.js";
import { PcmPlayer, base64Bytes } from "./player.js";

const RATE = 24000;
const CHUNK_MS = 40;
const OPEN_TIMEOUT_MS = 5000;
const MAX_BUFFERED_BYTES = 512 * 1024; // the socket is backed up: microphone audio is dropped, not queued
const LEVEL_POLL_MS = 20;
const SOUND_LEVEL = 0.01; // as the browser tests' ear
const AUDIO = { type: "audio/pcm", rate: RATE };
const ui = Object.fromEntries(
  ["handsfree", "mute", "send", "stop", "talk", "prompt", "voice", "status", "answers", "new-conversation"]
    .map((id) => [id, document.getElementById(id)]),
);

function bytesBase64(buffer) {
  const bytes = new Uint8Array(buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** One response as the page saw it. */
class Response {
  constructor(id, startedAt) {
    this.id = id;
    this.startedAt = startedAt; // when the question ended (speech_stopped) or was sent
    this.itemId = null;
    this.view = null;
    this.status = null;
    this.receivedMs = 0; // audio received
    this.playedMs = 0; // audio played, from the player's position reports
    this.cut = false;
    this.stalls = 0; // times the player ran dry while this answer's audio was still coming
    this.deltasAfterCut = 0; // audio deltas that arrived after the cut (none are played)
    this.textAt = []; // [chars of transcript, ms of audio received] at each transcript delta
  }

  account() {
    const { id, itemId, status, receivedMs, playedMs, cut, stalls, deltasAfterCut } = this;
    return { id, itemId, status, receivedMs, playedMs, cut, stalls, deltasAfterCut };
  }
}

class HandsFree {
  constructor() {
    this.socket = null;
    this.player = null;
    this.stream = null;
    this.mic = null;
    this.muted = false;
    this.responses = new Map(); // response id -> Response
    this.byItem = new Map(); // assistant item id -> Response
    this.questions = new Map(); // user item id -> the question's element
    this.queue = []; // [{ response, ms }] of audio pushed since the player's last clear, in order
    this.playing = null; // the response whose audio the player is playing
    this.turn = null; // the latest turn's answers element
    this.stoppedAt = null; // when the server last heard the user stop
    this.levels = null; // the timer that listens to the player
    this.account = {
      state: "off", events: {}, sentChunks: 0, sentMs: 0, droppedChunks: 0, peak: 0, soundAt: null,
      interruptions: 0, silencedInMs: [], truncates: [], errors: [], responses: [], playedAfterCut: 0,
    };
    window.voicestreamHandsFree = this.account;
  }

  get on() {
    return this.socket !== null;
  }

  async start() {
    this.setState("starting");
    if (!this.player) {
      this.player = await PcmPlayer.create({ inputRate: RATE });
      this.player.on("position", ({ tag, seconds }) => this.played(tag, seconds));
      this.player.on("tag", ({ tag }) => { this.playing = this.byItem.get(tag) ?? null; });
      this.player.on("stall-start", () => this.stalled());
      await this.player.context.audioWorklet.addModule(new URL("./mic-worklet.js", import.meta.url));
    }
    await this.player.resume();
    this.stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
    this.socket = await this.open();
    this.send({ type: "session.update", session: this.session() });
    const context = this.player.context;
    this.mic = new AudioWorkletNode(context, "mic-capture", {
      numberOfInputs: 1, numberOfOutputs: 1, outputChannelCount: [1],
      processorOptions: { targetRate: RATE, chunkMs: CHUNK_MS },
    });
    this.mic.port.onmessage = (event) => this.capture(event.data.pcm);
    // pulled by the destination (its output is silence), so that the worklet runs
    context.createMediaStreamSource(this.stream).connect(this.mic).connect(context.destination);
    this.levels = setInterval(() => this.listen(), LEVEL_POLL_MS);
    this.setState("listening");
  }

  open() {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(apiUrl("v1/realtime", { websocket: true }), socketProtocols());
      const timer = setTimeout(() => { socket.close(); reject(new Error("the realtime session did not open")); }, OPEN_TIMEOUT_MS);
      socket.onopen = () => { clearTimeout(timer); resolve(socket); };
      socket.onerror = () => { clearTimeout(timer); reject(new Error("the realtime session could not be opened")); };
      socket.onmessage = (event) => this.receive(JSON.parse(event.data));
      socket.onclose = (event) => {
        if (this.socket !== socket) return;
        this.stop();
        if (event.code !== 1000) showError(`hands-free: the session closed (${event.code} ${event.reason})`);
      };
    });
  }

  session() {
    return {
      type: "realtime",
      output_modalities: ["audio"],
      audio: {
        input: {
          format: AUDIO,
          // Smart Turn and the words decide when a turn ends: a pause to find a word is not one.
          turn_detection: { type: "semantic_vad", create_response: true, interrupt_response: true },
        },
        output: { format: AUDIO, voice: ui.voice.value || undefined },
      },
    };
  }

  stop() {
    const socket = this.socket;
    this.socket = null;
    clearInterval(this.levels);
    this.mic?.port.postMessage({ type: "stop" });
    this.mic?.disconnect();
    this.mic = null;
    for (const track of this.stream?.getTracks() ?? []) track.stop();
    this.stream = null;
    this.player?.stop();
    this.queue = [];
    this.turn = null;
    if (socket && socket.readyState <= WebSocket.OPEN) socket.close(1000);
    this.setState("off");
  }

  setState(state) {
    this.account.state = state;
    ui.handsfree.dataset.state = state;
    ui.handsfree.classList.toggle("recording", state === "listening");
    ui.handsfree.textContent = state === "off" ? "Hands-free" : "Hands-free on";
    ui.mute.hidden = state === "off";
    ui.talk.disabled = state !== "off"; // the microphone is already listening
  }

  /** Muted, the microphone's audio is not sent: the agent hears nothing (not silence), so a
   * turn being spoken when it was muted ends only after unmuting; answers still play. */
  setMuted(muted) {
    this.muted = muted;
    ui.mute.textContent = muted ? "Unmute" : "Mute";
    ui.mute.setAttribute("aria-pressed", String(muted));
  }

  send(event) {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(event));
  }

  capture(pcm) {
    if (this.muted || this.socket?.readyState !== WebSocket.OPEN) return;
    if (this.socket.bufferedAmount > MAX_BUFFERED_BYTES) {
      this.account.droppedChunks += 1;
      return;
    }
    this.send({ type: "input_audio_buffer.append", audio: bytesBase64(pcm) });
    this.account.sentChunks += 1;
    this.account.sentMs += (pcm.byteLength / 2 / RATE) * 1000;
  }

  listen() {
    const level = this.player.level();
    this.account.peak = Math.max(this.account.peak, level);
    if (level > SOUND_LEVEL && this.account.soundAt === null) this.account.soundAt = performance.now();
  }

  stalled() {
    const response = this.playing;
    if (!response || response.cut || response.status !== null) return; // its end, not a stall
    response.stalls += 1;
    response.view.figure("stalls", String(response.stalls));
  }

  /** The player's report of where it is in an answer's audio. */
  played(tag, seconds) {
    const response = this.byItem.get(tag);
    if (!response) return;
    if (response.cut) this.account.playedAfterCut += 1; // its audio was cleared: never, unless broken
    else response.playedMs = Math.max(response.playedMs, seconds * 1000);
  }

  receive(event) {
    const events = this.account.events;
    events[event.type] = (events[event.type] ?? 0) + 1;
    switch (event.type) {
      case "input_audio_buffer.speech_started":
        this.interrupt();
        break;
      case "input_audio_buffer.speech_stopped":
        this.stoppedAt = performance.now();
        break;
      case "conversation.item.added":
        if (event.item.role === "user") this.question(event.item);
        break;
      case "conversation.item.input_audio_transcription.delta":
        this.heard(event.item_id, event.delta, true);
        break;
      case "conversation.item.input_audio_transcription.completed":
        this.heard(event.item_id, event.transcript, false);
        break;
      case "response.created":
        this.responses.set(event.response.id, new Response(event.response.id, this.stoppedAt ?? performance.now()));
        break;
      case "response.output_item.added":
        this.answer(event.response_id, event.item);
        break;
      case "response.output_audio.delta":
        this.audio(event.response_id, event.delta);
        break;
      case "response.output_audio_transcript.delta":
      case "response.output_text.delta":
        this.text(event.response_id, event.delta);
        break;
      case "response.done":
        this.done(event.response);
        break;
      case "conversation.item.truncated":
        this.truncated(event.item_id, event.audio_end_ms);
        break;
      case "error":
        // a cancel that crossed the answer's end on the wire: nothing was left to cancel
        if (event.error.code === "response_cancel_not_active") break;
        this.account.errors.push(event.error);
        showError(`hands-free: ${event.error.code ?? event.error.type}: ${event.error.message}`);
        break;
      default:
        break;
    }
    this.account.responses = [...this.responses.values()].map((response) => response.account());
  }

  /** A new turn for a user item: typed text shows at once, speech when transcribed. */
  question(item) {
    const turn = document.createElement("section");
    turn.className = "turn";
    turn.dataset.handsfree = "true";
    const question = document.createElement("p");
    question.className = "question";
    const typed = item.content?.find((part) => part.type === "input_text");
    question.textContent = typed ? typed.text : "…";
    question.dataset.itemId = item.id;
    const answers = document.createElement("div");
    answers.className = "turn-answers";
    turn.append(question, answers);
    ui.answers.append(turn);
    turn.scrollIntoView({ block: "nearest" });
    this.questions.set(item.id, question);
    this.turn = answers;
  }

  heard(itemId, text, partial) {
    const question = this.questions.get(itemId);
    if (!question) return;
    if (partial) question.textContent = (question.textContent === "…" ? "" : question.textContent) + text;
    else question.textContent = text || "(nothing heard)";
  }

  answer(responseId, item) {
    const response = this.responses.get(responseId);
    if (!response || item.role !== "assistant") return;
    response.itemId = item.id;
    response.view = new AnswerView("hands-free");
    response.view.element.dataset.itemId = item.id;
    if (!this.turn) this.question({ id: `page-${item.id}`, content: [{ type: "input_text", text: "(continued)" }] });
    this.turn.append(response.view.element);
    this.byItem.set(item.id, response);
  }

  since(response) {
    return performance.now() - response.startedAt;
  }

  audio(responseId, delta) {
    const response = this.responses.get(responseId);
    if (!response?.itemId) return;
    if (response.cut) {
      response.deltasAfterCut += 1;
      return;
    }
    const bytes = base64Bytes(delta);
    const ms = (bytes.length / 2 / RATE) * 1000;
    if (response.receivedMs === 0) {
      response.view.figure("ttfa", this.since(response));
      response.view.figure("stalls", "0");
      ui.stop.disabled = false;
    }
    response.receivedMs += ms;
    const last = this.queue.at(-1);
    if (last?.response === response) last.ms += ms;
    else this.queue.push({ response, ms });
    this.player.push(bytes, response.itemId);
    response.view.mark("audio", this.since(response));
  }

  text(responseId, delta) {
    const response = this.responses.get(responseId);
    if (!response?.view || response.cut) return;
    if (!response.view.element.dataset.ttftMs) response.view.figure("ttft", this.since(response));
    response.view.appendText(delta);
    response.textAt.push([response.view.text.length, response.receivedMs]);
    response.view.mark("text", this.since(response));
  }

  done(result) {
    const response = this.responses.get(result.id);
    if (!response) return;
    response.status = result.status;
    if (response.view) {
      response.view.element.dataset.status = result.status;
      response.view.element.dataset.done = "true";
      response.view.figure("total", this.since(response));
      if (response.receivedMs === 0) response.view.figure("ttfa", "no audio");
    }
    if (!response.cut) this.player.end();
  }

  /** The user spoke over the answer (or pressed Stop): silence it now, then tell the agent
   * how much of each answer in the player's queue was played. */
  async interrupt() {
    const queue = this.queue;
    this.queue = [];
    for (const response of this.responses.values()) if (response.status === null) response.cut = true;
    for (const { response } of queue) response.cut = true;
    const asked = performance.now();
    const seconds = await this.player?.stop();
    if (!queue.length) return;
    this.account.interruptions += 1;
    this.account.silencedInMs.push(performance.now() - asked); // until the worklet had cleared
    let before = 0;
    for (const { response, ms } of queue) {
      const played = seconds === null ? response.playedMs : Math.max(0, Math.min(ms, seconds * 1000 - before));
      before += ms;
      if (response.status === "completed" && played >= ms - 1) continue; // heard whole
      const audioEndMs = Math.floor(played);
      response.playedMs = audioEndMs;
      this.account.truncates.push({ item_id: response.itemId, audio_end_ms: audioEndMs, received_ms: Math.round(ms) });
      this.send({ type: "conversation.item.truncate", item_id: response.itemId, content_index: 0, audio_end_ms: audioEndMs });
      this.cutView(response, audioEndMs);
    }
  }

  /** Shows the part of the answer's text that came after the audio played as not heard. */
  cutView(response, audioEndMs) {
    const view = response.view;
    let chars = 0;
    for (const [length, receivedMs] of response.textAt) if (receivedMs <= audioEndMs) chars = length;
    view.heardChars = chars;
    view.element.dataset.interrupted = "true";
    view.element.dataset.heardMs = String(audioEndMs);
    view.renderText();
  }

  truncated(itemId, audioEndMs) {
    const view = this.byItem.get(itemId)?.view;
    if (view) view.element.dataset.truncatedMs = String(audioEndMs);
  }

  /** Send while Hands-free is on: the typed question joins the same conversation. */
  ask(text) {
    if (!text.trim()) return;
    this.interrupt();
    for (const response of this.responses.values()) {
      if (response.status === null) this.send({ type: "response.cancel", response_id: response.id });
    }
    this.send({
      type: "conversation.item.create",
      item: { type: "message", role: "user", content: [{ type: "input_text", text }] },
    });
    this.stoppedAt = performance.now();
    this.send({ type: "response.create" });
  }
}

function showError(message) {
  ui.status.textContent = message;
}

const handsFree = new HandsFree();
ui.handsfree.addEventListener("click", () => {
  if (handsFree.account.state === "starting") return;
  if (handsFree.on) {
    handsFree.stop();
    return;
  }
  showError("");
  handsFree.setMuted(false);
  handsFree.start().catch((error) => {
    console.error(error);
    handsFree.stop();
    showError(`hands-free: ${error.message}`);
  });
});
ui.mute.addEventListener("click", () => handsFree.setMuted(!handsFree.muted));
// At the target, capture listeners run before the agent page's own: while Hands-free is on,
// Send and Stop act on the realtime conversation instead of asking /invocations.
ui.send.addEventListener("click", (event) => {
  if (!handsFree.on) return;
  event.stopImmediatePropagation();
  showError("");
  handsFree.ask(ui.prompt.value);
}, { capture: true });
ui.stop.addEventListener("click", () => {
  if (!handsFree.on) return;
  for (const response of handsFree.responses.values()) {
    if (response.status === null) handsFree.send({ type: "response.cancel", response_id: response.id });
  }
  handsFree.interrupt();
}, { capture: true });
ui.voice.addEventListener("change", () => {
  if (!handsFree.on) return;
  handsFree.send({ type: "session.update", session: { type: "realtime", audio: { output: { voice: ui.voice.value } } } });
});
ui["new-conversation"].addEventListener("click", () => { if (handsFree.on) handsFree.stop(); }, { capture: true });
