// The voice selector: `GET /voices` ({"voices":[{"name","language","gender"}]}), grouped
// by language. When the list cannot be had, the default voice alone, and `note` says why.

import { getJson } from "./api.js";

export const DEFAULT_VOICE = "af_heart";

export async function fillVoices(select, note) {
  let voices = [{ name: DEFAULT_VOICE, language: "en-us", gender: "female" }];
  try {
    const listed = (await getJson("voices")).voices;
    if (listed.length) voices = listed;
  } catch (error) {
    note.textContent = `voice list unavailable (${error.message})`;
  }
  const groups = new Map();
  for (const voice of voices) {
    const language = voice.language ?? "other";
    if (!groups.has(language)) groups.set(language, []);
    groups.get(language).push(voice);
  }
  select.replaceChildren();
  for (const [language, members] of [...groups].sort(([a], [b]) => a.localeCompare(b))) {
    const group = document.createElement("optgroup");
    group.label = language;
    for (const voice of members) {
      const option = new Option(voice.gender ? `${voice.name} (${voice.gender})` : voice.name, voice.name);
      option.selected = voice.name === DEFAULT_VOICE;
      group.append(option);
    }
    select.append(group);
  }
}
