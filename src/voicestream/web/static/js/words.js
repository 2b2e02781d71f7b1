// Word times (from the speech server's `word_timestamps`) placed in the text they speak. The
// server gives each word its offsets in the text as sent (`start_char`, `end_char`, in code
// points: PROTOCOL.md 1.9), so the page, the agent's memory and the server agree on which
// word was where without guessing.

/** `words` ([{ word, start_s, end_s, start_char, end_char }]) in `text`, the text they were
 * timed in: [{ start, end, startS, endS }], `start`/`end` indexes (UTF-16) in `text`. */
export function placeWords(text, words) {
  const units = [0];
  for (const char of text) units.push(units.at(-1) + char.length);
  const at = (offset) => units[Math.min(offset, units.length - 1)];
  return words
    .filter((w) => Number.isInteger(w.start_char) && Number.isInteger(w.end_char))
    .map((w) => ({ start: at(w.start_char), end: at(w.end_char), startS: w.start_s, endS: w.end_s }));
}

/** The placed word being spoken `seconds` into the audio, or undefined between words. */
export function wordAt(placed, seconds) {
  return placed.find((w) => w.startS <= seconds && seconds < w.endS);
}
