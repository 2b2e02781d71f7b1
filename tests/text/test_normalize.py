"""normalize_for_speech: one test per rule, stability, and safety on any input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicestream.text import normalize_for_speech

RULES: list[tuple[str, str, str]] = [
    # markdown
    ("bold", "This is **very** important.", "This is very important."),
    ("bold underscores", "This is __very__ important.", "This is very important."),
    ("italic", "It is *quite* _nice_ here.", "It is quite nice here."),
    ("nested emphasis", "***Both*** at once.", "Both at once."),
    ("strikethrough", "It is ~~cheap~~ free.", "It is cheap free."),
    ("snake_case survives", "Set max_tokens to 5.", "Set max_tokens to 5."),
    ("multiplication survives", "Compute 5 * 3 now.", "Compute 5 * 3 now."),
    ("heading", "## Getting started", "Getting started"),
    ("hash tag survives", "Use #general please.", "Use #general please."),
    ("dash bullets", "- eggs\n- milk", "eggs\nmilk"),
    ("star bullets", "* eggs\n* milk", "eggs\nmilk"),
    ("numbered list kept", "1. eggs\n2. milk", "1. eggs\n2. milk"),
    ("blockquote", "> Quoted words.", "Quoted words."),
    ("horizontal rule", "Above.\n---\nBelow.", "Above.\nBelow."),
    ("inline code", "Run `make test` now.", "Run make test now."),
    ("link keeps its text", "See [the docs](https://x.io/docs) first.", "See the docs first."),
    ("image dropped", "Look: ![a cat](cat.png) nice.", "Look: nice."),
    ("code fence dropped", "Try:\n```python\nprint('hi')\n```\nDone.", "Try:\nDone."),
    ("unclosed fence marker dropped", "```bash\nls -la", "ls -la"),
    ("table", "| Name | Age |\n|---|---|\n| Ann | 30 |", "Name, Age\nAnn, 30"),
    # HTML
    ("html tags", "<p>Hello <b>there</b>.</p>", "Hello there."),
    ("html line break", "One<br>Two", "One\nTwo"),
    ("html comment", "Keep <!-- hidden --> this.", "Keep this."),
    ("html entities", "Fish &amp; chips", "Fish and chips"),
    ("comparison survives", "If a < b and c > d, stop.", "If a < b and c > d, stop."),
    # emoji
    ("emoji", "Great job! 🎉👍🏽", "Great job!"),
    ("emoji sequence", "Family: 👨‍👩‍👧 here.", "Family: here."),
    ("flag", "Made in 🇫🇷 France.", "Made in France."),
    ("keycap", "Press 1️⃣ now.", "Press 1 now."),
    # money
    ("dollars and cents", "It costs $29.95.", "It costs 29 dollars 95 cents."),
    ("whole dollars", "She has $100.00 in her bag.", "She has 100 dollars in her bag."),
    ("one dollar", "Only $1!", "Only 1 dollar!"),
    ("cents only", "Just $0.99 each.", "Just 99 cents each."),
    ("one cent", "It is $0.01.", "It is 1 cent."),
    ("thousands", "A $1,250 fee.", "A 1250 dollars fee."),
    ("scaled", "Raised $1.5 million.", "Raised 1 point 5 million dollars."),
    ("scale letter", "A $5B deal.", "A 5 billion dollars deal."),
    ("euros", "Pay €20.50 today.", "Pay 20 euros 50 cents today."),
    ("pounds", "Costs £3.", "Costs 3 pounds."),
    # numbers
    ("decimal", "About 3.5 liters.", "About 3 point 5 liters."),
    ("decimal at sentence end", "Pi is 3.14.", "Pi is 3 point 1 4."),
    ("percent", "Up 50% today.", "Up 50 percent today."),
    ("decimal percent", "Rate is 2.5%.", "Rate is 2 point 5 percent."),
    ("thousands separator", "We sold 1,000,000 units.", "We sold 1000000 units."),
    ("version survives", "Install v1.2.3 now.", "Install v1.2.3 now."),
    ("dotted version survives", "Version 1.2.3 is out.", "Version 1.2.3 is out."),
    ("ip address survives", "Ping 192.168.0.1 now.", "Ping 192.168.0.1 now."),
    ("degrees", "It is 25°C outside.", "It is 25 degrees Celsius outside."),
    ("range", "Read pages 5–10.", "Read pages 5 to 10."),
    # times
    ("time am", "Meet at 10:30 a.m. sharp.", "Meet at 10 30 A M sharp."),
    ("time am at sentence end", "Meet at 10:30 a.m.", "Meet at 10 30 A M."),
    (
        "time pm before a sentence",
        "Call at 5 p.m. Tomorrow works.",
        "Call at 5 P M. Tomorrow works.",
    ),
    ("time on the hour", "Lunch at 12:00.", "Lunch at 12 o'clock."),
    ("time with leading zero minutes", "At 9:05 PM we left.", "At 9 oh 5 P M we left."),
    ("compact pm", "Open until 5pm daily.", "Open until 5 P M daily."),
    # abbreviations
    ("doctor", "Dr. Smith is in.", "Doctor Smith is in."),
    ("mister and missus", "Mr. and Mrs. Jones came.", "Mister and Missus Jones came."),
    ("month before a day", "Due Jan. 5, 2025.", "Due January 5, 2025."),
    ("saint", "St. Michael's Church.", "Saint Michael's Church."),
    ("street", "It is on 5th St. near the light.", "It is on 5th Street near the light."),
    ("for example", "Fruit, e.g. apples.", "Fruit, for example apples."),
    ("that is", "The best, i.e., the first.", "The best, that is, the first."),
    (
        "et cetera mid sentence",
        "Apples, pears, etc. are fruit.",
        "Apples, pears, et cetera are fruit.",
    ),
    ("et cetera at sentence end", "Apples, pears, etc.", "Apples, pears, et cetera."),
    ("versus", "Cats vs. dogs.", "Cats versus dogs."),
    ("number", "It is No. 1 in sales.", "It is Number 1 in sales."),
    ("figure", "See fig. 3 below.", "See figure 3 below."),
    ("page", "Turn to p. 55.", "Turn to page 55."),
    ("company at sentence end", "Pitt & Co. It closed.", "Pitt and Company. It closed."),
    ("junior", "King Jr. spoke.", "King Junior spoke."),
    ("ampersand", "R&D and Q & A.", "R and D and Q and A."),
    # untouched
    (
        "urls are left alone",
        "Go to https://a.com/x_y?a=1&b=2. Now.",
        "Go to https://a.com/x_y?a=1&b=2. Now.",
    ),
    (
        "e-mail is left alone",
        "Write to jane.doe@example.com today.",
        "Write to jane.doe@example.com today.",
    ),
    (
        "sentence punctuation kept",
        "Really?! Yes... no; maybe: fine.",
        "Really?! Yes... no; maybe: fine.",
    ),
    (
        "whitespace tidied",
        "  Too   many\t spaces.\n\n\nNext line.  ",
        "Too many spaces.\nNext line.",
    ),
    ("chinese untouched", "你好。我很好！", "你好。我很好！"),
]


@pytest.mark.parametrize(("text", "expected"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_rule(text: str, expected: str) -> None:
    assert normalize_for_speech(text) == expected


@pytest.mark.parametrize("text", [r[1] for r in RULES], ids=[r[0] for r in RULES])
def test_normalizing_twice_changes_nothing(text: str) -> None:
    once = normalize_for_speech(text)
    assert normalize_for_speech(once) == once


def test_empty_and_unspeakable_input() -> None:
    assert normalize_for_speech("") == ""
    assert normalize_for_speech("**  🎉 **\n\n") == ""


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_never_raises_on_any_text(text: str) -> None:
    assert isinstance(normalize_for_speech(text), str)


# fmt: off
MARKUP_HEAVY_TOKENS = [
    "**", "*", "_", "__", "`", "```", "~~", "#", "- ", "> ", "[", "]", "(", ")", "!",
    "<b>", "</b>", "<br>", "&amp;", "&", "$", "€", "%", ".", ",", ":", "a.m.", "p.m.",
    "Dr.", "St.", "e.g.", "etc.", "No.", "Jan.", "12", "3", "05", "1,000", "3.14",
    "x", "word", "Name", "🎉", "👍🏽", "|", "\n", " ", "https://a.io/x.y", "a@b.co",
]
# fmt: on
MARKUP_HEAVY = st.lists(st.sampled_from(MARKUP_HEAVY_TOKENS), max_size=60).map("".join)


@settings(max_examples=200, deadline=None)
@given(MARKUP_HEAVY)
def test_never_raises_on_markup_heavy_text(text: str) -> None:
    assert isinstance(normalize_for_speech(text), str)
