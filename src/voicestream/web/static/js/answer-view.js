// One answer on the page: what was heard, the text as it streams with the sentence and the
// word being spoken highlighted (the word from the speech server's word times and the
// player's own clock), the part the listener did not hear when they cut it short, the
// figures measured in the page and a timeline of arrivals.

import { placeWords, wordAt } from "./words.js";

const SVG = "http://www.w3.org/2000/svg";
const CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff";
const WORD = new RegExp(`[${CJK}]|[^\\s${CJK}]+`, "gu"); // as the agent's conversation.py
const FIGURES = [
  ["ttft", "time to first text"],
  ["ttfa", "time to first audio"],
  ["stalls", "stalls"],
  ["total", "total"],
];

function svg(name, attributes) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  return element;
}

export class AnswerView {
  constructor(mode) {
    this.mode = mode;
    this.element = document.createElement("article");
    this.element.className = "answer";
    this.element.dataset.mode = mode;
    this.element.innerHTML = `<h2>${mode}</h2><p class="heard" hidden></p><div class="text"></div>
      <dl class="figures"></dl>`;
    this.heardElement = this.element.querySelector(".heard");
    this.textElement = this.element.querySelector(".text");
    this.figureValues = new Map();
    const figures = this.element.querySelector(".figures");
    for (const [name, label] of FIGURES) {
      const term = document.createElement("dt");
      term.textContent = label;
      const value = document.createElement("dd");
      value.dataset.figure = name;
      value.textContent = "…";
      figures.append(term, value);
      this.figureValues.set(name, value);
    }
    this.timeline = svg("svg", { class: "timeline", viewBox: "0 0 1000 44", preserveAspectRatio: "none" });
    const legend = document.createElement("p");
    legend.className = "legend";
    legend.innerHTML = `<span class="text-key">text</span> <span class="audio-key">audio arrived</span>
      <span class="played-key">playing</span> <span class="scale"></span>`;
    this.scale = legend.querySelector(".scale");
    this.element.append(this.timeline, legend);
    this.text = "";
    this.sentences = [];
    this.speaking = null;
    this.sentenceWords = new Map(); // sentence index -> [{ word, start_s, end_s }], in order
    this.word = null; // the word being spoken: { sentence, start, end } in `text`, or null
    this.highlights = []; // every word highlighted, with the player's clock (for the tests)
    this.heardChars = null; // where the listener stopped listening, an index in `text`
    this.marks = [];
    this.played = null;
    this.redrawQueued = false;
  }

  heard(text) {
    this.heardElement.hidden = false;
    this.heardElement.textContent = `You said: ${text}`;
  }

  appendText(delta) {
    this.text += delta;
    this.renderText();
  }

  /** The agent sent the answer to speech as sentence `index`, from `text` on: the request
   * speaks the answer from there to the next sentence's start (in bidi one streamed request
   * speaks all of it, as it comes). */
  sentence(index, text) {
    const searchFrom = this.sentences.length ? this.sentences.at(-1).start + 1 : 0;
    const found = this.text.indexOf(text, Math.min(searchFrom, this.text.length));
    this.sentences.push({ index, start: found < 0 ? searchFrom : found });
    this.renderText();
  }

  /** Each sentence's span in `text`: from its start to the next one's (or the text's end). */
  spans() {
    return this.sentences.map(({ index, start }, i) => ({
      index, start, end: i + 1 < this.sentences.length ? this.sentences[i + 1].start : this.text.length,
    }));
  }

  speak(index) {
    this.speaking = index;
    if (this.word?.sentence !== index) this.word = null;
    this.renderText();
  }

  /** The speech server's times for (more of) sentence `index`'s words, from the start of
   * its audio. */
  words(index, words) {
    this.sentenceWords.set(index, [...(this.sentenceWords.get(index) ?? []), ...words]);
  }

  /** Sentence `index`'s timed words placed in `text`: the agent gives their offsets in
   * the answer's text (words.js). */
  locatedWords(index) {
    return placeWords(this.text, this.sentenceWords.get(index) ?? []);
  }

  /** The player is `seconds` into sentence `index`'s audio: highlight the word spoken then. */
  speakAt(index, seconds) {
    if (this.heardChars !== null) return;
    const word = wordAt(this.locatedWords(index), seconds);
    const next = word ? { sentence: index, start: word.start, end: word.end } : null;
    if (next?.start === this.word?.start && next?.sentence === this.word?.sentence) return;
    this.word = next;
    if (word) {
      this.highlights.push({ sentence: index, seconds, text: this.text.slice(word.start, word.end), start_s: word.startS, end_s: word.endS });
    }
    this.renderText();
  }

  /** Where each word of sentence `index` ends: [index in `text` just after it, when its
   * audio ends]. From the word times where the sentence has them; otherwise its `seconds`
   * of audio shared over its characters (a word ends at the share its last character
   * reaches). */
  wordEnds(index, seconds) {
    if (this.sentenceWords.get(index)?.length) return this.locatedWords(index).map((w) => [w.end, w.endS]);
    const { start, end } = this.spans().find((s) => s.index === index);
    const piece = this.text.slice(start, end);
    return [...piece.matchAll(WORD)].map((w) => {
      const wordEnd = w.index + w[0].length;
      return [start + wordEnd, (seconds * wordEnd) / piece.length];
    });
  }

  /** The listener stopped after `heardSeconds` of audio; `sentenceSeconds` maps each
   * sentence's index to its audio's length. What they heard ends after the last word whose
   * audio had ended: the agent's rule (conversation.heard_text), so that the page and the
   * agent's memory agree. The rest is shown as not heard. */
  cut(heardSeconds, sentenceSeconds) {
    let offset = 0;
    let heard = 0;
    for (const { index, start, end } of this.spans()) {
      const seconds = sentenceSeconds.get(index) ?? 0;
      if (seconds <= 0 || start >= end) break;
      let whole = true;
      for (const [wordEnd, endS] of this.wordEnds(index, seconds)) {
        if (offset + endS > heardSeconds + 1e-9) {
          whole = false;
          break;
        }
        if (wordEnd > start) heard = wordEnd;
      }
      if (!whole) break;
      offset += seconds;
    }
    this.heardChars = heard;
    this.speaking = null;
    this.word = null;
    this.element.dataset.interrupted = "true";
    this.element.dataset.heardMs = String(Math.round(heardSeconds * 1000));
    this.renderText();
  }

  renderText() {
    const parts = [];
    let cursor = 0;
    const limit = this.heardChars ?? this.text.length;
    for (const { index, start, end } of this.spans()) {
      if (start >= limit) break;
      if (start > cursor) parts.push(document.createTextNode(this.text.slice(cursor, start)));
      const span = document.createElement("span");
      span.dataset.sentence = index;
      const [from, to] = [Math.max(start, cursor), Math.min(end, limit)];
      const word = this.word?.sentence === index ? this.word : null;
      if (word && from <= word.start && word.end <= to) {
        const mark = document.createElement("span");
        mark.className = "word";
        mark.textContent = this.text.slice(word.start, word.end);
        span.append(this.text.slice(from, word.start), mark, this.text.slice(word.end, to));
      } else {
        span.textContent = this.text.slice(from, to);
      }
      if (index === this.speaking) span.className = "speaking";
      parts.push(span);
      cursor = Math.max(cursor, Math.min(end, limit));
    }
    parts.push(document.createTextNode(this.text.slice(cursor, limit)));
    if (limit < this.text.length) {
      const unheard = document.createElement("span");
      unheard.className = "unheard";
      unheard.title = "not heard: the answer was stopped here";
      unheard.textContent = this.text.slice(limit);
      parts.push(unheard);
    }
    this.textElement.replaceChildren(...parts);
  }

  figure(name, value) {
    const element = this.figureValues.get(name);
    if (typeof value === "number") {
      element.textContent = `${Math.round(value)} ms`;
      this.element.dataset[`${name}Ms`] = String(Math.round(value));
    } else {
      element.textContent = value;
    }
  }

  /** `kind` ("text" or "audio") arrived `ms` after Send. */
  mark(kind, ms) {
    this.marks.push({ kind, ms });
    this.redraw();
  }

  playing(startMs, endMs) {
    this.played = { startMs, endMs };
    this.redraw();
  }

  redraw() {
    if (this.redrawQueued) return;
    this.redrawQueued = true;
    requestAnimationFrame(() => {
      this.redrawQueued = false;
      this.drawTimeline();
    });
  }

  drawTimeline() {
    const lastMs = Math.max(1000, ...this.marks.map((m) => m.ms), this.played?.endMs ?? 0);
    const x = (ms) => (ms / lastMs) * 1000;
    const children = [];
    if (this.played) {
      const end = this.played.endMs ?? lastMs;
      children.push(svg("rect", { class: "played", x: x(this.played.startMs), y: 24, width: Math.max(1, x(end) - x(this.played.startMs)), height: 16 }));
    }
    for (const { kind, ms } of this.marks) {
      children.push(svg("rect", { class: `${kind}-mark`, x: x(ms), y: kind === "text" ? 4 : 24, width: 3, height: 16 }));
    }
    this.timeline.replaceChildren(...children);
    this.scale.textContent = `${Math.round(lastMs)} ms after Send`;
  }
}
