"""The language of the users' messages, behind one interface: every rule about how people write.

Why one module: planning reads messages — which words carry intent, where one
ask ends and the next begins, what "that result" points back to, which words
stand for numbers — and each of those is a fact about a language, not about a
tool or the router. Kept here, the router's planning code holds no word lists
and no phrase regexes, and a second language is a second implementation of
``Language`` chosen in one place (``language_for``).

Only English is implemented (``english.py``); the embedded model and the
sentence embedder are English models.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from services.runtime.language.english import English


class Language(Protocol):
    """What planning asks of a language; each method is one rule, documented where it is implemented."""

    def content_words(self, text: str) -> frozenset[str]: ...

    def ask_words(self, text: str) -> frozenset[str]: ...

    def features(self, text: str) -> set[str]: ...

    def clauses(self, message: str) -> list[str]: ...

    def ask_examples(self) -> list[tuple[str, bool]]: ...

    def for_embedding(self, text: str) -> str: ...

    def shape(self, text: str) -> str: ...

    def asks_knowledge(self, text: str) -> bool: ...

    def action(self, text: str) -> str | None: ...

    def time_unit(self, word: str) -> str | None: ...

    def quantities(self, text: str) -> list[tuple[float, str | None]]: ...

    def bare_number(self, message: str) -> str | None: ...

    def with_number(self, previous: str, number: str) -> str | None: ...

    def refers_back(self, message: str) -> bool: ...

    def with_previous_result(self, text: str, result: str) -> str: ...

    def span_clauses(self, text: str) -> list[str]: ...

    def mentions(self, text: str, value: str) -> bool: ...

    def says_when(self, text: str) -> bool: ...

    def about_time(self, text: str) -> bool: ...

    def names_identifier(self, name: str) -> bool: ...

    def is_glue(self, word: str) -> bool: ...

    def is_article(self, word: str) -> bool: ...

    def numbers_in(self, text: str) -> set[float]: ...

    def amount_text(self, text: str) -> str: ...

    def numbers_written(self, text: str) -> list[str]: ...

    def number_values(self, text: str) -> list[float]: ...

    def currency_codes(self, text: str) -> list[str]: ...

    def takes_currency_code(self, text: str) -> bool: ...


LANGUAGES: dict[str, Language] = {"en": English()}


def language_for(code: str = "en") -> Language:
    """The language ``code`` (``en``); a ``ValueError`` names the known ones."""
    try:
        return LANGUAGES[code]
    except KeyError:
        raise ValueError(f"unknown language {code!r}; known: {', '.join(sorted(LANGUAGES))}") from None


__all__: Sequence[str] = ("ENGLISH", "LANGUAGES", "English", "Language", "language_for")

#: The language planning reads when none is configured.
ENGLISH: Language = LANGUAGES["en"]
