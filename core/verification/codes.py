"""A verification code's stored form (an HMAC) and its sealed form for the task message."""

from django.utils.crypto import salted_hmac

CODE_DIGITS = 6
MODULUS = 10**CODE_DIGITS


def code_hmac(*, nonce: str, contact_id: int, code: str) -> str:
    """The stored form of a code: an HMAC bound to its challenge and its contact."""
    return salted_hmac(
        "garante.verification.code", f"{nonce}:{contact_id}:{code}", algorithm="sha256"
    ).hexdigest()


def _pad(nonce: str) -> int:
    digest = salted_hmac("garante.verification.seal", nonce, algorithm="sha256").hexdigest()
    return int(digest, 16) % MODULUS


def seal_code(code: str, nonce: str) -> str:
    """The code under a one-time pad of its challenge: what the task message carries."""
    return f"{(int(code) + _pad(nonce)) % MODULUS:0{CODE_DIGITS}d}"


def unseal_code(sealed: str, nonce: str) -> str:
    return f"{(int(sealed) - _pad(nonce)) % MODULUS:0{CODE_DIGITS}d}"
