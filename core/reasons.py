"""The reason given for a transition that cannot be undone or that tells the customer: one rule
for every service that takes one (agenda, sales, support) and for the admin's confirmation form.

A reason is stored in the transition's history (django-fsm-log's `description`) and may be
written into a message to the customer (an SMS, an email), so it must be plain text of a
bounded length: markup is refused, never stripped (what staff typed is not silently changed),
and runs of white space, line breaks included, become one space (an SMS is one line).
"""

import re

from django.utils.translation import gettext_lazy as _

from core.errors import ValidationFailed

REASON_MAX_LENGTH = 300  # the bound the tools and the integration API already set on reasons

# An HTML or XML tag (<b>, </p>, <!-- -->, <?php ... ?>) or a character reference (&amp;,
# &#60;, &#x3c;): what a browser, or a mail client showing HTML, would read as markup. A lone
# "<" or "&" ("<3", "Smith & Co") is plain text.
_MARKUP = re.compile(
    r"<\s*[/!?]?\s*[A-Za-z][^<>]*>|<!--|&(?:#\d+|#[xX][0-9A-Fa-f]+|[A-Za-z][A-Za-z0-9]*);"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def reason_normalized(text: str) -> str:
    """`text` as it is stored: trimmed, with every run of white space one space."""
    return " ".join(text.split())


def reason_problem(text: str) -> str | None:
    """What is wrong with a (normalized) reason, as a stable code, or None if it is fine:
    `reason_too_long`, `reason_markup` (a tag or a character reference) or
    `reason_control_characters`."""
    if len(text) > REASON_MAX_LENGTH:
        return "reason_too_long"
    if _MARKUP.search(text):
        return "reason_markup"
    if _CONTROL.search(text):
        return "reason_control_characters"
    return None


_SERVICE_MESSAGES = {
    "reason_too_long": _("El motivo es demasiado largo (máximo %(max)d caracteres)."),
    "reason_markup": _(
        "El motivo debe ser texto sin formato: sin etiquetas HTML ni códigos como &amp;."
    ),
    "reason_control_characters": _("El motivo contiene caracteres no válidos."),
}


def reason_checked(text: str | None) -> str:
    """The reason normalized, or VALIDATION saying what is wrong with it (a service's check:
    the caller may be a tool, the integration API or the admin). An empty reason is ''."""
    normalized = reason_normalized(text or "")
    problem = reason_problem(normalized)
    if problem is not None:
        extras = {"max_length": REASON_MAX_LENGTH} if problem == "reason_too_long" else {}
        raise ValidationFailed(
            _SERVICE_MESSAGES[problem] % {"max": REASON_MAX_LENGTH}, code=problem, **extras
        )
    return normalized
