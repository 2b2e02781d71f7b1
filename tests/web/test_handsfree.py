"""Hands-free in Chromium: a question spoken by the engine (a 48 kHz WAV, looped by the
fake microphone) streams into the agent's /v1/realtime; the server's semantic VAD ends the
turn and the page plays the answer; speaking over it (the next loop of the question) silences it,
and the page tells the agent how much it had played; then Send asks by text on the same
socket. Asserted from the page's own account
(`window.voicestreamHandsFree`) and the events the agent sent it."""

from __future__ import annotations

from pathlib import Path

from tests.asr import words
from tests.web.browser import SOUND_LEVEL, launch_chromium, microphone_page, open_page, spoken_wav

QUESTION = "Tell me a long story about a lighthouse keeper."
PAUSE_S = 8.0
"""Silence after the question in the looped file: the server's semantic VAD ends the turn
1,000 ms into it (the confirmation), and the page mutes the microphone once it is committed,
before the question comes round again. On a loaded machine the verdict at the pause can take
seconds, and the audio after it is heard only then: were the question to come round before
the mute, the agent would hear the speaker go on (and wait for that turn) instead of
answering."""
RATE = 48000

MUTE_AT_END_OF_TURN = """() => new Promise((resolve, reject) => {
  const started = performance.now();
  const poll = () => {
    const account = window.voicestreamHandsFree;
    // Not at the first speech_stopped: the fake microphone's loop is heard from wherever it
    // was when the page began to send, and a scrap of the question's end may be judged no
    // words (speech_stopped, nothing committed); the whole question comes round again.
    if ((account.events["input_audio_buffer.committed"] ?? 0) >= 1) {
      document.getElementById("mute").click();
      resolve(account.sentMs);
    } else if (performance.now() - started > 120000) {
      reject(new Error(`no end of turn; events: ${JSON.stringify(account.events)}`));
    } else {
      setTimeout(poll, 5);
    }
  };
  poll();
})"""
ACCOUNT = "window.voicestreamHandsFree"
KEY = "handsfree-key-1"


def test_handsfree_answer_is_heard_and_speaking_over_it_silences_it(
    playwright, engine, agent_url, long_winded_llm, tmp_path: Path
):
    question = tmp_path / "question.wav"
    spoken_wav(engine, QUESTION, question, rate=RATE, pause_s=PAUSE_S)  # looped by the microphone
    with microphone_page(playwright, question, f"{agent_url}/") as opened:
        page = opened.page
        page.click("#handsfree")
        page.wait_for_function(f"{ACCOUNT}.state === 'listening'", timeout=30_000)
        assert page.is_disabled("#talk")
        sent_ms = page.evaluate(MUTE_AT_END_OF_TURN)
        assert sent_ms > 1000, "the microphone's audio did not reach the agent"

        # The answer: received, played by the page's player, loud enough to hear.
        page.wait_for_function(
            f"{ACCOUNT}.responses.length > 0 && {ACCOUNT}.responses[0].playedMs > 500", timeout=120_000
        )
        page.screenshot(path=tmp_path / "handsfree-speaking.png")
        account = page.evaluate(ACCOUNT)
        assert account["peak"] > SOUND_LEVEL and account["soundAt"] is not None
        heard = page.inner_text(".turn[data-handsfree] .question")
        assert {"lighthouse", "story", "keeper", "long", "tell"} & set(words(heard)), heard
        assert page.inner_text("article[data-mode=hands-free] .text").strip()

        # Speaking over it: the question comes round again once the microphone is unmuted.
        page.click("#mute")
        page.wait_for_function(f"{ACCOUNT}.interruptions >= 1", timeout=60_000)
        page.click("#mute")
        first = page.evaluate(f"{ACCOUNT}.responses[0]")
        (truncate, *_) = page.evaluate(f"{ACCOUNT}.truncates")
        assert truncate["item_id"] == first["itemId"]
        assert 500 <= truncate["audio_end_ms"] <= truncate["received_ms"], truncate
        page.wait_for_function(f"{ACCOUNT}.responses[0].status !== null", timeout=30_000)
        page.wait_for_function(f"({ACCOUNT}.events['conversation.item.truncated'] ?? 0) >= 1", timeout=30_000)
        account = page.evaluate(ACCOUNT)
        first = account["responses"][0]
        assert first["status"] == "cancelled", first
        assert first["deltasAfterCut"] == 0, "the agent sent audio of the answer after the user spoke"
        assert account["playedAfterCut"] == 0, "audio of the cut answer played after the cut"
        assert page.get_attribute("article[data-mode=hands-free]", "data-interrupted") == "true"
        assert account["errors"] == [] and page.inner_text("#status") == ""
        print(f"hands-free: first audio {page.inner_text('article[data-mode=hands-free] [data-figure=ttfa]')} after "
              f"the end of the turn; silenced in {account['silencedInMs'][0]:.0f} ms; truncate {truncate}")

        # Send, while Hands-free is on, asks in the same conversation over the same socket.
        page.fill("#prompt", "Say hello.")
        page.click("#send")
        page.wait_for_function(
            "[...document.querySelectorAll('.turn[data-handsfree] .question')].some(q => q.textContent === 'Say hello.')"
        )
        page.wait_for_function(
            f"{ACCOUNT}.responses.length > 1 && {ACCOUNT}.responses.at(-1).receivedMs > 0", timeout=120_000
        )
        assert page.evaluate(f"{ACCOUNT}.errors") == []

        page.click("#handsfree")
        page.wait_for_function(f"{ACCOUNT}.state === 'off'")
        assert not page.is_disabled("#talk")
        realtime = [url for url in opened.requested if url.startswith("ws:")]
        assert realtime == [f"{agent_url.replace('http:', 'ws:')}/v1/realtime"], opened.requested
        assert opened.hosts() == {"127.0.0.1"}, opened.requested


def test_handsfree_offers_the_pages_key_as_a_subprotocol_never_in_the_url(
    playwright, speech_server, local_llm, tmp_path: Path
):
    """An agent with a key: the page with `#key=` opens /v1/realtime (the key offered as the
    subprotocol `voicestream.key.KEY`, as on the pages' other sockets); without it the
    handshake is refused and the page says so."""
    from voicestream.agent.app import AgentSettings, create_app, running_agent

    app = create_app(AgentSettings(speech_url=speech_server, api_key=KEY), llm=local_llm)
    microphone = launch_chromium(playwright, "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream")
    try:
        with running_agent(app) as url:
            keyed = open_page(microphone, f"{url}/#key={KEY}")
            keyed.page.click("#handsfree")
            keyed.page.wait_for_function(f"({ACCOUNT}.events['session.created'] ?? 0) === 1", timeout=30_000)
            keyed.page.wait_for_function(f"{ACCOUNT}.sentChunks > 0", timeout=30_000)
            assert keyed.page.inner_text("#status") == ""
            keyed.page.click("#handsfree")
            assert [u for u in keyed.requested if u.startswith("ws:")] == [f"{url.replace('http:', 'ws:')}/v1/realtime"]
            assert not [u for u in keyed.requested if KEY in u.split("#", 1)[0]], keyed.requested

            keyless = open_page(microphone, f"{url}/")
            keyless.page.click("#handsfree")
            keyless.page.wait_for_function(f"{ACCOUNT}.state === 'off'", timeout=30_000)
            assert "hands-free: the realtime session could not be opened" in keyless.page.inner_text("#status")
            assert keyless.page.evaluate(f"{ACCOUNT}.events") == {}
    finally:
        microphone.close()
