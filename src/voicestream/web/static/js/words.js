// Word times (from the speech server's `word_timestamps`) placed in the text they speak, the
// way the agent's conversation.py places them, so the pages and the agent agree on which
// word was where: each word is looked for after the one before; a word the text does not
// hold (a normalized form) is empty and ends where the previous one did.

/** `words` ([{ word, start_s, end_s }]) in `text`: [{ start, end, startS, endS, found }],
 * `start`/`end` indexes in `text`. */
export function locateWords(text, words) {
  let cursor = 0;
  return words.map(({ word, start_s: startS, end_s: endS }) => {
    const wanted = word.trim();
    const found = wanted ? text.indexOf(wanted, cursor) : -1;
    const start = found >= 0 ? found : cursor;
    if (found >= 0) cursor = found + wanted.length;
    return { start, end: cursor, startS, endS, found: found >= 0 };
  });
}

/** The located word being spoken `seconds` into the audio, or undefined between words. */
export function wordAt(located, seconds) {
  return located.find((w) => w.found && w.startS <= seconds && seconds < w.endS);
}
