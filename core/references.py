"""Public references: short codes customers can read aloud, never primary keys."""

import secrets

# Crockford-style alphabet without the look-alikes 0/O, 1/I/L and U.
ALPHABET = "23456789ABCDEFGHJKMNPQRSTVWXYZ"
LENGTH = 6


def new_reference(prefix: str) -> str:
    """A fresh random reference such as AP-7K2F9Q. Uniqueness is the model's constraint."""
    return f"{prefix}-" + "".join(secrets.choice(ALPHABET) for _ in range(LENGTH))


def normalize_reference(raw: str) -> str:
    """Upper-case and without spaces, as references are stored."""
    return raw.strip().upper().replace(" ", "")
