"""Word error rate: how much of a text a listener (Whisper) did not hear as written."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def edit_distance(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Word-level Levenshtein distance: substitutions, insertions and deletions."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref_word in enumerate(reference, 1):
        current = [i]
        for j, hyp_word in enumerate(hypothesis, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref_word != hyp_word)))
        previous = current
    return previous[-1]


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(edits, words of the reference), both sides normalized by Whisper's English text
    normalizer (`whisper-normalizer`), so "12" and "twelve", "colour" and "color" agree."""
    from whisper_normalizer.english import EnglishTextNormalizer

    normalize = EnglishTextNormalizer()
    ref, hyp = normalize(reference).split(), normalize(hypothesis).split()
    return edit_distance(ref, hyp), len(ref)


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Edit distance over the reference's length (see `word_errors`)."""
    edits, words = word_errors(reference, hypothesis)
    return edits / max(words, 1)


def pooled_word_error_rate(pairs: Iterable[tuple[str, str]]) -> float:
    """The WER of many (reference, hypothesis) pairs together: all their edits over all their
    reference words (a short sentence weighs no more than its words)."""
    counts = [word_errors(reference, hypothesis) for reference, hypothesis in pairs]
    return sum(edits for edits, _ in counts) / max(sum(words for _, words in counts), 1)
