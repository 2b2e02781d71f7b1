// The speech playground: the speech server's WebSocket session, heard in the page, with the
// word being spoken highlighted (the session's word times on the player's own clock). Live
// mode sends what is typed, raw, as pieces of one streamed utterance (PROTOCOL.md 1.1): the
// server cuts and normalizes it; a pause in typing ends the utterance.

import { postJson } from "./api.js";
import { PcmPlayer } from "./player.js";
import { SpeechSocket } from "./speech-socket.js";
import { fillVoices } from "./voices.js";
import { placeWords, wordAt } from "./words.js";

const SAMPLE_RATE = 24000;
const live = { pauseMs: 700 }; // a pause in typing this long ends the utterance (settable from the console)
const EXTENSIONS = { wav: "wav", mp3: "mp3", opus: "opus", aac: "m4a", flac: "flac", pcm16: "pcm" };
const ui = Object.fromEntries(
  ["text", "speak", "live", "voice", "speed", "speed-value", "format", "download", "level", "status", "ttfa", "spoken"]
    .map((id) => [id, document.getElementById(id)]),
);

let player = null;
let counter = 0;
let liveCursor = 0;
let liveTimer = null;
let playing = null; // id of the request whose frames are arriving
let utterance = null; // id of live mode's open streamed utterance
// id -> { text, sentAt, heardAt, cancelled, item, words, word, highlights, duration, playedTo }
const requests = new Map();

function showError(message) {
  ui.status.textContent = message;
}

const socket = new SpeechSocket({
  control(frame) {
    if (frame.type === "synthesis_start") playing = frame.request_id;
    else if (frame.type === "word_timestamps") requests.get(frame.request_id)?.words.push(...frame.words);
    else if (frame.type === "synthesis_complete" && requests.has(frame.request_id)) {
      requests.get(frame.request_id).duration = frame.total_duration_s;
    }
    else if (frame.type === "error") showError(`${frame.code}: ${frame.message}`);
  },
  audio(bytes) {
    const request = requests.get(playing);
    if (request && !request.cancelled) player.push(bytes, playing);
  },
  closed(event) {
    if (event.code !== 1000) showError(`the speech session closed (code ${event.code}); the next request reopens it`);
  },
});

async function ensurePlayer() {
  if (!player) {
    player = await PcmPlayer.create({ inputRate: SAMPLE_RATE });
    window.voicestream = { player, requests, live }; // for the console and the browser tests
    player.on("tag", ({ tag }) => heard(tag));
    player.on("position", ({ tag, seconds }) => highlight(tag, seconds));
    player.on("stall-start", () => { for (const id of requests.keys()) highlight(id, null); });
    const meter = () => {
      ui.level.value = player.level();
      requestAnimationFrame(meter);
    };
    requestAnimationFrame(meter);
  }
  await player.resume();
}

function heard(id) {
  const request = requests.get(id);
  if (!request || request.heardAt !== null) return;
  request.heardAt = performance.now();
  const ms = Math.round(request.heardAt - request.sentAt);
  request.item.querySelector(".note").textContent = ` (first audio after ${ms} ms)`;
  if (request.first) ui.ttfa.textContent = `${ms} ms`;
}

/** Request `id`'s audio is playing, `seconds` in (null: it stopped): mark its word then. */
function highlight(id, seconds) {
  const request = requests.get(id);
  if (!request) return;
  if (seconds !== null) request.playedTo = seconds;
  for (const [other, each] of requests) if (other !== id) showWord(each, null);
  const word = seconds === null ? undefined : wordAt(placeWords(request.text, request.words), seconds);
  if (word && word.start !== request.word?.start) {
    request.highlights.push({ seconds, text: request.text.slice(word.start, word.end), start_s: word.startS, end_s: word.endS });
  }
  showWord(request, word ?? null);
}

function showWord(request, word) {
  if (word?.start === request.word?.start) return;
  request.word = word;
  const said = request.item.querySelector(".said");
  if (!word) {
    said.textContent = request.text;
    return;
  }
  const mark = document.createElement("span");
  mark.className = "word";
  mark.textContent = request.text.slice(word.start, word.end);
  said.replaceChildren(request.text.slice(0, word.start), mark, request.text.slice(word.end));
}

/** Send `text` as a new request; with `more`, as the first piece of a streamed utterance. */
async function synthesize(text, { first, more, id = `p${++counter}` }) {
  const item = document.createElement("li");
  item.innerHTML = '<span class="said"></span><small class="note"></small>';
  item.querySelector(".said").textContent = text;
  ui.spoken.append(item);
  requests.set(id, {
    text, sentAt: performance.now(), heardAt: null, cancelled: false, first, item,
    words: [], word: null, highlights: [], duration: null, playedTo: 0,
  });
  await socket.send({
    type: "synthesize", request_id: id, text, voice: ui.voice.value,
    speed: Number(ui.speed.value), format: "pcm16", sample_rate: SAMPLE_RATE, word_timestamps: true,
    ...(more === undefined ? {} : { continue: more }),
  });
  return id;
}

/** More text of the streamed utterance `id` (`more` false: its last piece). */
async function extend(id, text, more) {
  const request = requests.get(id);
  if (request) {
    request.text += text;
    if (!request.word) request.item.querySelector(".said").textContent = request.text;
  }
  await socket.send({ type: "synthesize", request_id: id, text, continue: more });
}

async function stopAll() {
  utterance = null;
  for (const request of requests.values()) request.cancelled = true;
  player?.stop();
  if (socket.socket) await socket.send({ type: "cancel" });
}

async function speak() {
  showError("");
  await ensurePlayer();
  await stopAll();
  requests.clear(); // what is left of them is dropped as it arrives
  ui.spoken.replaceChildren();
  ui.ttfa.textContent = "…";
  const text = ui.text.value.trim();
  if (text) await synthesize(text, { first: true });
  liveCursor = ui.text.value.length;
}

/** Sends what was typed since the last call, raw, as a piece of the open utterance (or the
 * first piece of a new one); with `final` (a pause in typing), ends the utterance. */
async function sendTyped({ final = false } = {}) {
  if (liveCursor > ui.text.value.length) liveCursor = ui.text.value.length;
  const typed = ui.text.value.slice(liveCursor);
  if (utterance === null && typed.trim()) {
    liveCursor += typed.length;
    const id = `p${++counter}`;
    utterance = final ? null : id; // before the send: input while it goes adds to this one
    await synthesize(typed, { first: ui.spoken.childElementCount === 0, more: !final, id });
  } else if (utterance !== null && (typed || final)) {
    liveCursor += typed.length;
    const id = utterance;
    if (final) utterance = null;
    await extend(id, typed, !final);
  }
}

function onInput() {
  if (!ui.live.checked) return;
  clearTimeout(liveTimer);
  sendTyped().catch((error) => showError(error.message));
  liveTimer = setTimeout(() => sendTyped({ final: true }).catch((error) => showError(error.message)), live.pauseMs);
}

async function download() {
  showError("");
  const format = ui.format.value;
  const response = await postJson("invocations", {
    text: ui.text.value, voice: ui.voice.value, speed: Number(ui.speed.value), format,
  });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(await response.blob());
  link.download = `voicestream.${EXTENSIONS[format]}`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
}

const reportErrors = (action) => () => action().catch((error) => showError(error.message));
ui.speak.addEventListener("click", reportErrors(speak));
ui.download.addEventListener("click", reportErrors(download));
ui.text.addEventListener("input", onInput);
ui.live.addEventListener("change", reportErrors(async () => {
  if (!ui.live.checked) return;
  await ensurePlayer();
  ui.spoken.replaceChildren();
  ui.ttfa.textContent = "…";
  liveCursor = ui.text.value.length;
}));
ui.speed.addEventListener("input", () => { ui["speed-value"].textContent = Number(ui.speed.value).toFixed(1); });
fillVoices(ui.voice, document.getElementById("voice-note"));
