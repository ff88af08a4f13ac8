"""Which turns become searchable memories: not an assistant's acknowledgement, not small talk.

"Nice to meet you, Ada! I'll keep that in mind." carries nothing the user's turn before it did
not: recalled later it would be a "memory" that only repeats, or worse, stands in for what the
user said. An assistant turn is an acknowledgement when every word it has is courtesy, a
function word, or a word of the user's turn it answers; such a turn stays in the session's
stream (the conversation as it was), but is not made searchable. A user turn that is only small
talk ("thanks!", "ok") is not either. Everything else is.
"""

from __future__ import annotations

import re

from .recall import needs_memory

__all__ = ["is_acknowledgement", "worth_a_memory"]

MAX_ACK_WORDS = 40  # a longer reply says something of its own, whatever its words

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# courtesy: what acknowledging, thanking, greeting and promising to remember are made of
_COURTESY = frozenset(
    [
        "thanks",
        "thank",
        "you",
        "welcome",
        "sure",
        "ok",
        "okay",
        "alright",
        "right",
        "great",
        "good",
        "nice",
        "lovely",
        "wonderful",
        "awesome",
        "perfect",
        "cool",
        "fine",
        "glad",
        "happy",
        "pleased",
        "noted",
        "note",
        "got",
        "it",
        "understood",
        "understand",
        "sounds",
        "sound",
        "will",
        "i'll",
        "ill",
        "we'll",
        "keep",
        "mind",
        "remember",
        "remembered",
        "remembering",
        "memorize",
        "hear",
        "heard",
        "meet",
        "meeting",
        "met",
        "hello",
        "hi",
        "hey",
        "greetings",
        "sharing",
        "share",
        "shared",
        "telling",
        "tell",
        "told",
        "letting",
        "let",
        "know",
        "knowing",
        "absolutely",
        "certainly",
        "definitely",
        "indeed",
        "of",
        "course",
        "yes",
        "yeah",
        "yep",
        "gotcha",
        "cheers",
        "appreciate",
        "appreciated",
        "pleasure",
        "anytime",
        "no",
        "problem",
        "worries",
        "help",
        "helpful",
        "anything",
        "else",
        "feel",
        "free",
        "ask",
        "next",
        "time",
        "future",
        "going",
        "forward",
        "from",
        "now",
        "on",
        "make",
        "sure",
        "take",
        "taken",
        "care",
        "thing",
        "things",
        "info",
        "information",
        "detail",
        "details",
    ]
)
# function words: articles, pronouns, auxiliaries, prepositions, conjunctions
_FUNCTION = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "so",
        "if",
        "then",
        "than",
        "that",
        "this",
        "these",
        "those",
        "there",
        "here",
        "it",
        "its",
        "it's",
        "i",
        "me",
        "my",
        "mine",
        "we",
        "us",
        "our",
        "you",
        "your",
        "yours",
        "he",
        "him",
        "his",
        "she",
        "her",
        "they",
        "them",
        "their",
        "is",
        "am",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "done",
        "have",
        "has",
        "had",
        "having",
        "can",
        "could",
        "would",
        "should",
        "shall",
        "may",
        "might",
        "must",
        "to",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "about",
        "from",
        "into",
        "onto",
        "as",
        "up",
        "out",
        "over",
        "all",
        "any",
        "some",
        "just",
        "also",
        "too",
        "very",
        "really",
        "much",
        "more",
        "most",
        "well",
        "now",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "i'm",
        "you're",
        "that's",
        "what's",
        "there's",
        "i've",
        "you've",
        "i'd",
        "you'd",
        "let's",
    ]
)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def is_acknowledgement(reply: str, answered: str = "") -> bool:
    """Whether an assistant's ``reply`` to the user turn ``answered`` only acknowledges it:
    short, and every word courtesy, a function word, or a word the user said."""
    words = _words(reply)
    if not words or len(words) > MAX_ACK_WORDS:
        return not words
    said = set(_words(answered))
    return all(w in _COURTESY or w in _FUNCTION or w in said for w in words)


def worth_a_memory(role: str, text: str, answered: str = "") -> bool:
    """Whether a turn of ``role`` becomes a searchable memory (``answered``: the user turn an
    assistant turn replies to)."""
    if role == "user":
        return needs_memory(text)
    if role == "assistant":
        return not is_acknowledgement(text, answered)
    return False
