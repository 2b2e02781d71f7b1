"""A Realtime socket's conversation: its items in order, and what the LLM is sent of them.

Each assistant item holds the `Turn` its answer filled (its text, its spoken pieces with
their word times), so that a cut (`conversation.item.truncate`, or a barge-in's estimate)
keeps only the words the listener heard, word by word, as `/invocations` does
(`conversation.heard_text`). A socket that names its conversation (AgentCore's session id
header) starts from that conversation's remembered turns, and records its own answers in
the agent's `ConversationStore`, so that `/invocations` and a later socket continue it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strands.types.content import Messages

from voicestream.agent.conversation import Turn, chat
from voicestream.protocol.realtime import ContentPart, Item

ROOT = "root"
"""The `previous_item_id` that puts an item first (what LiveKit sends for its first item)."""
MAX_ITEMS = 200
"""Items a socket holds; the oldest go first (the store bounds what is remembered across
sockets)."""


@dataclass(eq=False, slots=True)
class Entry:
    item: Item
    turn: Turn | None = None
    """An assistant answer's turn: what was written, spoken and heard."""
    asked_in: Turn | None = None
    """A user item's turn: the one its words were (part of) the question of."""

    @property
    def text(self) -> str:
        return self.turn.answer if self.turn is not None else self.item.text


class RealtimeConversation:
    def __init__(self, history: Sequence[Turn] = ()) -> None:
        """Start from a stored conversation's finished turns: each turn's question and
        answer become items linked to it, so that deleting one revises the stored turn."""
        self.entries: list[Entry] = []
        for turn in history:
            if turn.question:
                question = ContentPart(type="input_text", text=turn.question)
                self.entries.append(Entry(Item(role="user", content=[question]), asked_in=turn))
            if turn.answer:
                answer = ContentPart(type="output_text", text=turn.answer)
                self.entries.append(Entry(Item(role="assistant", content=[answer]), turn=turn))
        del self.entries[: max(0, len(self.entries) - MAX_ITEMS)]

    def add(self, item: Item, previous_item_id: str | None = None) -> str | None:
        """Insert `item` after `previous_item_id` (by default last; `root`: first); returns
        the id of the item before it. Raises `KeyError` for an unknown `previous_item_id`."""
        position = len(self.entries)
        if previous_item_id == ROOT:
            position = 0
        elif previous_item_id is not None:
            position = self.index(previous_item_id) + 1
        self.entries.insert(position, Entry(item))
        del self.entries[: max(0, len(self.entries) - MAX_ITEMS)]
        index = self.index(item.id)
        return self.entries[index - 1].item.id if index > 0 else None

    def index(self, item_id: str) -> int:
        for index, entry in enumerate(self.entries):
            if entry.item.id == item_id:
                return index
        raise KeyError(item_id)

    def find(self, item_id: str) -> Entry | None:
        return next((e for e in self.entries if e.item.id == item_id), None)

    def delete(self, item_id: str) -> Turn | None:
        """Remove the item (`KeyError` if there is none) and revise the turn it belongs to,
        which the store shares: an answer deleted is one nobody heard (`heard_s` 0), a
        question deleted leaves the turn's other user items. Returns that turn."""
        entry = self.entries.pop(self.index(item_id))
        if entry.turn is not None:
            entry.turn.heard_s = 0.0
        elif entry.asked_in is not None:
            turn = entry.asked_in
            turn.question = "\n".join(e.text for e in self.entries if e.asked_in is turn and e.text)
        return entry.turn or entry.asked_in

    def ask(self, turn: Turn) -> None:
        """The user's items since the last answer are `turn`'s question."""
        for entry in reversed(self.entries):
            if entry.item.role == "assistant":
                break
            if entry.item.role == "user" and entry.asked_in is None:
                entry.asked_in = turn

    @property
    def last_id(self) -> str | None:
        return self.entries[-1].item.id if self.entries else None

    def instructions(self) -> str:
        """The system items' texts: they join the session's instructions."""
        return "\n".join(
            e.item.text for e in self.entries if e.item.role == "system" and e.item.text
        )

    def question(self, then: str | None = None) -> str:
        """The user's words since the last answer that no earlier turn asked (the next
        turn's question: the store joins an unanswered turn's question to the next one);
        with `then`, as if one more user item said it."""
        asked: list[str] = []
        for entry in self.entries:
            if entry.item.role == "assistant":
                asked = []
            elif entry.item.role == "user" and entry.text and entry.asked_in is None:
                asked.append(entry.text)
        return "\n".join([*asked, *([then] if then else [])])

    def messages(self, then: str | None = None) -> Messages:
        """The conversation as chat messages (see `conversation.chat`): each answer as the
        listener heard it; with `then`, as if one more user item said it."""
        pairs: list[tuple[str, str]] = []
        asked: list[str] = []
        for entry in self.entries:
            if entry.item.role == "user" and entry.text:
                asked.append(entry.text)
            elif entry.item.role == "assistant" and entry.text:
                pairs.append(("\n".join(asked), entry.text))
                asked = []
        if then:
            asked.append(then)
        return chat(pairs, "\n".join(asked) if asked else None)
