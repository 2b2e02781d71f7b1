"""The speech playground in Chromium against the real speech server: Live sends what is
typed, raw, as one streamed utterance, and the server speaks the first sentence while the
next is being typed (the first is heard while the last is unfinished);
Speak shows its time to first audio and highlights each word as it is heard; Download saves
the text in the chosen format."""

from __future__ import annotations

from pathlib import Path

from tests.web.browser import SOUND_LEVEL
from tests.web.highlights import check_highlights

FIRST = "The first sentence is short."
LAST = "And the last one is not finished until the first has been heard."
SPOKEN = """[...window.voicestream.requests.values()].map(
  (request) => ({ text: request.text, sentAt: request.sentAt, heardAt: request.heardAt }))"""


def test_live_speaks_the_first_sentence_before_the_last_is_typed(visit, speech_server, tmp_path: Path):
    opened = visit(f"{speech_server}/")
    page = opened.page
    page.fill("#text", "")
    page.check("#live")
    page.wait_for_function("window.voicestream && window.voicestream.player")
    # no pause ends the utterance while the first sentence renders, however long that takes
    # on a loaded machine (the page's 700 ms pause had ended it before the last character)
    page.evaluate("window.voicestream.live.pauseMs = 600_000")

    page.type("#text", FIRST + " ", delay=20)
    page.type("#text", LAST[:-1], delay=20)

    page.wait_for_function("window.__ear.soundAt !== null", timeout=90_000)
    spoken = page.evaluate(SPOKEN)
    whole = f"{FIRST} {LAST}"
    assert len(spoken) == 1, "what is typed goes, raw, into one streamed utterance"
    assert whole.startswith(spoken[0]["text"]) and len(spoken[0]["text"]) < len(whole)
    assert spoken[0]["heardAt"] is not None
    page.evaluate("window.voicestream.live.pauseMs = 700")
    page.type("#text", LAST[-1])
    page.wait_for_function(  # the pause in typing ended the utterance: all of it was spoken
        "[...window.voicestream.requests.values()][0].duration !== null", timeout=90_000
    )
    assert [request["text"] for request in page.evaluate(SPOKEN)] == [whole]
    page.screenshot(path=tmp_path / "playground-live.png")
    assert opened.ear()["peak"] > SOUND_LEVEL
    assert page.inner_text("#status") == ""
    assert opened.hosts() == {"127.0.0.1"}, opened.requested


def test_speak_shows_first_audio_and_download_saves_the_format(visit, speech_server, tmp_path: Path):
    opened = visit(f"{speech_server}/")
    page = opened.page
    page.fill("#text", "Hello from the playground.")

    page.click("#speak")

    page.wait_for_function("document.getElementById('ttfa').textContent.endsWith(' ms')", timeout=90_000)
    page.wait_for_function("window.__ear.soundAt !== null", timeout=10_000)
    page.select_option("#format", "flac")
    with page.expect_download(timeout=90_000) as download:
        page.click("#download")
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    assert saved.name == "voicestream.flac"
    assert saved.read_bytes()[:4] == b"fLaC"
    assert opened.hosts() == {"127.0.0.1"}, opened.requested


SPOKEN_WORDS = """
(() => {
  const [request] = window.voicestream.requests.values();
  return {
    words: request.words.map((w) => ({ ...w, text: w.word, found: request.text.includes(w.word.trim()) })),
    highlights: request.highlights,
    played: request.duration !== null && request.playedTo >= request.duration - 0.1,
  };
})()
"""


def test_speak_highlights_each_word_as_it_is_heard(visit, speech_server):
    opened = visit(f"{speech_server}/")
    page = opened.page
    page.fill("#text", "Every word lights up as it is heard. Then the next sentence follows.")

    page.click("#speak")

    page.wait_for_selector("#spoken .word", timeout=90_000)
    assert page.evaluate("window.__ear.soundAt") is not None
    page.wait_for_function(f"{SPOKEN_WORDS}.played", timeout=90_000)  # to its last report
    spoken = page.evaluate(SPOKEN_WORDS)
    check_highlights(spoken["words"], spoken["highlights"])
    assert [h["text"] for h in spoken["highlights"]][:2] == ["Every", "word"]
    page.wait_for_selector("#spoken .word", state="detached", timeout=10_000)  # it ran dry: unlit
