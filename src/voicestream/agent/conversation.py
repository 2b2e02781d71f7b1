"""What the agent remembers of each conversation, and what the listener heard of an answer.

A conversation is named by AgentCore's session id header
(`X-Amzn-Bedrock-AgentCore-Runtime-Session-Id`): AgentCore passes it to the runtime for every
invocation of one session, and the page and the clients send it themselves when they talk to
the agent directly. Each answer of a conversation is one `Turn` (the question, the answer's
text and, for cutting it, the pieces of it that were spoken with their audio durations); the
next question gets the finished turns as chat messages, which every LLM provider reads as
its own message list (llama.cpp's chat template, OpenAI's messages, Bedrock Converse's).

Everything is bounded: turns and characters per conversation, how long a conversation may
stay idle, how many conversations are held (the least recently used goes first), and how
long a question waits for the turn before it to be recorded.

When the listener interrupts an answer, the next invocation says how much of its audio was
played (`interrupted.heard_ms`, PROTOCOL.md section 2), and that turn keeps only the words
heard (`heard_text`): the speech server's word times where it sent them (each word with its
offset in the text the agent sent, as the LLM wrote it), else each spoken piece's audio
duration shared out over its characters.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from strands.types.content import Messages

from voicestream.agent.env import fields_from_env
from voicestream.protocol import WordTiming

BYTES_PER_SECOND = 48000
"""pcm16 at 24 kHz, mono: what the agent's audio is."""
ENDED_WITHIN_S = 1e-9
"""A word whose end lies this close past the moment heard counts as heard: its end is a sum of
float offsets, so the same moment can come out a few ulps apart."""


# --- what was heard ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WordTime:
    """One word as spoken: seconds from the start of its piece's audio, and where it ends
    in the piece's text (the speech server's ``end_char``; None from a server without)."""

    word: str
    start_s: float
    end_s: float
    end_char: int | None = None


@dataclass(frozen=True, slots=True)
class SpokenPiece:
    """One speech request of an answer (in every mode, the whole answer: streamed in pieces
    in bidi, sent once in the batch modes): its text as the LLM wrote it, the length of its
    audio, and its word times when the speech server sent them."""

    text: str
    duration_s: float
    words: tuple[WordTime, ...] | None = None


_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
"""A word: a run of non-space characters, or one Japanese or Chinese character (no spaces
there to split on)."""


def heard_text(pieces: Sequence[SpokenPiece], heard_s: float) -> str:
    """The words of `pieces`, played back to back, whose audio had ended by `heard_s`.

    A word counts as heard once its audio has played to its end. Word times are used where a
    piece has them; otherwise a piece's duration is shared over its characters (a word ends
    at the share of the duration its last character reaches). A piece without audio was not
    heard, nor anything after it. The result is a prefix of the pieces' texts (joined by
    spaces), cut after the last word heard.
    """
    heard: list[str] = []
    offset = 0.0
    for piece in pieces:
        text = piece.text.strip()
        if not text:
            continue
        if piece.duration_s <= 0:
            break
        kept, whole = 0, True
        for end_char, end_s in _word_ends(text, piece):
            if offset + end_s > heard_s + ENDED_WITHIN_S:
                whole = False
                break
            kept = end_char
        if kept:
            heard.append(text[:kept])
        if not whole:
            break
        offset += piece.duration_s
    return " ".join(heard)


def _word_ends(text: str, piece: SpokenPiece) -> list[tuple[int, float]]:
    """(index in `text`, the piece's stripped text, just after the word; when its audio
    ends) for each word in order: where the server placed each word, else the piece's
    duration shared over its characters."""
    lead = len(piece.text) - len(piece.text.lstrip())
    if piece.words and all(word.end_char is not None for word in piece.words):
        return [(min(max((word.end_char or 0) - lead, 0), len(text)), word.end_s) for word in piece.words]
    return [(m.end(), piece.duration_s * m.end() / len(text)) for m in _TOKEN.finditer(text)]


OPENING = "(The conversation begins.)"
"""The user's message before an answer that opens a conversation unasked (a greeting)."""


def chat(turns: Iterable[tuple[str, str]], question: str | None = None) -> Messages:
    """(question, answer) turns, then `question`, as alternating user and assistant messages
    that each have text, starting with the user's, as Bedrock Converse requires (it refuses an
    empty text block, and a conversation that opens with the assistant; chat templates expect
    the same): the question of a turn without an answer (none heard, or the LLM failed) joins
    the next one; an answer nobody asked for (a phone call's greeting, a response created with
    no user words) joins the answer before it, and where it opens the conversation follows
    `OPENING` as the user's first message, so that the model knows what it already said."""
    messages: Messages = []
    asked: list[str] = []
    for asked_now, answer in [*turns, *([(question, "")] if question is not None else [])]:
        if asked_now.strip():
            asked.append(asked_now)
        if not answer.strip():
            continue
        if asked:
            messages.append({"role": "user", "content": [{"text": "\n".join(asked)}]})
            messages.append({"role": "assistant", "content": [{"text": answer}]})
            asked = []
        elif messages:
            said = messages[-1]["content"][0]["text"]
            messages[-1] = {"role": "assistant", "content": [{"text": f"{said} {answer}"}]}
        else:
            messages.append({"role": "user", "content": [{"text": OPENING}]})
            messages.append({"role": "assistant", "content": [{"text": answer}]})
    if asked:
        messages.append({"role": "user", "content": [{"text": "\n".join(asked)}]})
    return messages


# --- the store -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConversationLimits:
    """The bounds of what is remembered (PROTOCOL.md section 2).

    Per conversation the last `max_turns` turns, and of those at most `max_history_chars`
    characters (the oldest turns go first; a turn longer than that on its own is not kept);
    a conversation idle for `idle_s` is forgotten, and at most `max_conversations` are held.
    A question waits at most `turn_wait_s` for the answer before it (one the listener just
    interrupted is still closing) to be recorded; past that it is answered without it.
    """

    max_turns: int = 20
    max_history_chars: int = 16000
    idle_s: float = 1800.0
    max_conversations: int = 1000
    turn_wait_s: float = 5.0

    def __post_init__(self) -> None:
        if min(self.max_turns, self.max_history_chars, self.max_conversations) < 0:
            raise ValueError("conversation limits must not be negative")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ConversationLimits:
        """From VOICESTREAM_MAX_TURNS, VOICESTREAM_MAX_HISTORY_CHARS, VOICESTREAM_IDLE_S,
        VOICESTREAM_MAX_CONVERSATIONS and VOICESTREAM_TURN_WAIT_S; 0 turns keeps no memory."""
        return cls(**fields_from_env(cls, env))


@dataclass(eq=False, slots=True)
class Turn:
    """One question and its answer. The runtime adds to it as the answer goes
    (`add_text`, `add_piece`, `add_audio`); the store records it once `finish` is called."""

    request_id: str
    question: str
    text: str = ""
    pieces: list[SpokenPiece] = field(default_factory=list)
    heard_s: float | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def add_text(self, delta: str) -> None:
        self.text += delta

    def add_piece(self, text: str) -> None:
        """A piece of the answer went to the speech server (its index is its position)."""
        self.pieces.append(SpokenPiece(text, 0.0))

    def extend_piece(self, index: int, text: str) -> None:
        """More text of piece `index` went to the speech server (a streamed utterance)."""
        if 0 <= index < len(self.pieces):
            piece = self.pieces[index]
            self.pieces[index] = SpokenPiece(piece.text + text, piece.duration_s, piece.words)

    def add_words(self, index: int, words: Sequence[WordTiming]) -> None:
        """The speech server's word times for piece `index` (from the start of its audio)."""
        if 0 <= index < len(self.pieces):
            piece = self.pieces[index]
            timed = tuple(WordTime(w.word, w.start_s, w.end_s, w.end_char) for w in words)
            self.pieces[index] = SpokenPiece(piece.text, piece.duration_s, (*(piece.words or ()), *timed))

    def add_audio(self, index: int, nbytes: int) -> None:
        """`nbytes` of pcm16 audio of piece `index` went to the caller."""
        if 0 <= index < len(self.pieces):
            piece = self.pieces[index]
            self.pieces[index] = SpokenPiece(
                piece.text, piece.duration_s + nbytes / BYTES_PER_SECOND, piece.words
            )

    @property
    def answer(self) -> str:
        """The answer as the listener has it: the words heard when they interrupted, else
        all of it."""
        if self.heard_s is None:
            return self.text.strip()
        return heard_text(self.pieces, self.heard_s)

    def chars(self) -> int:
        return len(self.question) + len(self.answer)


@dataclass(slots=True)
class _Conversation:
    turns: list[Turn] = field(default_factory=list)
    used_at: float = 0.0


class ConversationStore:
    """The conversations of one agent process. Used from its event loop only."""

    def __init__(
        self, limits: ConversationLimits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits or ConversationLimits()
        self._clock = clock
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()

    def __len__(self) -> int:
        self._expire()
        return len(self._conversations)

    async def begin(
        self,
        session_id: str,
        request_id: str,
        question: str,
        *,
        interrupted_id: str | None = None,
        heard_ms: float | None = None,
    ) -> tuple[Messages, Turn]:
        """The chat messages for a new question of `session_id` (its history, then the
        question), and the question's turn. `heard_ms`, when given, is how much of the answer `interrupted_id`
        (by default the conversation's last) the listener heard; that turn keeps only those
        words."""
        conversation = self._conversation(session_id)
        if heard_ms is not None:
            interrupted = self._find(conversation, interrupted_id)
            if interrupted is not None:
                interrupted.heard_s = max(heard_ms, 0.0) / 1000
        await self._settled(conversation)
        messages = chat(self._finished(conversation), question)
        turn = Turn(request_id, question)
        conversation.turns.append(turn)
        conversation.used_at = self._clock()
        return messages, turn

    def finish(self, session_id: str, turn: Turn) -> None:
        """The turn's answer has ended (however it ended): keep it within the bounds."""
        turn.finished.set()
        conversation = self._conversations.get(session_id)
        if conversation is None or turn not in conversation.turns:
            return  # forgotten meanwhile (evicted)
        conversation.used_at = self._clock()
        self._trim(conversation)

    def history(self, session_id: str) -> Messages:
        """The conversation's finished turns as chat messages (see `chat`)."""
        conversation = self._conversations.get(session_id)
        return chat(self._finished(conversation)) if conversation else []

    def turns(self, session_id: str) -> list[Turn]:
        """The conversation's finished turns themselves: a Realtime socket that deletes an
        item revises the turn it came from (its question, or its answer as heard)."""
        conversation = self._conversations.get(session_id)
        return [t for t in conversation.turns if t.finished.is_set()] if conversation else []

    def forget(self, session_id: str, turn: Turn) -> None:
        """Drop `turn` (a client deleted both its question and its answer)."""
        conversation = self._conversations.get(session_id)
        if conversation is not None and turn in conversation.turns:
            conversation.turns.remove(turn)

    @staticmethod
    def _finished(conversation: _Conversation) -> list[tuple[str, str]]:
        return [(t.question, t.answer) for t in conversation.turns if t.finished.is_set()]

    def _conversation(self, session_id: str) -> _Conversation:
        self._expire()
        conversation = self._conversations.pop(session_id, None) or _Conversation()
        self._conversations[session_id] = conversation  # the most recently used, last
        while len(self._conversations) > self.limits.max_conversations:
            self._conversations.popitem(last=False)
        return conversation

    def _expire(self) -> None:
        horizon = self._clock() - self.limits.idle_s
        while self._conversations:
            oldest = next(iter(self._conversations.values()))
            if oldest.used_at > horizon or not all(t.finished.is_set() for t in oldest.turns):
                break
            self._conversations.popitem(last=False)

    def _find(self, conversation: _Conversation, request_id: str | None) -> Turn | None:
        if request_id is None:
            return conversation.turns[-1] if conversation.turns else None
        return next((t for t in conversation.turns if t.request_id == request_id), None)

    async def _settled(self, conversation: _Conversation) -> None:
        """Wait, at most `turn_wait_s`, for the answers still under way to be recorded."""
        waiting = [t.finished.wait() for t in conversation.turns if not t.finished.is_set()]
        if not waiting:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.limits.turn_wait_s):
                await asyncio.gather(*waiting)

    def _trim(self, conversation: _Conversation) -> None:
        """Drop the oldest finished turns beyond `max_turns` or `max_history_chars`."""
        finished = [t for t in conversation.turns if t.finished.is_set()]
        kept = []
        chars = 0
        for turn in reversed(finished):
            chars += turn.chars()
            if len(kept) >= self.limits.max_turns or chars > self.limits.max_history_chars:
                break
            kept.append(turn)
        conversation.turns = [
            t for t in conversation.turns if not t.finished.is_set() or t in kept
        ]
