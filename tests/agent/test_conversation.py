"""The conversation store and `heard_text`, on their own: what a listener heard of an
answer they cut short (property tests over random pieces), and every bound of the store
(turns, characters, idle expiry, number of conversations, the wait for the turn before)."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from voicestream.agent.conversation import (
    ENDED_WITHIN_S,
    OPENING,
    ConversationLimits,
    ConversationStore,
    SpokenPiece,
    WordTime,
    chat,
    heard_text,
)
from voicestream.agent.realtime.conversation import RealtimeConversation
from voicestream.protocol.realtime import ContentPart, Item

ANSWER = [SpokenPiece("My name is Ada.", 1.5), SpokenPiece("I like tea.", 1.1)]


def test_a_partly_heard_sentence_is_cut_after_the_last_word_heard():
    # "I like tea." is 11 characters over 1.1 s: "like" ends at 6/11 of it, 0.6 s
    assert heard_text(ANSWER, 1.5 + 0.6) == "My name is Ada. I like"
    assert heard_text(ANSWER, 1.5 + 0.59) == "My name is Ada. I"
    assert heard_text(ANSWER, 1.5) == "My name is Ada."
    assert heard_text(ANSWER, 0.19) == ""  # "My" ends at 2/15 of 1.5 s
    assert heard_text(ANSWER, 60) == "My name is Ada. I like tea."


def test_word_times_decide_where_they_are_given():
    """Each word ends where the server placed it in the text as written (`end_char`)."""
    words = (WordTime("Dr.", 0.1, 0.5, 3), WordTime("Smith", 0.5, 0.6, 9), WordTime("paid", 0.6, 0.9, 14), WordTime("$5.", 0.9, 1.9, 18))
    pieces = [SpokenPiece("Dr. Smith paid $5.", 2.0, words)]

    assert heard_text(pieces, 0.6) == "Dr. Smith"  # by characters it would be "Dr." only
    assert heard_text(pieces, 0.55) == "Dr."
    assert heard_text(pieces, 1.95) == "Dr. Smith paid $5."


def test_audio_that_never_arrived_was_not_heard():
    pieces = [SpokenPiece("First.", 0.5), SpokenPiece("Second, sent but silent.", 0.0)]

    assert heard_text(pieces, 30) == "First."


def test_words_of_japanese_are_its_characters():
    assert heard_text([SpokenPiece("こんにちは", 1.0)], 0.6) == "こんに"


_words = st.lists(st.text("abcdé,.'", min_size=1, max_size=8), min_size=1, max_size=8)
_pieces = st.lists(
    st.builds(lambda words, s: SpokenPiece(" ".join(words), s), _words, st.floats(0.05, 5)),
    min_size=1,
    max_size=5,
)


@given(_pieces, st.floats(0, 30), st.floats(0, 30))
def test_what_is_heard_grows_with_time_and_is_a_prefix_cut_at_a_word(pieces, a, b):
    full = " ".join(p.text for p in pieces)
    early, late = heard_text(pieces, min(a, b)), heard_text(pieces, max(a, b))

    assert late.startswith(early) and full.startswith(late)
    assert late in ("", full) or full[len(late)] == " "  # never half a word
    assert heard_text(pieces, sum(p.duration_s for p in pieces)) == full
    assert heard_text(pieces, 0) == ""


@given(_words, st.lists(st.floats(0.01, 1), min_size=8, max_size=8), st.floats(0, 10))
def test_with_word_times_the_words_heard_are_those_ended_by_then(words, lengths, heard_s):
    ends = [sum(lengths[: n + 1]) for n in range(len(words))]
    char_ends = [len(" ".join(words[: n + 1])) for n in range(len(words))]
    times = tuple(
        WordTime(w, end - lengths[n], end, char_ends[n]) for n, (w, end) in enumerate(zip(words, ends))
    )
    piece = SpokenPiece(" ".join(words), ends[-1] + 0.5, times)

    assert heard_text([piece], heard_s) == " ".join(w for w, end in zip(words, ends) if end <= heard_s + ENDED_WITHIN_S)


def test_chat_alternates_and_joins_a_question_that_got_no_answer():
    messages = chat([("Hi, I am Ada.", "Hello Ada."), ("I like tea.", "")], "What do I like?")

    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[-1]["content"] == [{"text": "I like tea.\nWhat do I like?"}]


def test_a_greeting_opens_no_empty_user_message():
    """A phone call's greeting is an answer nobody asked for: Bedrock refuses an empty text
    block and a conversation that opens with the assistant, so where it opens the
    conversation it follows `OPENING` as the user's (the model knows it greeted), and
    elsewhere it joins the answer before it."""
    greeted = chat([("", "Hello, how can I help?")], "What time is it?")
    assert [m["role"] for m in greeted] == ["user", "assistant", "user"]
    assert texts(greeted) == [OPENING, "Hello, how can I help?", "What time is it?"]

    later = chat([("Hi.", "Hello."), ("", "Are you still there?")], "Yes.")
    assert [m["role"] for m in later] == ["user", "assistant", "user"]
    assert texts(later) == ["Hi.", "Hello. Are you still there?", "Yes."]


def test_a_realtime_conversation_that_opens_with_a_greeting_sends_its_question_first():
    conversation = RealtimeConversation()
    conversation.add(Item(role="assistant", content=[ContentPart(type="output_text", text="Hello, how can I help?")]))
    conversation.add(Item(role="user", content=[ContentPart(type="input_text", text="What time is it?")]))

    assert texts(conversation.messages()) == [OPENING, "Hello, how can I help?", "What time is it?"]


@given(st.lists(st.tuples(st.sampled_from(["", " ", "q"]), st.sampled_from(["", " ", "a"])), max_size=6),
       st.sampled_from([None, "", "q"]))
def test_chat_messages_each_have_text_start_with_the_user_and_alternate(turns, question):
    messages = chat(turns, question)

    assert all(m["content"][0]["text"].strip() for m in messages)
    assert [m["role"] for m in messages] == ["user", "assistant"] * (len(messages) // 2) + ["user"] * (len(messages) % 2)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def converse(store: ConversationStore, session: str, turns: list[tuple[str, str]]) -> None:
    for number, (question, answer) in enumerate(turns):
        _, turn = await store.begin(session, f"{session}-{number}", question)
        turn.add_text(answer)
        store.finish(session, turn)


def texts(messages) -> list[str]:
    return [m["content"][0]["text"] for m in messages]


async def test_the_next_question_gets_the_turns_before_it():
    store = ConversationStore()
    await converse(store, "s", [("My name is Ada.", "Nice to meet you, Ada.")])

    messages, _ = await store.begin("s", "r2", "What is my name?")

    assert texts(messages) == ["My name is Ada.", "Nice to meet you, Ada.", "What is my name?"]
    other, _ = await store.begin("other", "r3", "Hi")  # another conversation knows nothing
    assert texts(other) == ["Hi"]


async def test_only_the_last_turns_are_kept():
    store = ConversationStore(ConversationLimits(max_turns=2))
    await converse(store, "s", [(f"q{n}", f"a{n}") for n in range(5)])

    assert texts(store.history("s")) == ["q3", "a3", "q4", "a4"]


async def test_the_oldest_turns_go_beyond_the_character_bound():
    store = ConversationStore(ConversationLimits(max_history_chars=25))
    await converse(store, "s", [("q" * 10, "a" * 10), ("b" * 5, "c" * 5), ("d" * 5, "e" * 5)])

    assert texts(store.history("s")) == ["b" * 5, "c" * 5, "d" * 5, "e" * 5]


async def test_an_idle_conversation_is_forgotten():
    clock = Clock()
    store = ConversationStore(ConversationLimits(idle_s=60), clock=clock)
    await converse(store, "s", [("My name is Ada.", "Hello Ada.")])
    clock.now = 59
    assert len(store) == 1

    clock.now = 59 + 61

    assert len(store) == 0
    messages, _ = await store.begin("s", "r", "What is my name?")
    assert texts(messages) == ["What is my name?"]


async def test_the_least_recently_used_conversation_goes_first():
    store = ConversationStore(ConversationLimits(max_conversations=2))
    for session in ("a", "b"):
        await converse(store, session, [("q", "a")])
    await converse(store, "a", [("q2", "a2")])  # "b" is now the least recently used

    await converse(store, "c", [("q", "a")])

    assert len(store) == 2
    assert texts(store.history("b")) == []
    assert texts(store.history("a")) == ["q", "a", "q2", "a2"]


async def test_an_interrupted_answer_keeps_the_words_heard():
    store = ConversationStore()
    _, turn = await store.begin("s", "r1", "Tell me about you.")
    for piece in ANSWER:
        turn.add_text(piece.text + " ")
        turn.add_piece(piece.text)
    turn.add_audio(0, int(1.5 * 48000))
    turn.add_audio(1, int(1.1 * 48000))
    store.finish("s", turn)

    messages, _ = await store.begin("s", "r2", "Go on.", interrupted_id="r1", heard_ms=2100)

    assert texts(messages) == ["Tell me about you.", "My name is Ada. I like", "Go on."]


async def test_a_question_waits_a_bounded_time_for_the_answer_before_it():
    store = ConversationStore(ConversationLimits(turn_wait_s=0.3))
    _, first = await store.begin("s", "r1", "My name is Ada.")
    first.add_text("Hello Ada.")

    loop = asyncio.get_running_loop()
    started = loop.time()
    messages, _ = await store.begin("s", "r2", "What is my name?")  # r1 never finishes

    assert 0.29 <= loop.time() - started < 5  # it waited, and not for ever
    assert texts(messages) == ["What is my name?"]


async def test_an_interruption_that_arrives_while_the_answer_closes_still_cuts_it():
    store = ConversationStore(ConversationLimits(turn_wait_s=10))
    _, first = await store.begin("s", "r1", "Tell me about you.")
    first.add_text("My name is Ada. I like tea.")
    first.add_piece("My name is Ada. I like tea.")
    first.add_audio(0, 48000 * 3)

    asking = asyncio.create_task(
        store.begin("s", "r2", "Go on.", interrupted_id="r1", heard_ms=1500)
    )
    await asyncio.sleep(0.05)
    assert not asking.done()  # waiting for r1 to be recorded
    store.finish("s", first)
    messages, _ = await asyncio.wait_for(asking, 5)

    # 1.5 s of 3 s: the words ending by character 13 of 27 ("My name is" ends at 10)
    assert texts(messages)[1] == "My name is"
