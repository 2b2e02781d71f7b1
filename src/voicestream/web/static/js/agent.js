// The agent page: ask by text (Send) or voice (Talk), hear the answer as it streams.

import { AnswerView } from "./answer-view.js";
import { PcmPlayer, base64Bytes } from "./player.js";
import { postEvents } from "./sse.js";
import { fillVoices } from "./voices.js";

const SAMPLE_RATE = 24000;
const DRAIN_GRACE_MS = 3000;
const ui = Object.fromEntries(
  ["prompt", "send", "talk", "stop", "voice", "mode", "level", "status", "answers"].map((id) => [id, document.getElementById(id)]),
);

let player = null;
let current = null; // the answer whose audio is playing: { view, ... }
let controller = null;
let recording = null;

class AgentError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.code = code;
  }
}

function showError(message) {
  ui.status.textContent = message;
}

async function ensurePlayer() {
  if (!player) {
    player = await PcmPlayer.create({ inputRate: SAMPLE_RATE });
    window.voicestream = { player }; // for the console and the browser tests
    player.on("started", () => current?.started());
    player.on("tag", ({ tag }) => current?.view.speak(tag));
    player.on("stall-start", () => current?.stallStarted());
    player.on("stall-end", ({ seconds }) => current?.stallEnded(seconds));
    player.on("drained", () => current?.drained());
    const meter = () => {
      ui.level.value = player.level();
      requestAnimationFrame(meter);
    };
    requestAnimationFrame(meter);
  }
  await player.resume();
  return player;
}

/** The page-side life of one answer: its clock starts at Send. */
class Answer {
  constructor(view) {
    this.view = view;
    this.sentAt = performance.now();
    this.audioSeconds = 0;
    this.startedAt = null;
    this.finished = false;
    this.stalls = 0;
    this.stallSeconds = 0;
    this.playback = new Promise((resolve) => { this.playbackDone = resolve; });
  }

  since() {
    return performance.now() - this.sentAt;
  }

  started() {
    this.startedAt = this.since();
    this.view.figure("ttfa", this.startedAt);
    this.view.playing(this.startedAt, null);
    this.showStalls();
  }

  stallStarted() {
    if (this.finished) return;
    this.stalls += 1;
    this.showStalls();
  }

  stallEnded(seconds) {
    this.stallSeconds += seconds;
    this.showStalls();
  }

  showStalls() {
    this.view.figure("stalls", `${this.stalls} (${Math.round(this.stallSeconds * 1000)} ms silent)`);
    this.view.element.dataset.stalls = String(this.stalls);
  }

  drained() {
    const total = this.since();
    this.view.speak(null);
    this.view.figure("total", total);
    this.view.playing(this.startedAt ?? total, total);
    this.playbackDone();
  }

  /** Waits until the queued audio has played (bounded by its own length). */
  async played() {
    if (this.startedAt === null && this.audioSeconds === 0) {
      this.view.figure("total", this.since());
      return;
    }
    const bound = this.audioSeconds * 1000 + DRAIN_GRACE_MS;
    await Promise.race([this.playback, new Promise((resolve) => setTimeout(resolve, bound))]);
  }
}

async function runAnswer(view, request, signal) {
  player.stop();
  const answer = new Answer(view);
  current = answer;
  let transcript = null;
  let ended = false;
  try {
    for await (const event of postEvents("invocations", request, { signal })) {
      switch (event.type) {
        case "transcript":
          transcript = event.text;
          view.heard(event.text);
          ui.prompt.value = event.text;
          break;
        case "text_delta":
          if (!view.element.dataset.ttftMs) view.figure("ttft", answer.since());
          view.appendText(event.text);
          view.mark("text", answer.since());
          break;
        case "sentence":
          view.sentence(event.index, event.text);
          break;
        case "audio_chunk": {
          const bytes = base64Bytes(event.data);
          answer.audioSeconds += bytes.length / 2 / SAMPLE_RATE;
          player.push(bytes, event.sentence);
          view.mark("audio", answer.since());
          break;
        }
        case "error":
          throw new AgentError(event.code, event.message);
        case "agent_end":
          ended = true;
          break;
        default:
          break;
      }
    }
    if (!ended) throw new Error("the connection dropped before the answer ended");
    answer.finished = true;
    player.end();
    await answer.played();
    view.element.dataset.done = "true";
    return transcript;
  } finally {
    answer.finished = true;
    if (!view.element.dataset.ttfaMs) view.figure("ttfa", "no audio");
    if (!view.element.dataset.totalMs) view.figure("total", answer.since());
  }
}

async function submit(input) {
  await ensurePlayer();
  controller?.abort();
  controller = new AbortController();
  const { signal } = controller;
  showError("");
  const modes = ui.mode.value === "compare" ? ["bidi", "batch"] : [ui.mode.value];
  const views = modes.map((mode) => new AnswerView(mode));
  ui.answers.replaceChildren(...views.map((view) => view.element));
  ui.stop.disabled = false;
  let request = { ...input, voice: ui.voice.value };
  try {
    for (const [i, mode] of modes.entries()) {
      const transcript = await runAnswer(views[i], { ...request, mode }, signal);
      signal.throwIfAborted();
      if (transcript) request = { prompt: transcript, voice: request.voice }; // ask again what was heard
    }
  } catch (error) {
    if (signal.aborted) {
      showError("Stopped.");
    } else {
      console.error(error);
      showError(error instanceof TypeError ? `connection lost: ${error.message}` : error.message);
    }
  } finally {
    if (controller?.signal === signal) ui.stop.disabled = true;
  }
}

function stop() {
  controller?.abort();
  player?.stop();
  if (current) current.playbackDone();
  ui.stop.disabled = true;
}

function mediaFormat() {
  for (const [type, format] of [["audio/webm;codecs=opus", "webm"], ["audio/ogg;codecs=opus", "ogg"]]) {
    if (MediaRecorder.isTypeSupported(type)) return { type, format };
  }
  throw new Error("this browser cannot record webm or ogg audio");
}

function blobBase64(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result.slice(reader.result.indexOf(",") + 1));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

async function talk() {
  if (!recording) {
    await ensurePlayer();
    stop();
    const { type, format } = mediaFormat();
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const recorder = new MediaRecorder(stream, { mimeType: type });
    const chunks = [];
    recorder.ondataavailable = (event) => chunks.push(event.data);
    recorder.start();
    recording = { stream, recorder, chunks, type, format };
    ui.talk.textContent = "Send recording";
    ui.talk.classList.add("recording");
    return;
  }
  const { stream, recorder, chunks, type, format } = recording;
  recording = null;
  ui.talk.textContent = "Talk";
  ui.talk.classList.remove("recording");
  const stopped = new Promise((resolve) => { recorder.onstop = resolve; });
  recorder.stop();
  await stopped;
  for (const track of stream.getTracks()) track.stop();
  const audio = await blobBase64(new Blob(chunks, { type }));
  await submit({ audio, audio_format: format });
}

ui.send.addEventListener("click", () => submit({ prompt: ui.prompt.value }));
ui.prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) ui.send.click();
});
ui.stop.addEventListener("click", stop);
ui.talk.addEventListener("click", () => talk().catch((error) => {
  recording = null;
  ui.talk.textContent = "Talk";
  ui.talk.classList.remove("recording");
  showError(`microphone: ${error.message}`);
}));
fillVoices(ui.voice, document.getElementById("voice-note"));
