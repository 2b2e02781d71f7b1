// The agent page: ask by text (Send) or voice (Talk), hear the answer as it streams. One
// conversation at a time: its id (a random one, kept in sessionStorage until "New
// conversation") goes with every question, so the agent remembers the earlier turns; when
// the listener cuts an answer short (Stop, Talk, a new question), the next question says how
// much of it the player had played (PROTOCOL.md section 2), and the page greys out the rest.

import { AnswerView } from "./answer-view.js";
import { PcmPlayer, base64Bytes } from "./player.js";
import { postEvents } from "./sse.js";
import { fillVoices } from "./voices.js";

const SAMPLE_RATE = 24000;
const DRAIN_GRACE_MS = 3000;
const MAX_START_BUFFER_MS = 5000;
const SESSION_HEADER = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id";
const SESSION_KEY = "voicestream.agent.session";
const ui = Object.fromEntries(
  ["prompt", "send", "talk", "stop", "voice", "mode", "level", "status", "answers", "new-conversation"]
    .map((id) => [id, document.getElementById(id)]),
);

let player = null;
let current = null; // the answer whose audio is playing: { view, ... }
let controller = null;
let recording = null;
let interrupted = null; // { request_id, heard_ms } of the answer cut short, for the next question
const views = []; // every answer of this conversation, oldest first (as many as on the page)

/** The conversation's id: made once per conversation, kept while the tab lives. */
function sessionId() {
  let id = sessionStorage.getItem(SESSION_KEY);
  if (!id) {
    id = `voicestream-${crypto.randomUUID()}`;
    sessionStorage.setItem(SESSION_KEY, id);
  }
  return id;
}

async function newConversation() {
  await halt();
  sessionStorage.removeItem(SESSION_KEY);
  interrupted = null;
  views.length = 0;
  ui.answers.replaceChildren();
  ui.answers.dataset.session = sessionId();
  showError("");
}

class AgentError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.code = code;
  }
}

function showError(message) {
  ui.status.textContent = message;
}

/** The player's start buffer from the page's query, `?start_buffer_ms=N` (`bench page` sets
 * it); 0, playing the first chunk at once, when absent or not a number of ms. */
function startBufferMs() {
  const value = Number(new URLSearchParams(window.location.search).get("start_buffer_ms") ?? "");
  return Number.isFinite(value) && value >= 0 && value <= MAX_START_BUFFER_MS ? value : 0;
}

async function ensurePlayer() {
  if (!player) {
    player = await PcmPlayer.create({ inputRate: SAMPLE_RATE, startBufferMs: startBufferMs() });
    window.voicestream = { player, views }; // for the console and the browser tests
    player.on("started", () => current?.started());
    player.on("tag", ({ tag }) => current?.view.speak(tag));
    player.on("position", ({ tag, seconds }) => current?.view.speakAt(tag, seconds));
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
    this.sentenceSeconds = new Map(); // sentence index -> seconds of its audio received
    this.requestId = null;
    this.startedAt = null;
    this.drainedAt = null;
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
    this.drainedAt = total;
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

/** Silence the answer playing, if any; if the listener had not heard all of it, remember
 * how much they heard for the next question, and show the rest as not heard. */
async function interrupt() {
  const answer = current;
  if (!player) return;
  const heard = await player.stop();
  if (!answer || answer.interrupted || answer.drainedAt !== null || answer.failed) return;
  answer.interrupted = true;
  answer.playbackDone();
  if (heard === null || !answer.requestId || answer.view.element.dataset.session !== sessionId()) return;
  interrupted = { request_id: answer.requestId, heard_ms: heard * 1000 };
  answer.view.cut(heard, answer.sentenceSeconds);
}

/** Stop listening to the answer under way and stop its request, in that order and at once,
 * so that no more of its audio reaches the player. */
async function halt() {
  const stopped = interrupt();
  controller?.abort();
  await stopped;
}

async function runAnswer(view, request, signal, session) {
  await interrupt();
  const answer = new Answer(view);
  current = answer;
  view.element.dataset.session = session;
  let transcript = null;
  let ended = false;
  try {
    const headers = { [SESSION_HEADER]: session };
    for await (const event of postEvents("invocations", request, { signal, headers })) {
      switch (event.type) {
        case "transcript":
          transcript = event.text;
          view.heard(event.text);
          ui.prompt.value = event.text;
          break;
        case "agent_start":
          answer.requestId = event.request_id;
          view.element.dataset.requestId = event.request_id;
          break;
        case "text_delta":
          if (!view.element.dataset.ttftMs) view.figure("ttft", answer.since());
          view.appendText(event.text);
          view.mark("text", answer.since());
          break;
        case "sentence":
          view.sentence(event.index, event.text);
          break;
        case "word_timestamps":
          view.words(event.sentence, event.words);
          break;
        case "audio_chunk": {
          const bytes = base64Bytes(event.data);
          answer.audioSeconds += bytes.length / 2 / SAMPLE_RATE;
          answer.sentenceSeconds.set(
            event.sentence, (answer.sentenceSeconds.get(event.sentence) ?? 0) + bytes.length / 2 / SAMPLE_RATE,
          );
          player.push(bytes, event.sentence);
          view.mark("audio", answer.since());
          break;
        }
        case "error":
          answer.failed = true;
          throw new AgentError(event.code, event.message);
        case "agent_end":
          view.agentEnd = event; // the agent's own times (ttft_ms, ttfa_ms), for bench page
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

/** One turn of the conversation on the page: the question, then its answer (in compare
 * mode, one per mode). */
function addTurn(input, answerViews) {
  const turn = document.createElement("section");
  turn.className = "turn";
  const question = document.createElement("p");
  question.className = "question";
  question.textContent = input.prompt ?? "(spoken question)";
  const answers = document.createElement("div");
  answers.className = "turn-answers";
  answers.append(...answerViews.map((view) => view.element));
  turn.append(question, answers);
  ui.answers.append(turn);
  turn.scrollIntoView({ block: "nearest" });
  return question;
}

async function submit(input) {
  await ensurePlayer();
  await halt();
  controller = new AbortController();
  const { signal } = controller;
  showError("");
  const modes = ui.mode.value === "compare" ? ["bidi", "batch"] : [ui.mode.value];
  const turnViews = modes.map((mode) => new AnswerView(mode));
  views.push(...turnViews);
  const question = addTurn(input, turnViews);
  ui.stop.disabled = false;
  let request = { ...input, voice: ui.voice.value };
  if (interrupted) request.interrupted = interrupted;
  interrupted = null;
  try {
    for (const [i, mode] of modes.entries()) {
      // compare mode's second answer is asked apart, so that the conversation holds one
      const session = i === 0 ? sessionId() : `voicestream-${crypto.randomUUID()}`;
      const transcript = await runAnswer(turnViews[i], { ...request, mode }, signal, session);
      signal.throwIfAborted();
      if (transcript) {
        question.textContent = transcript;
        request = { prompt: transcript, voice: request.voice }; // ask again what was heard
      }
    }
  } catch (error) {
    if (signal.aborted) {
      if (controller?.signal === signal) showError("Stopped."); // not when a new question took over
    } else {
      console.error(error);
      showError(error instanceof TypeError ? `connection lost: ${error.message}` : error.message);
    }
  } finally {
    if (controller?.signal === signal) ui.stop.disabled = true;
  }
}

async function stop() {
  await halt();
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
    await stop();
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
ui.stop.addEventListener("click", () => stop());
ui["new-conversation"].addEventListener("click", () => newConversation());
ui.answers.dataset.session = sessionId();
ui.talk.addEventListener("click", () => talk().catch((error) => {
  recording = null;
  ui.talk.textContent = "Talk";
  ui.talk.classList.remove("recording");
  showError(`microphone: ${error.message}`);
}));
fillVoices(ui.voice, document.getElementById("voice-note"));
