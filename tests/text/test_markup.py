"""The markup layer as tables: what each piece of SSML, bare tag and inline phoneme becomes,
and the errors that name where markup is wrong."""

from __future__ import annotations

import time

import pytest

from voicestream.engine.phonemes import load_vocab
from voicestream.text.markup import (
    MAX_TAG_CHARS,
    Boundary,
    Markup,
    MarkupError,
    Pause,
    Pronounced,
    Said,
    Voicing,
    kokoro_phonemes,
    parse,
    unfinished_markup,
)

VOCAB = frozenset(load_vocab())
EN = Voicing("en-us")


def _parse(text: str, language: str = "en-us") -> Markup:
    markup = parse(text, language, VOCAB)
    assert markup is not None
    return markup


def _shape(markup: Markup) -> list[tuple]:
    """Each item as a tuple a table can hold: said text, phonemes with word and span, pause, boundary."""
    shape: list[tuple] = []
    for item in markup.items:
        if isinstance(item, Said):
            shape.append(("said", item.text.text, item.voicing))
        elif isinstance(item, Pronounced):
            shape.append(("pronounced", item.phonemes, item.word, item.span))
        elif isinstance(item, Pause):
            shape.append(("pause", item.seconds))
        else:
            shape.append(("boundary", item.paragraph))
    return shape


@pytest.mark.parametrize("text", [
    "Hello there. How are you?", "<b>Bold</b> and <i>tags</i>", "a < b and c > d", "[a link](http://x.y)",
    "Price: $5 & more", "x[1] and (y)", "",
])
def test_text_without_markup_has_none(text: str) -> None:
    assert parse(text, "en-us", VOCAB) is None


TABLE: list[tuple[str, list[tuple]]] = [
    ('Please hold<break time="700ms"/> while I check',
     [("said", "Please hold", EN), ("pause", 0.7), ("said", " while I check", EN)]),
    ('A<break time="1.5s"></break>B', [("said", "A", EN), ("pause", 1.5), ("said", "B", EN)]),
    ('A<break strength="x-strong"/>B<break/>C<break strength="none"/>D',
     [("said", "A", EN), ("pause", 1.2), ("said", "B", EN), ("pause", 0.5), ("said", "CD", EN)]),
    ('Say <phoneme alphabet="ipa" ph="ˈɔɹɪndʒ">Grintle</phoneme> now',
     [("said", "Say ", EN), ("pronounced", "ˈɔɹɪndʒ", "Grintle", (41, 48)), ("said", " now", EN)]),
    ("Call [Kokoro](/kˈOkəɹO/) today",
     [("said", "Call ", EN), ("pronounced", "kˈOkəɹO", "Kokoro", (6, 12)), ("said", " today", EN)]),
    ('<sub alias="World Wide Web">WWW</sub>', [("said", "World Wide Web", EN)]),
    ('<say-as interpret-as="characters">abc</say-as>', [("said", "eh b c", EN)]),
    ('<say-as interpret-as="spell-out">NASA</say-as>', [("said", "N eh S eh", EN)]),
    ('<say-as interpret-as="digits">2048</say-as>', [("said", "2 0 4 8", EN)]),
    ('<say-as interpret-as="cardinal">2048</say-as>', [("said", "two thousand and forty-eight", EN)]),
    ('<say-as interpret-as="ordinal">21</say-as>', [("said", "twenty-first", EN)]),
    ('<say-as interpret-as="date" format="mdy">3/5/2024</say-as>', [("said", "March fifth, twenty twenty-four", EN)]),
    ('<say-as interpret-as="date">2024-03-05</say-as>', [("said", "March fifth, twenty twenty-four", EN)]),
    ('<say-as interpret-as="telephone">+1 555-1234</say-as>', [("said", "plus 1, 5 5 5, 1 2 3 4", EN)]),
    ('<say-as interpret-as="currency">29.95 USD</say-as>', [("said", "$29.95", EN)]),
    ('<say-as interpret-as="time">10:30</say-as>', [("said", "10:30", EN)]),
    ('<speak>Hi <prosody rate="slow">slow</prosody> <prosody rate="150%">fast</prosody></speak>',
     [("said", "Hi ", EN), ("said", "slow", Voicing("en-us", speed=0.8)), ("said", " ", EN),
      ("said", "fast", Voicing("en-us", speed=1.5))]),
    ('<speak><lang xml:lang="es-ES">Hola</lang> <voice name="ff_siwis">Bonjour</voice></speak>',
     [("said", "Hola", Voicing("es")), ("said", " ", EN), ("said", "Bonjour", Voicing("fr-fr", voice="ff_siwis"))]),
    ("<speak><s>One</s><p>Two</p></speak>",
     [("boundary", False), ("said", "One", EN), ("boundary", False), ("boundary", True), ("said", "Two", EN),
      ("boundary", True)]),
    ('<speak xml:lang="es">Hola</speak>', [("said", "Hola", Voicing("es"))]),
    ("<speak>A &amp; B</speak>", [("said", "A & B", EN)]),
]


@pytest.mark.parametrize(("text", "expected"), TABLE, ids=[t[:40] for t, _ in TABLE])
def test_markup_becomes_items(text: str, expected: list[tuple]) -> None:
    assert _shape(_parse(text)) == expected


def test_said_text_is_traced_to_the_text_as_sent() -> None:
    text = '<speak>Hello <emphasis>big</emphasis> world, caf\u00e9 ok</speak>'
    markup = _parse(text)
    said = TracedText_join(markup)
    for index, char in enumerate(said.text):
        start = said.starts[index]
        assert text[start] == char
    assert markup.unknown == ("emphasis",)


def TracedText_join(markup: Markup):
    from voicestream.text.spans import TracedText

    return TracedText.join([item.text for item in markup.items if isinstance(item, Said)])


ERRORS: list[tuple[str, str]] = [
    ('<speak>Hello <break time="11s"/></speak>', "longer than the 10 s allowed (line 1, column 14)"),
    ("<speak>" + '<break time="9s"/>' * 7 + "</speak>", "more than the 60 s allowed"),
    ('A <break time="soon"/>', "write a time"),
    ("<speak>Hello <b></speak>", "mismatched tag (line 1, column 19)"),
    ("<speak>\nHello\n <oops</speak>", "line 3"),
    ('Say <phoneme ph="x§">x</phoneme>', "'§'"),
    ('<phoneme alphabet="x-sampa" ph="a">b</phoneme>', "only \"ipa\""),
    ('a <phoneme ph="a">b', "<phoneme> is not closed (line 1, column 3)"),
    ("a </sub> b", "closes no <sub>"),
    ('a <break time="1s"', "has no closing '>'"),
    ('<say-as interpret-as="poetry">x</say-as>', "interpret-as='poetry'"),
    ('<speak><lang xml:lang="de">Hallo</lang></speak>', "not supported"),
    ('<speak><prosody rate="warp">x</prosody></speak>', "rate='warp'"),
    ('<?xml version="1.0"?><root>x</root>', "root must be <speak>"),
    ("[word](/q§/)", "'§'"),
]


@pytest.mark.parametrize(("text", "problem"), ERRORS, ids=[t[:30] for t, _ in ERRORS])
def test_wrong_markup_is_a_typed_error_that_says_where(text: str, problem: str) -> None:
    with pytest.raises(MarkupError) as raised:
        parse(text, "en-us", VOCAB)
    assert problem in raised.value.message


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i > 1 else "&lol;" * 10}">' for i in range(1, 10))
    + "]><speak>&lol9;</speak>"
)


@pytest.mark.parametrize("text", [
    BILLION_LAUGHS,
    '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>',
    '<!DOCTYPE speak><speak>hi</speak>',
])
def test_dtds_and_entities_are_refused_at_once(text: str) -> None:
    started = time.perf_counter()
    with pytest.raises(MarkupError, match="DTD or entities"):
        parse(text, "en-us", VOCAB)
    assert time.perf_counter() - started < 0.05


@pytest.mark.parametrize(("ipa", "kokoro"), [
    ("/ˈɔɹɪndʒ/", "ˈɔɹɪndʒ"), ("[ɡ'ɑ:]", "ɡˈɑː"), ("g", "ɡ"), ("t͡ʃ", "tʃ"), ("kˈOkəɹO", "kˈOkəɹO"),
])
def test_ipa_becomes_kokoro_symbols(ipa: str, kokoro: str) -> None:
    assert kokoro_phonemes(ipa, VOCAB) == kokoro


@pytest.mark.parametrize(("text", "start"), [
    ("Hello <brea", 6), ("Hello <break time=", 6), ("Hello <", 6), ('a <phoneme ph="x">wo', 2),
    ("Call [Koko", 5), ("Call [Kokoro](/kˈO", 5), ("Call [Kokoro](/kˈOkəɹO/", 5), ("<speak>Hello. World", 0),
    ("  <speak>Hello</speak", 2),
    ("Hello there.", None), ("a < b", None), ('a <break time="1s"/> b', None), ("Call [Kokoro](/kˈO/) x", None),
    ("<speak>Hello</speak>", None), ("see [1] here", None), ("a <b>bold</b>", None),
])
def test_unfinished_markup_is_found(text: str, start: int | None) -> None:
    assert unfinished_markup(text) == start


def test_an_unclosed_tag_too_long_is_refused() -> None:
    with pytest.raises(MarkupError, match="not closed"):
        unfinished_markup("Hi <break " + "x" * MAX_TAG_CHARS)
    with pytest.raises(MarkupError, match="not closed"):
        unfinished_markup("Hi <phoneme ph='a'>" + "x" * MAX_TAG_CHARS)


def test_boundaries_do_not_hide_pauses() -> None:
    assert isinstance(_parse("<speak><s>a</s></speak>").items[0], Boundary)


STREAMED_TEXTS = [
    'Please hold<break time="700ms"/> while I check. Thanks for waiting. Bye now.',
    'Say <sub alias="the doctor">Hello. World</sub> twice. Then stop.',
    "Call [Kokoro](/kˈOkəɹO/) today. It is new. Really.",
    '<speak>One sentence. <break time="1s"/> Two sentences.</speak>',
]


@pytest.mark.parametrize("text", STREAMED_TEXTS)
@pytest.mark.parametrize("step", [1, 3, 7])
def test_streamed_text_is_never_cut_inside_markup(text: str, step: int) -> None:
    from voicestream.text import IncrementalSentenceChunker

    chunker = IncrementalSentenceChunker()
    chunks = [chunk for start in range(0, len(text), step) for chunk in chunker.feed_chunks(text[start : start + step])]
    chunks += chunker.flush_chunks()
    assert "".join(chunk.raw for chunk in chunks).replace(" ", "") == text.replace(" ", "")
    for chunk in chunks:
        assert unfinished_markup(chunk.raw) is None
        parse(chunk.raw, "en-us", VOCAB)  # each chunk reads without error
    assert len(chunks) >= (1 if text.startswith("<speak>") else 2)


SEVERAL_DOCUMENTS = [
    ('<speak>One. <break time="1s"/> Two.</speak><speak>Three.</speak>',
     ['<speak>One. <break time="1s"/> Two.</speak>', "<speak>Three.</speak>"]),
    ("<speak>One.</speak>\n<speak>Two.</speak> And plain text. Then more.",
     ["<speak>One.</speak>", "<speak>Two.</speak>", "And plain text.", "Then more."]),
    ("Plain first. <speak>A document.</speak> <speak>Another.</speak>",
     ["Plain first.", "<speak>A document.</speak>", "<speak>Another.</speak>"]),
    ("Plain first <speak>A document.</speak>", ["Plain first", "<speak>A document.</speak>"]),
]


@pytest.mark.parametrize(("text", "expected"), SEVERAL_DOCUMENTS)
@pytest.mark.parametrize("step", [1, 4, 1000])
@pytest.mark.parametrize("sentences", [1, 3])
def test_each_streamed_document_is_a_chunk_of_its_own(text: str, expected: list[str], step: int,
                                                       sentences: int) -> None:
    """Several ``<speak>`` documents in one stream: each complete one is a chunk (however the
    text came, and when the schedule groups sentences), so each parses as a document."""
    from voicestream.text import ChunkSchedule, IncrementalSentenceChunker

    chunker = IncrementalSentenceChunker(ChunkSchedule(sentences=(sentences,)))
    chunks = [chunk for start in range(0, len(text), step) for chunk in chunker.feed_chunks(text[start : start + step])]
    chunks += chunker.flush_chunks()
    grouped = [c.raw for c in chunks]
    if sentences == 1:
        assert grouped == expected
    assert [c for c in grouped if c.startswith("<speak>")] == [e for e in expected if e.startswith("<speak>")]
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.raw
        parse(chunk.raw, "en-us", VOCAB)
