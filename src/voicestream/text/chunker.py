"""Incremental sentence chunking of streamed text, for speech synthesis.

An LLM's answer arrives in fragments of any size ("Dr", ". Sm", "ith is", " 3.1", "4"). The
chunker hands each sentence to speech synthesis as soon as it is unambiguous, and cuts the
same sentences whatever way the text was fragmented.

How that is guaranteed: the chunker keeps the text it has not emitted yet and scans it for
candidate boundaries (a sentence mark, a newline, a list marker, the ``</speak>`` that closes
an SSML document, each document being a chunk of its own; for the first chunk in latency
mode also a clause mark, a break word or the word cap, see `ChunkSchedule`; never inside
markup). Each candidate is decided by reading only characters that have arrived; a decision
that needs a character beyond the end raises `_NeedMoreText`, and the scan stops there
until more text comes. A decision never depends on where the available text ends, so it
is the same whether the text came whole or one character at a time.

Invariant on the output (see the property tests):
- every chunk contains a letter or digit, and has its whitespace collapsed and stripped;
- removing all whitespace, the concatenated chunks followed by what `flush` dropped equal
  the input, and what `flush` dropped contains no letter or digit;
- for text without the unspaced sentence marks of scripts like Chinese ("。！？"), every
  boundary falls on whitespace (or after a document's ``</speak>``), so `" ".join(chunks)`
  is the input (with no documents back to back) with whitespace runs collapsed to one
  space and stripped, less that unspeakable tail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from voicestream.text.abbreviations import (
    DAY_MONTHS,
    FRONTED_TIME_PREPOSITIONS,
    NAMES_AFTER_TIME,
    SENTENCE_STARTERS,
    AbbreviationKind,
    abbreviation_kind,
    precedes_numbers,
)
from voicestream.text.markup import (
    DOCUMENT_OPENERS,
    SPEAK_NAME_ENDS,
    document_ends_at,
    ends_inside_markup,
)
from voicestream.text.schedule import (
    BREAK_WORDS,
    CUTS_END_AFTER_WORDS,
    PHRASE_WORDS,
    SENTENCES,
    ChunkSchedule,
)

SPACED_TERMINATORS = frozenset(".!?…‼⁇⁈⁉؟۔։")
"""Sentence marks that end a sentence only when whitespace follows them."""

UNSPACED_TERMINATORS = frozenset("。．｡！？।॥።፧။")
"""Sentence marks of scripts that need no space after a sentence."""

TERMINATORS = SPACED_TERMINATORS | UNSPACED_TERMINATORS

CLOSERS = frozenset("\"'”’»›)]}」』】〕〉》）＂＇*_`")
"""Characters that stay with the sentence they close: quotes, brackets, emphasis."""

OPENERS = frozenset("\"'“‘«‹([{「『【〔〈《（¿¡*_`#>")
"""Characters that belong to the word they precede."""

BULLETS = frozenset("•⁃◦‣▪")

NEWLINES = frozenset("\n\r\u2028\u2029\x0b\x0c\x85")

SPACED_CLAUSE_MARKS = frozenset(",;:—–-")
UNSPACED_CLAUSE_MARKS = frozenset("，；：、")

_LIST_MARKER = re.compile(r"[•⁃◦‣▪]?(\d{1,2}|[A-Za-z]|[ivxIVX]{2,4})(?:\.\)|\.|\))")
_LIST_MARKER_PREFIX = re.compile(r"[•⁃◦‣▪]?(?:(?:\d{1,2}|[A-Za-z]|[ivxIVX]{2,4})(?:\.\)?|\))?)?")
"""Matches every prefix of a list marker: while an incomplete token matches it, the token
may still turn out to be a marker."""
_SPEAKABLE_OR_NEWLINE = re.compile("[^\\W_]|[" + "".join(NEWLINES) + "]")
"""A letter or digit (what `str.isalnum` accepts) or a newline; searched in C, since the
text after a sentence mark may be a long run of symbols or spaces."""
_FEED_WINDOW = 256
"""`feed` hands the scan at most this many new characters at a time, so that cutting a
chunk off the pending text copies only what is left of the window, not the whole rest of a
long fragment; the chunks are the same however the text is split (the module's rule)."""
_MAX_LIST_MARKER_LEN = 6
_MAX_WORD_LEN = 40
_MAX_BREAK_WORD_LEN = max(len(word) for word in BREAK_WORDS | PHRASE_WORDS)
_STANDALONE_BULLET_TOKENS = frozenset({"-", "*", "+"}) | BULLETS


@dataclass(frozen=True, slots=True)
class Chunk:
    """A chunk and where it lies in all the text the chunker was fed: ``raw`` is
    ``fed[start:end]``, the chunk as written (from its first character that is not
    whitespace to its last); ``text`` is the same with its whitespace collapsed."""

    text: str
    raw: str
    start: int
    end: int


class _NeedMoreText(Exception):
    """A decision needs text that has not arrived yet."""


def _is_speakable(char: str) -> bool:
    return char.isalnum()


def _collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


class _Lookahead:
    """Read access to the pending text that raises `_NeedMoreText` past its end.

    `resume` remembers how far an unbounded look ahead (a run of sentence marks, the way to
    the next letter) got before the text ran out, keyed by what it looked for and where it
    started, so that text fed one character at a time is not rescanned from there on every
    fragment. It lives as long as one chunk's pending text, which only grows."""

    def __init__(self, text: str, ended: bool) -> None:
        self.text = text
        self.ended = ended
        """Whether the text is complete (`flush`): then the end reads as one space, so that
        decisions that waited for the character after a word are made."""
        self.resume: dict[tuple[str, int], int] = {}

    def __getitem__(self, index: int) -> str:
        if index < len(self.text):
            return self.text[index]
        if self.ended and index == len(self.text):
            return " "
        raise _NeedMoreText


def _opens_document(text: _Lookahead, i: int) -> bool:
    """Whether an SSML document opens at ``i`` (`markup.DOCUMENT_OPENERS`, as `is_document`
    reads them), reading only as far as that is undecided."""
    for opener in DOCUMENT_OPENERS:
        if all(text[i + k].lower() == opener[k] for k in range(len(opener))):
            return opener != "<speak" or text[i + len(opener)] in SPEAK_NAME_ENDS
    return False


class IncrementalSentenceChunker:
    """Cuts streamed text into sentences for speech synthesis.

    `feed` returns the chunks that became unambiguous with the new fragment, `flush` what
    is left at the end. A sentence is released at the latest once the first word of the
    next sentence has arrived (the whole word when an abbreviation makes the boundary
    ambiguous, "the U.S. How"), and at once at a newline.

    `schedule` sets how long the chunks of one answer are (see `ChunkSchedule`): by default
    every chunk is one sentence; in latency mode the first chunk ends at the first good
    break after a few words, and later chunks may group several sentences.
    """

    def __init__(self, schedule: ChunkSchedule = SENTENCES) -> None:
        self.schedule = schedule
        self._fed = 0
        """Characters fed in all, across resets: where `Chunk` offsets count from."""
        self.reset()

    def reset(self) -> None:
        """Forget all pending text and start a new answer (the schedule starts over)."""
        self._ended = False
        """Set by `flush`: the pending text is all there is."""
        self._chunks_emitted = 0
        """Chunks that ended at a sentence end: a sentence cut in pieces counts once."""
        self._cuts = 0
        """Latency-mode cuts inside sentences so far."""
        self._last_chunk_words = 0
        """Words of the longest chunk so far: the next latency-mode piece grows from it."""
        self._group: list[str] = []
        """The sentences of the chunk being grouped, as raw slices of the input."""
        self._group_start = self._pending_start = self._fed
        """Where the group, and the pending text, start in all the text fed."""
        self._start_chunk("")

    def feed(self, fragment: str) -> list[str]:
        """Add a fragment of text; return the chunks it completed, in order."""
        return [chunk.text for chunk in self.feed_chunks(fragment)]

    def feed_chunks(self, fragment: str) -> list[Chunk]:
        """`feed`, each chunk with where it lies in the text fed (`Chunk`)."""
        chunks: list[Chunk] = []
        for start in range(0, len(fragment), _FEED_WINDOW):
            window = fragment[start : start + _FEED_WINDOW]
            self._pending += window
            self._fed += len(window)
            chunks += self._ready_chunks()
        return chunks

    def _ready_chunks(self) -> list[Chunk]:
        chunks: list[Chunk] = []
        while (boundary := self._scan()) is not None:
            mid_sentence, document = self._cut_mid_sentence, self._cut_document
            if document and self._group:  # an SSML document is a chunk of its own
                chunks.append(self._take_group())
                self._chunks_emitted += 1
            if not self._group:
                self._group_start = self._pending_start
            self._group.append(self._pending[:boundary])
            self._pending_start += boundary
            self._start_chunk(self._pending[boundary:])
            if mid_sentence:  # a latency-mode cut: the chunk ends inside a sentence
                chunks.append(self._take_group())
                self._cuts += 1
            elif document or len(self._group) >= self.schedule.sentences_in(self._chunks_emitted):
                chunks.append(self._take_group())
                self._chunks_emitted += 1
        return chunks

    def _take_group(self, rest: str = "") -> Chunk:
        raw = "".join(self._group) + rest
        start = self._group_start + len(raw) - len(raw.lstrip())
        raw = raw.strip()
        chunk = Chunk(_collapse_whitespace(raw), raw, start, start + len(raw))
        self._last_chunk_words = max(self._last_chunk_words, _count_words(chunk.text))
        self._group = []
        return chunk

    @property
    def pending_text(self) -> str:
        """The text fed since the last cut (a chunk grouping sentences already cut holds them
        apart): where markup still open lies, since no cut is made inside markup."""
        return self._pending

    def flush(self) -> list[str]:
        """Return the chunks of the rest of the text (none if nothing speakable is left);
        then reset for the next answer."""
        return [chunk.text for chunk in self.flush_chunks()]

    def flush_chunks(self) -> list[Chunk]:
        """`flush`, each chunk with where it lies in the text fed (`Chunk`).

        The end of the text is known now, so the boundaries that waited for what follows
        the last word are decided ("the U.S. How" fed whole ends in two chunks, as it would
        with a space after it); whatever no boundary cuts off is the last chunk."""
        self._ended = self._lookahead.ended = True
        chunks = self._ready_chunks()
        rest = self._pending if any(_is_speakable(c) for c in self._pending) else ""
        if not self._group:
            self._group_start = self._pending_start
        last = self._take_group(rest)
        self.reset()
        return [*chunks, last] if last.text else chunks

    # --- scanning ---------------------------------------------------------------------

    def _start_chunk(self, pending: str) -> None:
        self._pending = pending
        self._lookahead = _Lookahead(pending, self._ended)
        self._cut_mid_sentence = False
        """Whether the boundary `_scan` returns is a latency-mode cut, not a sentence end."""
        self._cut_document = False
        """Whether the boundary `_scan` returns ends an SSML document (its ``</speak>``)."""
        self._position = 0
        """Where scanning resumes: every candidate before it was decided as no boundary."""
        self._speakable_seen = False
        """Whether the chunk before `_position` holds a letter or digit."""
        self._tokens = self._words = 0
        """Whitespace-separated tokens, and those with a letter or digit (words), that end
        before `_position`; `_in_token` and `_in_word` say whether one is open there."""
        self._in_token = self._in_word = False
        self._last_token_start = -1
        self._list_marker: str | None = None
        """The value ("1", "a") of the last list marker seen in this chunk."""
        self._list_marker_end = 0
        self._tokens_since_list_marker = 0

    def _scan(self) -> int | None:
        """Advance through the pending text; return the next boundary, or None when the
        text runs out before one is decided."""
        text = self._lookahead
        text.text = self._pending
        try:
            while self._position < len(self._pending):
                i = self._position
                boundary = self._boundary_at(text, i)
                if boundary is not None and not ends_inside_markup(self._pending[:boundary]):
                    return boundary
                self._step_over(self._pending[i])
        except _NeedMoreText:
            pass
        return None

    def _step_over(self, char: str) -> None:
        """Advance `_position` past `char`, keeping the counts before it."""
        if char.isspace():
            self._tokens += self._in_token
            self._words += self._in_word
            self._in_token = self._in_word = False
        else:
            self._in_token = True
            if _is_speakable(char):
                self._in_word = self._speakable_seen = True
        self._position += 1

    def _words_before(self) -> int:
        """`_count_words(self._pending[:self._position])`, without recounting."""
        return self._words + self._in_word

    def _boundary_at(self, text: _Lookahead, i: int) -> int | None:
        char = text[i]
        if char == ">" and document_ends_at(self._pending, i + 1):
            self._cut_document = True
            return i + 1
        if char in NEWLINES:
            return i + 1 if self._speakable_seen else None
        if i > self._last_token_start and not char.isspace() and (i == 0 or text[i - 1].isspace()):
            if char == "<" and self._speakable_seen and _opens_document(text, i):
                return i  # the text before a document is a chunk of its own
            boundary = self._first_chunk_break(text, i)
            if boundary is not None:
                return boundary
            boundary = self._token_boundary(text, i)
            self._last_token_start = i
            if boundary is not None:
                return boundary
        if char in TERMINATORS:
            return self._sentence_boundary(text, i)
        if char in SPACED_CLAUSE_MARKS or char in UNSPACED_CLAUSE_MARKS:
            return self._clause_boundary(text, i)
        return None

    # --- list markers and bullets -----------------------------------------------------

    def _token_boundary(self, text: _Lookahead, i: int) -> int | None:
        """Decide at the start of a whitespace-separated token: a bullet or the next
        list marker ("1. Buy milk 2. Eat") starts a new chunk."""
        if text[i] in BULLETS and self._speakable_seen:
            return i
        token = self._short_token(text, i)
        marker = _LIST_MARKER.fullmatch(token) if token is not None else None
        if marker is None:
            self._tokens_since_list_marker += 1
            return None
        value = marker.group(1)
        if (
            self._list_marker is not None
            and self._tokens_since_list_marker > 0
            and _is_next_list_value(self._list_marker, value)
        ):
            return i
        if self._in_list_marker_context(text.text, i):
            self._list_marker = value
            self._list_marker_end = i + marker.end()
            self._tokens_since_list_marker = 0
        else:
            self._tokens_since_list_marker += 1
        return None

    @staticmethod
    def _short_token(text: _Lookahead, i: int) -> str | None:
        """The token starting at `i` if it is short enough to be a list marker, else None.
        Waits for more text while the token so far could still become a marker."""
        end = i
        while end - i <= _MAX_LIST_MARKER_LEN:
            try:
                char = text[end]
            except _NeedMoreText:
                if _LIST_MARKER_PREFIX.fullmatch(text.text[i:end]):
                    raise
                return None
            if char.isspace():
                return text.text[i:end]
            end += 1
        return None

    @staticmethod
    def _in_list_marker_context(pending: str, i: int) -> bool:
        """Whether a token at `i` may open a list item: first on its line, after a colon,
        or after a bullet that is first on its line ("• 9. The first item")."""
        previous_end = _skip_spaces_back(pending, i)
        if previous_end == 0 or pending[previous_end - 1] in NEWLINES:
            return True
        if pending[previous_end - 1] == ":":
            return True
        previous_start = previous_end
        while previous_start > 0 and not pending[previous_start - 1].isspace():
            previous_start -= 1
        before_previous = _skip_spaces_back(pending, previous_start)
        return pending[previous_start:previous_end] in _STANDALONE_BULLET_TOKENS and (
            before_previous == 0 or pending[before_previous - 1] in NEWLINES
        )

    # --- sentence marks ---------------------------------------------------------------

    def _sentence_boundary(self, text: _Lookahead, i: int) -> int | None:
        if i < self._list_marker_end:
            return None
        pending = text.text
        if _continues_a_run(pending, i):
            return None  # decided at the start of the run
        run_end = _run_end(text, i)
        marks = "".join(c for c in pending[i:run_end] if c in TERMINATORS)
        unspaced = any(c in UNSPACED_TERMINATORS for c in marks)
        if unspaced:
            if marks == "．" and i > 0 and pending[i - 1].isdigit() and text[run_end].isdigit():
                return None  # a full-width decimal point
        elif not text[run_end].isspace():
            return None
        start = self._next_speakable(text, run_end)
        if start is None or not self._speakable_seen:
            return None
        if not unspaced and not self._ends_sentence(text, i, marks, start):
            return None
        if (
            marks == "."
            and _word_before(pending, i)
            and _is_spaced_ellipsis(pending[run_end:start])
        ):
            return run_end  # ". . ." opens the next sentence: "compounds. . . . The"
        return self._attach_point(pending, run_end, start)

    def _ends_sentence(self, text: _Lookahead, i: int, marks: str, start: int) -> bool:
        """Whether spaced marks at `i`, followed by a speakable character at `start`,
        end a sentence."""
        pending = text.text
        first = pending[start]
        if first.islower() and not _is_formula_start(text, start):
            return False
        if marks != ".":
            return not (_is_ellipsis(marks) and i > 0 and pending[i - 1] == "[")
        word = _word_before(pending, i)
        if not word:
            return _spaced_dot_count(text, i) != 3
        if first.isdigit():
            return not precedes_numbers(word)
        if word.isdigit() and _next_word(text, start) in DAY_MONTHS:
            return False  # a European date: "am 3. Juli"
        kind = abbreviation_kind(word)
        if kind is None:
            return True
        if kind is AbbreviationKind.PREFIX:
            return False
        next_word = _next_word(text, start)
        if kind is AbbreviationKind.POSTFIX:
            return next_word in SENTENCE_STARTERS
        tokens = self._tokens + self._in_token
        if word.lower() in {"a.m", "p.m"} and _is_fronted_time_phrase(pending, i, tokens):
            return False
        return next_word not in NAMES_AFTER_TIME

    @staticmethod
    def _next_speakable(text: _Lookahead, start: int) -> int | None:
        """The first letter or digit from `start` on, or None if a newline comes first."""
        key = ("speakable", start)
        found = _SPEAKABLE_OR_NEWLINE.search(text.text, text.resume.get(key, start))
        if found is None:
            text.resume[key] = len(text.text)
            raise _NeedMoreText
        return None if found.group() in NEWLINES else found.start()

    @staticmethod
    def _attach_point(pending: str, run_end: int, start: int) -> int:
        """Where to cut between a sentence ending at `run_end` and the speakable text at
        `start`: punctuation in between stays with the sentence, except openers (quotes,
        brackets, bullets) that belong to the next word."""
        cut = start
        while cut > run_end and not pending[cut - 1].isspace():
            cut -= 1
        while cut > run_end:
            end = cut
            while end > run_end and pending[end - 1].isspace():
                end -= 1
            token_start = end
            while token_start > run_end and not pending[token_start - 1].isspace():
                token_start -= 1
            token = pending[token_start:end]
            if not token or not all(c in OPENERS or c in BULLETS for c in token):
                break
            cut = token_start
        return cut

    # --- latency mode -----------------------------------------------------------------

    def _may_cut(self) -> bool:
        """Whether a latency-mode cut may fall here: inside a sentence, no long chunk yet."""
        return (
            self.schedule.first_words is not None
            and self._last_chunk_words < CUTS_END_AFTER_WORDS
            and self._speakable_seen
        )

    def _clause_boundary(self, text: _Lookahead, i: int) -> int | None:
        if not self._may_cut():
            return None
        pending = text.text
        if pending[i] in SPACED_CLAUSE_MARKS:
            if not text[i + 1].isspace():
                return None
            if pending[i] == "-" and (i == 0 or not pending[i - 1].isspace()):
                return None
        if self._words_before() < self.schedule.min_words(self._cuts, self._last_chunk_words):
            return None
        start = self._next_speakable(text, i + 1)
        if start is None:
            return None
        self._cut_mid_sentence = True
        return self._attach_point(pending, i + 1, start)

    def _first_chunk_break(self, text: _Lookahead, i: int) -> int | None:
        """In latency mode, cut the first sentence before the token at `i` when the
        schedule says so: a break word (a conjunction, preposition or relative word) after
        enough words, a phrase word one word later, anything at the word cap."""
        if not self._may_cut() or i < self._list_marker_end:
            return None
        words = self._words_before()
        if words < self.schedule.min_words(self._cuts, self._last_chunk_words):
            return None
        token = _whole_token(text, i)
        if not any(_is_speakable(c) for c in token):
            return None
        previous = _word_before(text.text, _skip_spaces_back(text.text, i))
        if not self.schedule.ends_before(words, token, self._cuts, previous, self._last_chunk_words):
            return None
        self._cut_mid_sentence = True
        return i


def _continues_a_run(pending: str, i: int) -> bool:
    """Whether the sentence mark at `i` follows another one, possibly through closing
    quotes or brackets ('"Stop!"!'); closers alone do not start a run ('said "Hi".')."""
    k = i
    while k > 0 and pending[k - 1] in CLOSERS:
        k -= 1
    return k > 0 and pending[k - 1] in TERMINATORS


def _run_end(text: _Lookahead, i: int) -> int:
    """The end of the run of sentence marks at `i`, with the quotes, brackets and footnote
    references that close it ("He left.\")", "It is true.[1]")."""
    key = ("run", i)
    end = text.resume.get(key, i)
    try:
        while True:
            if text[end] in TERMINATORS or text[end] in CLOSERS:
                end += 1
            elif footnote := _footnote_length(text, end):
                end += footnote
            else:
                return end
    except _NeedMoreText:
        text.resume[key] = end
        raise


def _footnote_length(text: _Lookahead, start: int) -> int:
    """The length of a footnote reference such as "[12]" at `start`, or 0."""
    if text[start] != "[":
        return 0
    end = start + 1
    while text[end].isdigit() and end - start <= 3:
        end += 1
    return end + 1 - start if end > start + 1 and text[end] == "]" else 0


def _is_ellipsis(marks: str) -> bool:
    return marks == "…" or (len(marks) > 1 and set(marks) == {"."})


def _skip_spaces_back(pending: str, end: int) -> int:
    """The start of the run of non-newline whitespace that ends at `end`."""
    while end > 0 and pending[end - 1].isspace() and pending[end - 1] not in NEWLINES:
        end -= 1
    return end


def _is_spaced_ellipsis(text: str) -> bool:
    return text.split() == [".", ".", "."]


def _is_next_list_value(previous: str, value: str) -> bool:
    if previous.isdigit() and value.isdigit():
        return int(value) == int(previous) + 1
    if len(previous) == 1 and len(value) == 1 and previous.isalpha():
        return ord(value) == ord(previous) + 1
    return False


def _word_before(pending: str, i: int) -> str:
    """The token ending at `i`, without the quotes or brackets that open it."""
    start = i
    while start > 0 and not pending[start - 1].isspace():
        start -= 1
    return pending[start:i].lstrip("".join(OPENERS))


def _next_word(text: _Lookahead, start: int) -> str:
    """The run of letters starting at `start`. A single letter followed by a period is an
    initial ("J. R. R. Tolkien"), returned with its period so that it matches no
    sentence starter."""
    end = start
    while text[end].isalpha():
        end += 1
        if end - start > _MAX_WORD_LEN:
            return text.text[start:end]
    if end - start == 1 and text[end] == ".":
        return text.text[start : end + 1]
    return text.text[start:end]


def _is_formula_start(text: _Lookahead, start: int) -> bool:
    """Whether a lower-case start is a formula rather than a word, as in "f(x) = 2x"."""
    return text[start + 1] == "("


def _spaced_dot_count(text: _Lookahead, i: int) -> int:
    """How many dots the spaced ellipsis (". . .") through the dot at `i` has, counting
    at most to 4: only whether it has exactly three matters."""
    pending = text.text
    count = 1
    k = i
    while count < 4:
        j = k - 1
        while j >= 0 and pending[j] == " ":
            j -= 1
        if j < k - 1 and j >= 0 and pending[j] == ".":
            count += 1
            k = j
        else:
            break
    k = i
    while count < 4:
        j = k + 1
        while text[j] == " ":
            j += 1
        if j > k + 1 and text[j] == ".":
            count += 1
            k = j
        else:
            break
    return count


def _whole_token(text: _Lookahead, start: int) -> str:
    """The token starting at `start`, once the whitespace after it has arrived; only its
    length up to the longest break word matters."""
    end = start
    while not text[end].isspace():
        end += 1
        if end - start > _MAX_BREAK_WORD_LEN:
            return text.text[start:end]
    return text.text[start:end]


def _count_words(text: str) -> int:
    return sum(1 for token in text.split() if any(_is_speakable(c) for c in token))


def _is_fronted_time_phrase(pending: str, i: int, tokens: int) -> bool:
    """Whether the chunk up to "a.m."/"p.m." at `i`, `tokens` tokens long, is only a time
    phrase opening a sentence ("At 5 a.m. Mr. Smith went out"), which cannot be a sentence
    on its own."""
    return 2 <= tokens <= 3 and pending[:i].split(maxsplit=1)[0].lower() in FRONTED_TIME_PREPOSITIONS
