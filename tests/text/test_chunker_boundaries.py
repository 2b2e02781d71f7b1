"""Sentence boundaries on edge cases collected by pySBD's golden rules, pipecat's and
livekit-agents' tokenizer tests and their issue trackers, plus numbers, URLs, lists and
other scripts. Each case is fed whole, character by character and word by word."""

from __future__ import annotations

import itertools
import re

import pytest

from voicestream.text import ChunkSchedule, IncrementalSentenceChunker

PYSBD_GOLDEN_RULES: list[tuple[str, list[str]]] = [
    ("Hello World. My name is Jonas.", ["Hello World.", "My name is Jonas."]),
    ("What is your name? My name is Jonas.", ["What is your name?", "My name is Jonas."]),
    ("There it is! I found it.", ["There it is!", "I found it."]),
    ("My name is Jonas E. Smith.", ["My name is Jonas E. Smith."]),
    ("Please turn to p. 55.", ["Please turn to p. 55."]),
    ("Were Jane and co. at the party?", ["Were Jane and co. at the party?"]),
    (
        "They closed the deal with Pitt, Briggs & Co. at noon.",
        ["They closed the deal with Pitt, Briggs & Co. at noon."],
    ),
    ("Let's ask Jane and co. They should know.", ["Let's ask Jane and co.", "They should know."]),
    (
        "They closed the deal with Pitt, Briggs & Co. It closed yesterday.",
        ["They closed the deal with Pitt, Briggs & Co.", "It closed yesterday."],
    ),
    ("I can see Mt. Fuji from here.", ["I can see Mt. Fuji from here."]),
    (
        "St. Michael's Church is on 5th st. near the light.",
        ["St. Michael's Church is on 5th st. near the light."],
    ),
    ("That is JFK Jr.'s book.", ["That is JFK Jr.'s book."]),
    ("I visited the U.S.A. last year.", ["I visited the U.S.A. last year."]),
    ("I live in the E.U. How about you?", ["I live in the E.U.", "How about you?"]),
    ("I live in the U.S. How about you?", ["I live in the U.S.", "How about you?"]),
    (
        "I work for the U.S. Government in Virginia.",
        ["I work for the U.S. Government in Virginia."],
    ),
    ("I have lived in the U.S. for 20 years.", ["I have lived in the U.S. for 20 years."]),
    (
        (
            "At 5 a.m. Mr. Smith went to the bank. He left the bank at 6 P.M. Mr. Smith then "
            "went to the store."
        ),
        [
            "At 5 a.m. Mr. Smith went to the bank.",
            "He left the bank at 6 P.M.",
            "Mr. Smith then went to the store.",
        ],
    ),
    ("She has $100.00 in her bag.", ["She has $100.00 in her bag."]),
    ("She has $100.00. It is in her bag.", ["She has $100.00.", "It is in her bag."]),
    (
        (
            "He teaches science (He previously worked for 5 years as an engineer.) at the local "
            "University."
        ),
        [
            (
                "He teaches science (He previously worked for 5 years as an engineer.) at the "
                "local University."
            )
        ],
    ),
    (
        "Her email is Jane.Doe@example.com. I sent her an email.",
        ["Her email is Jane.Doe@example.com.", "I sent her an email."],
    ),
    (
        (
            "The site is: https://www.example.50.com/new-site/awesome_content.html. Please check "
            "it out."
        ),
        [
            "The site is: https://www.example.50.com/new-site/awesome_content.html.",
            "Please check it out.",
        ],
    ),
    (
        "She turned to him, 'This is great.' she said.",
        ["She turned to him, 'This is great.' she said."],
    ),
    (
        'She turned to him, "This is great." she said.',
        ['She turned to him, "This is great." she said.'],
    ),
    (
        'She turned to him, "This is great." She held the book out to show him.',
        ['She turned to him, "This is great."', "She held the book out to show him."],
    ),
    ("Hello!! Long time no see.", ["Hello!!", "Long time no see."]),
    ("Hello?? Who is there?", ["Hello??", "Who is there?"]),
    ("Hello!? Is that you?", ["Hello!?", "Is that you?"]),
    ("Hello?! Is that you?", ["Hello?!", "Is that you?"]),
    ("1.) The first item 2.) The second item", ["1.) The first item", "2.) The second item"]),
    (
        "1.) The first item. 2.) The second item.",
        ["1.) The first item.", "2.) The second item."],
    ),
    ("1) The first item 2) The second item", ["1) The first item", "2) The second item"]),
    ("1) The first item. 2) The second item.", ["1) The first item.", "2) The second item."]),
    ("1. The first item 2. The second item", ["1. The first item", "2. The second item"]),
    ("1. The first item. 2. The second item.", ["1. The first item.", "2. The second item."]),
    (
        "• 9. The first item • 10. The second item",
        ["• 9. The first item", "• 10. The second item"],
    ),
    ("⁃9. The first item ⁃10. The second item", ["⁃9. The first item", "⁃10. The second item"]),
    (
        "a. The first item b. The second item c. The third list item",
        ["a. The first item", "b. The second item", "c. The third list item"],
    ),
    (
        "You can find it at N°. 1026.253.553. That is where the treasure is.",
        ["You can find it at N°. 1026.253.553.", "That is where the treasure is."],
    ),
    (
        "She works at Yahoo! in the accounting department.",
        ["She works at Yahoo! in the accounting department."],
    ),
    (
        "We make a good team, you and I. Did you see Albert I. Jones yesterday?",
        ["We make a good team, you and I.", "Did you see Albert I. Jones yesterday?"],
    ),
    (
        (
            "Thoreau argues that by simplifying one’s life, “the laws of the universe will appear "
            "less complex. . . .”"
        ),
        [
            (
                "Thoreau argues that by simplifying one’s life, “the laws of the universe will "
                "appear less complex. . . .”"
            )
        ],
    ),
    (
        "“Bohr [...] used the analogy of parallel stairways [...]” (Smith 55).",
        ["“Bohr [...] used the analogy of parallel stairways [...]” (Smith 55)."],
    ),
    (
        (
            "If words are left off at the end of a sentence, and that is all that is omitted, "
            "indicate the omission with ellipsis marks (preceded and followed by a space) and then "
            "indicate the end of the sentence with a period . . . . Next sentence."
        ),
        [
            (
                "If words are left off at the end of a sentence, and that is all that is omitted, "
                "indicate the omission with ellipsis marks (preceded and followed by a space) and "
                "then indicate the end of the sentence with a period . . . ."
            ),
            "Next sentence.",
        ],
    ),
    (
        "I never meant that.... She left the store.",
        ["I never meant that....", "She left the store."],
    ),
    (
        (
            "I wasn’t really ... well, what I mean...see . . . what I'm saying, the thing is . . . "
            "I didn’t mean it."
        ),
        [
            (
                "I wasn’t really ... well, what I mean...see . . . what I'm saying, the thing is "
                ". . . I didn’t mean it."
            )
        ],
    ),
    (
        (
            "One further habit which was somewhat weakened . . . was that of combining words into "
            "self-interpreting compounds. . . . The practice was not abandoned. . . ."
        ),
        [
            (
                "One further habit which was somewhat weakened . . . was that of combining words "
                "into self-interpreting compounds."
            ),
            ". . . The practice was not abandoned. . . .",
        ],
    ),
]

LIVEKIT_TEXT = (
    "Hi! "
    "LiveKit is a platform for live audio and video applications and services. "
    "R.T.C stands for Real-Time Communication... again R.T.C. "
    "Mr. Theo is testing the sentence tokenizer. "
    "This is a test. Another test. "
    "A short sentence. "
    "A longer sentence that is longer than the previous sentence. "
    "f(x) = x * 2.54 + 42. "
    "Hey! Hi! Hello! "
)

AGENT_FRAMEWORK_CASES: list[tuple[str, list[str]]] = [
    (
        LIVEKIT_TEXT,
        [
            "Hi!",
            "LiveKit is a platform for live audio and video applications and services.",
            "R.T.C stands for Real-Time Communication... again R.T.C.",
            "Mr. Theo is testing the sentence tokenizer.",
            "This is a test.",
            "Another test.",
            "A short sentence.",
            "A longer sentence that is longer than the previous sentence.",
            "f(x) = x * 2.54 + 42.",
            "Hey!",
            "Hi!",
            "Hello!",
        ],
    ),
    (
        "Hello, world! Should this work?? This should work, too... How about this?",
        ["Hello, world!", "Should this work??", "This should work, too...", "How about this?"],
    ),
    ("你好，世界！ 这是一句测试文本。", ["你好，世界！", "这是一句测试文本。"]),
    ("Hello, world! How are you?", ["Hello, world!", "How are you?"]),
    (
        "This is a sentence. This is another one",
        ["This is a sentence.", "This is another one"],
    ),
    ("This is for Mr. and Mrs. Jones.", ["This is for Mr. and Mrs. Jones."]),
    ("Meet the new Mr. and Mrs.", ["Meet the new Mr. and Mrs."]),
    ("U.S.A. and N.A.S.A.", ["U.S.A. and N.A.S.A."]),
    ("My number is 123-456-7890. Call me.", ["My number is 123-456-7890.", "Call me."]),
    (
        "My emails are foo@pipecat.ai and bar@pipecat.ai. Write soon.",
        ["My emails are foo@pipecat.ai and bar@pipecat.ai.", "Write soon."],
    ),
    (
        "My email is spell(foo.bar@pipecat.ai). Thanks.",
        ["My email is spell(foo.bar@pipecat.ai).", "Thanks."],
    ),
    ("The number pi is 3.14159. Next", ["The number pi is 3.14159.", "Next"]),
    (
        "Valid scientific notation 1.23e4. Another one.",
        ["Valid scientific notation 1.23e4.", "Another one."],
    ),
    (
        "It still early, it's 3:00 a.m. Go back to sleep.",
        ["It still early, it's 3:00 a.m.", "Go back to sleep."],
    ),
    ("Ok, Mr. Smith let's go.", ["Ok, Mr. Smith let's go."]),
    ("Dr. Walker, I presume.", ["Dr. Walker, I presume."]),
    ("Prof. Walker, I presume.", ["Prof. Walker, I presume."]),
    ("First sentence. Second incomplete", ["First sentence.", "Second incomplete"]),
]

NUMBERS_NAMES_AND_ADDRESSES: list[tuple[str, list[str]]] = [
    ("The value is 3.14. Next", ["The value is 3.14.", "Next"]),
    ("Version 1.2.3 is out.", ["Version 1.2.3 is out."]),
    ("Version 1.2.3 is out. Update now.", ["Version 1.2.3 is out.", "Update now."]),
    ("Call me at 10 a.m. Tomorrow works.", ["Call me at 10 a.m.", "Tomorrow works."]),
    ("We met at 5 p.m. on Friday.", ["We met at 5 p.m. on Friday."]),
    ("Python 3.12 is fast. It really is.", ["Python 3.12 is fast.", "It really is."]),
    ("It costs $3.50 today.", ["It costs $3.50 today."]),
    ("The server is at 192.168.1.1. Ping it.", ["The server is at 192.168.1.1.", "Ping it."]),
    (
        "Visit example.com for more. Or read report.pdf now.",
        ["Visit example.com for more.", "Or read report.pdf now."],
    ),
    (
        "Go to https://example.com/a.b?c=d. Then log in.",
        ["Go to https://example.com/a.b?c=d.", "Then log in."],
    ),
    (
        "Contact support@example.com. We reply fast.",
        ["Contact support@example.com.", "We reply fast."],
    ),
    ("See Fig. 3 for details.", ["See Fig. 3 for details."]),
    ("Born Jan. 5, 1990 in St. Louis.", ["Born Jan. 5, 1990 in St. Louis."]),
    ("Use e.g. Python or i.e. a script.", ["Use e.g. Python or i.e. a script."]),
    ("The U.K. Parliament voted. It passed.", ["The U.K. Parliament voted.", "It passed."]),
    ("He has a Ph.D. in physics.", ["He has a Ph.D. in physics."]),
    ("J. R. R. Tolkien wrote The Hobbit.", ["J. R. R. Tolkien wrote The Hobbit."]),
    ("J. K. Rowling wrote it. She is British.", ["J. K. Rowling wrote it.", "She is British."]),
    (
        "He was born in the U.S. He moved to Canada.",
        ["He was born in the U.S.", "He moved to Canada."],
    ),
    ("I bought apples, pears, etc. Then I left.", ["I bought apples, pears, etc.", "Then I left."]),
    ("It is No. 1 in sales. Buy it.", ["It is No. 1 in sales.", "Buy it."]),
    ("No. I don't think so.", ["No.", "I don't think so."]),
    (
        "Apple Inc. The company was founded in 1976.",
        ["Apple Inc.", "The company was founded in 1976."],
    ),
    ("Apple Inc. Chief Executive Tim Cook spoke.", ["Apple Inc. Chief Executive Tim Cook spoke."]),
    ("Mr. and Mrs. Smith arrived. Dr. Lee left.", ["Mr. and Mrs. Smith arrived.", "Dr. Lee left."]),
    ("Pi is about 3.14159 and e is 2.71828.", ["Pi is about 3.14159 and e is 2.71828."]),
    ("I ate a fig. It was sweet.", ["I ate a fig.", "It was sweet."]),
    ("See fig. 4 and vol. 2 of the series.", ["See fig. 4 and vol. 2 of the series."]),
    ("Look at Fig. 2. It shows growth.", ["Look at Fig. 2.", "It shows growth."]),
    ("He wrote a book (see p. 5). It was good.", ["He wrote a book (see p. 5).", "It was good."]),
    ("It costs $1.5M. Great deal.", ["It costs $1.5M.", "Great deal."]),
    ("I counted to 3. May I go?", ["I counted to 3.", "May I go?"]),
    (
        "Heute ist Dienstag, der 3. Juli 2024. Morgen ist Mittwoch.",
        ["Heute ist Dienstag, der 3. Juli 2024.", "Morgen ist Mittwoch."],
    ),
    (
        "She lives in Washington, D.C. The city is nice.",
        ["She lives in Washington, D.C.", "The city is nice."],
    ),
    ("The meeting is at 9 a.m. EST tomorrow.", ["The meeting is at 9 a.m. EST tomorrow."]),
    ("E. coli is a bacterium. It is common.", ["E. coli is a bacterium.", "It is common."]),
    (
        (
            "The nurse gave him the i.v. in his vein. She gave him the i.v. It was a great I.V. "
            "that she gave him. She gave him the I.V. It was night."
        ),
        [
            "The nurse gave him the i.v. in his vein.",
            "She gave him the i.v.",
            "It was a great I.V. that she gave him.",
            "She gave him the I.V.",
            "It was night.",
        ],
    ),
    (
        "It was a saint and martyr.[1] The emperor published a decree.",
        ["It was a saint and martyr.[1]", "The emperor published a decree."],
    ),
]

PUNCTUATION_AND_QUOTES: list[tuple[str, list[str]]] = [
    ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
    ('"Is it?" she asked. "Yes."', ['"Is it?" she asked.', '"Yes."']),
    ("She said, 'Hello!' Then she waved.", ["She said, 'Hello!'", "Then she waved."]),
    (
        "(This is an aside.) The main text goes on.",
        ["(This is an aside.)", "The main text goes on."],
    ),
    ("**Note:** Read this. Then that.", ["**Note:** Read this.", "Then that."]),
    ("This is **important.** Remember it.", ["This is **important.**", "Remember it."]),
    ("It ends here... And starts again.", ["It ends here...", "And starts again."]),
    ("Wait... what?", ["Wait... what?"]),
    ("Wow… That was fast.", ["Wow…", "That was fast."]),
    ("Really?! Yes!", ["Really?!", "Yes!"]),
    ("Hello!!! How are you???", ["Hello!!!", "How are you???"]),
    ("Hello. ... World.", ["Hello. ...", "World."]),
    ("Hello there. World", ["Hello there.", "World"]),
    ("¡Hola! ¿Qué tal?", ["¡Hola!", "¿Qué tal?"]),
    (
        "Mix it, put it in the oven, and -- voila! -- you have cake.",
        ["Mix it, put it in the oven, and -- voila! -- you have cake."],
    ),
    ("Is this the U.S.? Yes.", ["Is this the U.S.?", "Yes."]),
    (
        "  Leading and trailing spaces.   Collapse   inside.  ",
        ["Leading and trailing spaces.", "Collapse inside."],
    ),
]

LISTS_AND_LINES: list[tuple[str, list[str]]] = [
    ("1. Buy milk\n2. Eat", ["1. Buy milk", "2. Eat"]),
    ("# Heading\nSome text here.", ["# Heading", "Some text here."]),
    ("Shopping list:\n- eggs\n- milk", ["Shopping list:", "- eggs", "- milk"]),
    ("First paragraph.\n\nSecond paragraph.", ["First paragraph.", "Second paragraph."]),
    ("Steps: 1. Open the box 2. Take it out", ["Steps: 1. Open the box", "2. Take it out"]),
    (
        "features\ncontact manager\nevents, activities\n",
        ["features", "contact manager", "events, activities"],
    ),
    ("Title\n---\nBody text.", ["Title", "--- Body text."]),
    ("Windows line\r\nends here.", ["Windows line", "ends here."]),
]

OTHER_SCRIPTS: list[tuple[str, list[str]]] = [
    ("你好。我很好！你呢？", ["你好。", "我很好！", "你呢？"]),
    ("こんにちは。元気ですか？ありがとう！", ["こんにちは。", "元気ですか？", "ありがとう！"]),
    ("यह एक वाक्य है। यह दूसरा है।", ["यह एक वाक्य है।", "यह दूसरा है।"]),
    ("他说：「你好。」然后走了。", ["他说：「你好。」", "然后走了。"]),
    ("価格は３．５ドルです。次へ。", ["価格は３．５ドルです。", "次へ。"]),
    ("I like Tokyo. 東京は大きい。", ["I like Tokyo.", "東京は大きい。"]),
    ("مرحبا؟ كيف حالك؟", ["مرحبا؟", "كيف حالك؟"]),
    ("یہ اردو ہے۔ یہ دوسرا ہے۔", ["یہ اردو ہے۔", "یہ دوسرا ہے۔"]),
    ("안녕하세요. 어떻게 지내세요?", ["안녕하세요.", "어떻게 지내세요?"]),
    ("Привет. Как дела?", ["Привет.", "Как дела?"]),
    ("Γεια σας. Τι κάνεις;", ["Γεια σας.", "Τι κάνεις;"]),
    ("Բարև։ Ինչպես եք՞", ["Բարև։", "Ինչպես եք՞"]),
    ("ሰላም። እንዴት ነዎት፧", ["ሰላም።", "እንዴት ነዎት፧"]),
]

CASES = (
    PYSBD_GOLDEN_RULES
    + AGENT_FRAMEWORK_CASES
    + NUMBERS_NAMES_AND_ADDRESSES
    + PUNCTUATION_AND_QUOTES
    + LISTS_AND_LINES
    + OTHER_SCRIPTS
)


def chunk(fragments: list[str]) -> list[str]:
    chunker = IncrementalSentenceChunker()
    chunks = [sentence for fragment in fragments for sentence in chunker.feed(fragment)]
    return chunks + chunker.flush()


def test_there_are_at_least_sixty_cases() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[text[:40] for text, _ in CASES])
def test_boundaries_fed_whole(text: str, expected: list[str]) -> None:
    assert chunk([text]) == expected


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[text[:40] for text, _ in CASES])
def test_boundaries_fed_character_by_character(text: str, expected: list[str]) -> None:
    assert chunk(list(text)) == expected


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[text[:40] for text, _ in CASES])
def test_boundaries_fed_as_llm_tokens(text: str, expected: list[str]) -> None:
    """Tokens the way LLMs stream them: a leading space, digits and marks apart (" 4", ".")."""
    tokens = re.findall(r"\s*(?:\w+|[^\w\s])", text) + re.findall(r"\s*$", text)[:1]
    assert "".join(tokens) == text
    assert chunk(tokens) == expected


def released_after(fragments: list[str]) -> list[tuple[str, int]]:
    """Each chunk with the index of the fragment after which it was released."""
    chunker = IncrementalSentenceChunker()
    released = [
        (sentence, index)
        for index, fragment in enumerate(fragments)
        for sentence in chunker.feed(fragment)
    ]
    return released + [(rest, len(fragments)) for rest in chunker.flush()]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[text[:40] for text, _ in CASES])
def test_sentence_is_released_once_the_next_sentence_has_a_word(
    text: str, expected: list[str]
) -> None:
    """Fed word by word, a sentence is out at the latest with the fragment that completes
    the first word (with the space after it) of the next sentence."""
    fragments = re.findall(r"^\s+|\S+\s*", text)
    released = released_after(fragments)
    assert [sentence for sentence, _ in released] == expected
    visible = [i for i, c in enumerate(text) if not c.isspace()]
    fragment_of = [i for i, fragment in enumerate(fragments) for _ in fragment]
    consumed = 0
    for (sentence, index), (following, _) in itertools.pairwise(released):
        consumed += len("".join(sentence.split()))
        tokens = following.split()
        first_word = next(i for i, token in enumerate(tokens) if any(c.isalnum() for c in token))
        word_end = consumed + sum(len(token) for token in tokens[: first_word + 1]) - 1
        assert index <= fragment_of[visible[word_end]], (sentence, following)


def test_sentence_waits_for_the_next_word_only_when_it_must() -> None:
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("Hello there.") == []
    assert chunker.feed(" W") == ["Hello there."]
    assert chunker.feed("orld. I live in the U.S.") == ["World."]
    assert chunker.feed(" Ho") == []
    assert chunker.feed("w ") == ["I live in the U.S."]
    assert chunker.flush() == ["How"]


def test_line_is_released_at_once_at_a_newline() -> None:
    text = "1. Buy milk\n2. Eat bread\n\n# Title\n---\nDone"
    chunker = IncrementalSentenceChunker()
    released: list[str] = []
    lines_so_far: list[str] = []
    for index, char in enumerate(text):
        released += chunker.feed(char)
        if char == "\n":
            lines_so_far = [line for line in text[:index].split("\n") if line and line != "---"]
            assert released == lines_so_far
    assert chunker.flush() == ["--- Done"]
    assert released == ["1. Buy milk", "2. Eat bread", "# Title"]


def test_flush_returns_nothing_when_nothing_speakable_is_left() -> None:
    chunker = IncrementalSentenceChunker()
    assert chunker.flush() == []
    assert chunker.feed("Hello.\n") == ["Hello."]
    assert chunker.feed("  *** 🎉 \n ") == []
    assert chunker.flush() == []


def test_flush_resets_for_the_next_answer() -> None:
    chunker = IncrementalSentenceChunker()
    chunker.feed("First answer")
    assert chunker.flush() == ["First answer"]
    assert chunker.feed("Second. Answer") == ["Second."]


def test_reset_discards_pending_text() -> None:
    chunker = IncrementalSentenceChunker()
    chunker.feed("Half a sent")
    chunker.reset()
    assert chunker.feed("New one. Next") == ["New one."]


def test_flush_decides_the_boundaries_that_waited_for_the_end() -> None:
    """At the end of the text, a boundary that waited for the character after the last
    word is decided as if a space had come: the chunks do not depend on a trailing space."""
    for text in ("I live in the U.S. How", "Hello 你好。Hello"):
        for schedule in (ChunkSchedule(), ChunkSchedule(first_words=1)):
            chunker = IncrementalSentenceChunker(schedule)
            ended = chunker.feed(text) + chunker.flush()
            spaced = chunker.feed(text + " ") + chunker.flush()
            assert ended == spaced
            assert ended[-1] == text.split("。")[-1].split()[-1], (schedule, ended)
