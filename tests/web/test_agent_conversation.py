"""The agent page holds a conversation, in Chromium against the real agent and speech server
(the LLM an OpenAI-compatible server on loopback that echoes what it was sent): every
question carries the page's session id, the page shows the turns, and a question asked while
an answer plays tells the agent how much of it the player had played; the page greys out the
rest, and the agent remembers exactly the words the page shows as heard."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Request
from tests.agent.llm_stubs import LLMStub, openai_echo_server
from tests.web.browser import PageVisit
from tests.web.highlights import check_highlights

from voicestream.agent.app import AgentSettings, create_app, running_agent
from voicestream.agent.llm import create_model
from voicestream.protocol import SESSION_HEADER

HEARD_TEXT = """
(article) => {
  const text = article.querySelector(".text");
  const unheard = text.querySelector(".unheard");
  return text.textContent.slice(0, text.textContent.length - (unheard?.textContent.length ?? 0));
}
"""

WORDS_LIT = """
(count) => new Set((window.voicestream?.views?.[0]?.highlights ?? []).map((h) => `${h.sentence}:${h.start_s}`)).size >= count
"""
"""Whether the first answer's page has lit ``count`` different words (each as the player reached it)."""


@pytest.fixture(scope="module")
def echo_stub() -> Iterator[LLMStub]:
    with openai_echo_server() as stub:
        yield stub


@pytest.fixture(scope="module")
def echo_agent_url(speech_server: str, echo_stub: LLMStub) -> Iterator[str]:
    model = create_model("openai", model="echo", base_url=echo_stub.url, api_key="test")
    with running_agent(create_app(AgentSettings(speech_url=speech_server), llm=model)) as url:
        yield url


def invocations(opened: PageVisit) -> list[Request]:
    posts: list[Request] = []
    opened.page.on("request", lambda r: posts.append(r) if r.url.split("?")[0].endswith("/invocations") else None)
    return posts


def ask(opened: PageVisit, prompt: str) -> None:
    page = opened.page
    page.wait_for_selector("#voice option[value=af_heart]", state="attached")
    page.fill("#prompt", prompt)
    page.click("#send")


def test_the_page_sends_its_session_and_shows_the_turns(visit, echo_agent_url, echo_stub):
    opened = visit(f"{echo_agent_url}/")
    posts = invocations(opened)

    ask(opened, "My name is Ada.")
    opened.page.wait_for_selector(".turn:nth-child(1) article[data-done=true]", timeout=90_000)
    ask(opened, "What is my name?")
    opened.page.wait_for_selector(".turn:nth-child(2) article[data-done=true]", timeout=90_000)

    session = opened.page.evaluate("sessionStorage.getItem('voicestream.agent.session')")
    assert session and len(session) >= 33
    assert [r.headers.get(SESSION_HEADER.lower()) for r in posts] == [session, session]
    turns = opened.page.locator(".turn")
    assert turns.count() == 2
    assert turns.nth(0).locator(".question").inner_text() == "My name is Ada."
    assert turns.nth(1).locator(".question").inner_text() == "What is my name?"
    assert "I was sent 3 messages" in turns.nth(1).locator(".text").inner_text()
    assert [m["role"] for m in echo_stub.requests[-1]["messages"]] == ["system", "user", "assistant", "user"]

    opened.page.click("#new-conversation")
    opened.page.wait_for_function("document.querySelectorAll('.turn').length === 0", timeout=10_000)
    assert opened.page.evaluate("sessionStorage.getItem('voicestream.agent.session')") != session


def test_a_question_while_the_answer_plays_cuts_it_where_the_listener_stopped(
    visit, echo_agent_url, echo_stub
):
    opened = visit(f"{echo_agent_url}/")
    posts = invocations(opened)
    ask(opened, "Tell me a long story.")
    # some seconds of the answer play, well before its end; and at least six of its words
    # lit on the player's clock, so its first five ("You said: Tell me a") were heard to
    # their end whatever the machine's speed (a stall under load once left only three
    # heard after 2.5 s of wall time)
    opened.page.wait_for_selector(".turn:nth-child(1) [data-sentence='0']", timeout=90_000)
    opened.page.wait_for_function("window.__ear.soundAt !== null", timeout=90_000)
    opened.page.wait_for_function("performance.now() - window.__ear.soundAt > 2500", timeout=30_000)
    opened.page.wait_for_function(WORDS_LIT, arg=6, timeout=60_000)

    ask(opened, "Go on.")
    opened.page.wait_for_selector(".turn:nth-child(2) article[data-done=true]", timeout=90_000)

    first = opened.page.locator(".turn:nth-child(1) article")
    assert first.get_attribute("data-interrupted") == "true"
    assert first.locator(".unheard").count() == 1
    heard_on_page = " ".join(first.evaluate(HEARD_TEXT).split())
    interrupted = posts[1].post_data_json["interrupted"]
    assert interrupted["request_id"] == first.get_attribute("data-request-id")
    assert interrupted["heard_ms"] > 0
    remembered = echo_stub.requests[-1]["messages"][2]
    assert remembered["role"] == "assistant"
    content = remembered["content"]
    text = content if isinstance(content, str) else "".join(p["text"] for p in content)
    assert text == heard_on_page
    whole = " ".join(first.locator(".text").inner_text().split())
    assert text.startswith("You said: Tell me") and whole.startswith(text) and len(text) < len(whole)


ANSWER_WORDS = """
(index) => {
  const view = window.voicestream.views[index];
  return view.spans().map(({ index: sentence, start, end }) => ({
    sentence,
    text: view.text.slice(start, end),
    words: view.locatedWords(sentence).map((w) => ({
      text: view.text.slice(w.start, w.end), found: true, start_s: w.startS, end_s: w.endS,
    })),
  }));
}
"""


def test_the_word_being_spoken_is_highlighted_on_the_players_clock(visit, echo_agent_url):
    opened = visit(f"{echo_agent_url}/")
    ask(opened, "Read this to me slowly, word by word, please.")
    opened.page.wait_for_selector(".turn:nth-child(1) .speaking .word", timeout=90_000)
    opened.page.wait_for_selector(".turn:nth-child(1) article[data-done=true]", timeout=90_000)

    sentences = opened.page.evaluate(ANSWER_WORDS, 0)
    highlights = opened.page.evaluate("window.voicestream.views[0].highlights")
    (answer,) = sentences  # one streamed utterance: the server cut it, not the agent
    check_highlights(answer["words"], [h for h in highlights if h["sentence"] == answer["sentence"]])
    # the words are the answer's own text, placed where the server said (no guessing), and
    # no word stays lit once the answer has played
    assert [w["text"] for w in answer["words"]] == answer["text"].split()
    assert opened.page.locator(".turn:nth-child(1) .word").count() == 0
