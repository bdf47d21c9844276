"""How tests hold a user-visible message without pinning its words: a message is part of the
contract (there, in the company's language, its own), its wording is the catalogue's."""

from typing import Any

from django.utils import translation


def message_of(lazy_message: Any, language: str) -> str:
    """A translatable message as `language` reads it: the tests compare an answer with the
    catalogue's wording of the same message, never with words of their own."""
    with translation.override(language):
        return str(lazy_message)


def told_in_its_own_words(error: Any) -> None:
    """A refusal's message: there in both languages, translated (an English company reads
    English), and its own rather than its type's generic one. Its words are not pinned."""
    worded = {lang: message_of(error.user_message, lang) for lang in ("es", "en")}
    generic = {lang: message_of(type(error).default_message, lang) for lang in ("es", "en")}
    assert worded["es"].strip() and worded["en"].strip()
    assert worded["es"] != worded["en"]
    assert worded["es"] != generic["es"]
