"""The oracle: a small reference model of what each conversation may see and do and of which
effects exist, and the checks every answer and every step are held to (issue #34, item 2)."""

import itertools
import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from agenda.models import Appointment
from sales.models import Opportunity, Product, Quote, QuoteLine
from support.models import Case
from tests.properties.transports import Answer
from tests.properties.world import HORIZON_DAYS, PRICES, STOCK, Customer

ERROR_TYPES = {"VALIDATION", "NOT_FOUND", "PERMISSION", "AMBIGUOUS", "CONFLICT", "SYSTEM"}
REFERENCE = re.compile(r"\b(AP|SL|QT|CS|OP)-[2-9A-HJKMNP-TV-Z]{6}\b")
TERMINAL = {
    "AP": {"cancelled", "attended", "no_show"},
    "QT": {"accepted", "rejected", "expired"},
    "CS": {"closed"},
    "OP": {"won", "lost"},
}
MODELS = {"AP": Appointment, "QT": Quote, "CS": Case, "OP": Opportunity}
MINIMUM_NOTICE = timedelta(minutes=60)  # agenda.models.AgendaSettings' default


class Violation(AssertionError):
    """A guarantee broken: the oracle's finding."""


def check(condition: Any, message: str, *detail: Any) -> None:
    if not condition:
        raise Violation(message + ("" if not detail else ": " + " | ".join(map(str, detail))))


@dataclass
class Entity:
    reference: str
    kind: str
    tenant: str
    owner: Customer
    state: str
    total: str | None = None
    items: list[tuple[str, int]] = field(default_factory=list)
    # What the entity stands for (core.idempotency.intent), as `intent_of` writes it: a
    # re-planned call of that intent answers this entity while it is live. None: an entity
    # asked for explicitly as a second one (new_case), which stands for no intent.
    intent: tuple | None = None


@dataclass
class Conversation:
    id: str
    tenant: str
    speaker: Customer | None = None
    # "no": certainly not verified now; "yes": verified; "maybe": cannot tell (then no check).
    verified: str = "no"
    shown: dict[str, list[str]] = field(default_factory=dict)
    # What a slot or appointment was shown as ("YYYY-MM-DD HH:MM"), by reference.
    labels: dict[str, str] = field(default_factory=dict)
    last_write: tuple[str, dict, str] | None = None
    # The last write that declares an intent and succeeded: (tool, arguments, the reference
    # it answered, the intent that record stood for then).
    last_done: tuple[str, dict, str, tuple | None] | None = None
    code: str | None = None
    code_spent: bool = False  # used, expired, superseded or locked: it must never verify now
    code_attempts: int = 0
    # The phone or email change asked for here and its code (sent to the new value), until
    # confirmed: (field, value, code); the code None when it could not be read.
    change: tuple[str, str, str | None] | None = None
    change_spent: bool = False  # used, expired, superseded or locked
    change_attempts: int = 0

    def saw(self, kind: str, reference: str, label: str | None = None) -> None:
        refs = self.shown.setdefault(kind, [])
        if reference not in refs:
            refs.append(reference)
        if label is not None:
            self.labels[reference] = label

    def resolve(self, kind: str, given: str) -> list[str]:
        """The shown references `given` designates: itself, a unique ending, a label."""
        wanted = given.strip().upper().replace(" ", "")
        refs = self.shown.get(kind, [])
        if wanted in refs:
            return [wanted]
        by_end = [r for r in refs if len(wanted) >= 4 and r.endswith(wanted)]
        by_label = [r for r in refs if self.labels.get(r) == given.strip()]
        return by_end or by_label


@dataclass
class Stored:
    """A key whose success the engine stored: its tool, request and first answer's text."""

    tenant: str
    tool: str
    request: str
    text: str


def canonical(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def quote_total(items: list[tuple[str, int]]) -> Decimal | None:
    """The total the server must compute (sales.services.quote_pricing): per line, the
    subtotal and its tax each rounded half-up to cents; None if an item cannot be sold. A
    SKU is named in any case, and its repeats make one line (the server adds them up)."""
    total = Decimal("0")
    cent = Decimal("0.01")
    lines: dict[str, int] = {}
    for sku, quantity in items:
        lines[sku.upper()] = lines.get(sku.upper(), 0) + quantity
    for sku, quantity in lines.items():
        if sku not in PRICES:
            return None
        price, rate = PRICES[sku]
        subtotal = (price * quantity).quantize(cent, rounding=ROUND_HALF_UP)
        total += subtotal + (subtotal * rate / 100).quantize(cent, rounding=ROUND_HALF_UP)
    return total


# Which states of an entity still stand for its intent: a cancelled appointment, a rejected
# quote, a resolved case no longer do.
LIVE = {
    "AP": {"scheduled"},
    "QT": {"sent"},
    "OP": {"new", "qualified", "proposal", "negotiation"},
    "CS": {"open", "in_progress", "waiting_customer"},
}


def fold(text: str) -> str:
    """A topic as an intent compares it: case, accents, spacing and end punctuation aside."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return " ".join(plain.casefold().split()).strip(" .,;:!?¡¿-")


def quote_lines(items: list[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    lines: Counter = Counter()
    for sku, quantity in items:
        lines[sku.strip().upper()] += quantity
    return tuple(sorted(lines.items()))


class Oracle:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.entities: dict[str, Entity] = {}
        self.slots: dict[str, tuple[str, str]] = {}  # reference -> (tenant, label)
        self.slot_professional: dict[str, str] = {}  # reference -> professional shown
        self.stored: dict[str, Stored] = {}
        self.effects: Counter = Counter()  # (tenant, kind) -> first-hand creations
        # intent -> first-hand creations (each made while no other stood for it)
        self.intent_effects: Counter = Counter()
        self.reserved: Counter = Counter()  # (tenant, sku) -> quantity accepted
        self.conversations: list[Conversation] = []
        self.fault_injected = False

    # --- every answer ---------------------------------------------------------------------

    def answer_shape(self, conversation: Conversation, tool: str, answer: Answer) -> None:
        check(answer.protocol_error is None, f"{tool}: not a tool result", answer.protocol_error)
        check(
            len(answer.text) <= settings.GARANTE_OUTPUT_MAX_CHARS,
            f"{tool}: result over the cap",
            len(answer.text),
        )
        if answer.is_error:
            body = answer.body
            check(isinstance(body, dict), f"{tool}: error body is not an object", answer.text)
            check(body.get("error_type") in ERROR_TYPES, f"{tool}: unknown error type", body)
            message = body.get("user_message")
            check(isinstance(message, str) and message.strip(), f"{tool}: no user_message", body)
            check(isinstance(body.get("code"), str) and body["code"], f"{tool}: no code", body)
            check(
                body["error_type"] != "SYSTEM" or self.fault_injected,
                f"{tool}: SYSTEM without an injected fault",
                body,
            )
            return
        self.private_data(conversation, tool, answer)
        for match in REFERENCE.finditer(answer.text):
            entity = self.entities.get(match.group(0))
            if entity is None:
                continue
            check(
                entity.tenant == conversation.tenant,
                f"{tool}: another company's reference in the answer",
                entity.reference,
            )
            check(
                conversation.speaker is not None and entity.owner == conversation.speaker,
                f"{tool}: another customer's reference in the answer",
                entity.reference,
                entity.owner.label,
                conversation.speaker and conversation.speaker.label,
            )

    def private_data(self, conversation: Conversation, tool: str, answer: Answer) -> None:
        own = set(conversation.speaker.private()) if conversation.speaker else set()
        folded = answer.text.casefold()
        for customer in self.world.customers():
            if customer == conversation.speaker:
                continue
            for value in customer.private():
                if value in own:  # the same person in the other company: their own data
                    continue
                check(
                    value.casefold() not in folded,
                    f"{tool}: another customer's data in the answer",
                    customer.label,
                    value,
                )

    # --- idempotency ------------------------------------------------------------------------

    def replay_expected(self, tenant: str, tool: str, arguments: Any, key: str) -> Stored | None:
        return self.stored.get(f"{tenant}:{key}")

    def judge_replay(self, stored: Stored, tool: str, arguments: Any, answer: Answer) -> None:
        if stored.tool == tool and stored.request == canonical(arguments):
            check(not answer.is_error, f"{tool}: a replay answered an error", answer.short())
            check(
                answer.text == stored.text,
                f"{tool}: a replay differs from the first answer",
                stored.text[:200],
                answer.text[:200],
            )
        else:
            check(
                answer.is_error and answer.code == "idempotency_conflict",
                f"{tool}: a key reused with other arguments was not a conflict",
                stored.tool,
                answer.short(),
            )

    def store(self, tenant: str, tool: str, arguments: Any, key: str, answer: Answer) -> None:
        if not answer.is_error:
            self.stored[f"{tenant}:{key}"] = Stored(tenant, tool, canonical(arguments), answer.text)

    def fresh_key_errors(self, tool: str, answer: Answer, *, contended: bool = False) -> None:
        """A key that stored nothing is never a conflict, nor in progress unless contended."""
        check(answer.code != "idempotency_conflict", f"{tool}: conflict on an unused key")
        if not contended:
            check(answer.code != "request_in_progress", f"{tool}: in progress with no twin")

    # --- the state invariants ------------------------------------------------------------------

    def live(self, intent: tuple) -> list[Entity]:
        """The entities still standing for `intent`, oldest first."""
        return [e for e in self.entities.values() if e.intent == intent and e.state in LIVE[e.kind]]

    def invariants(self) -> None:
        self._one_effect_per_intent()
        for key, tenant in self.world.tenants.items():
            company = tenant.company
            counts = {
                "AP": Appointment.objects.filter(company=company).count(),
                "QT": Quote.objects.filter(company=company).count(),
                "CS": Case.objects.filter(company=company).count(),
                "OP": Opportunity.objects.filter(company=company).count(),
            }
            for kind, count in counts.items():
                check(
                    count == self.effects[(key, kind)],
                    f"{kind} effects in company {key}: database has {count}, the successes "
                    f"answered first-hand were {self.effects[(key, kind)]}",
                )
            self._no_double_booking(company)
            self._stock(key, company)
        self._terminal_states()

    def _one_effect_per_intent(self) -> None:
        """However often and however worded a request was re-planned, at most one entity
        stands for its intent at a time (a second one only once the first stopped standing:
        cancelled, rejected, resolved)."""
        standing: Counter = Counter(
            e.intent
            for e in self.entities.values()
            if e.intent is not None and e.state in LIVE[e.kind]
        )
        for intent, count in standing.items():
            check(count <= 1, "one intent stands for two records", intent, count)

    def _terminal_states(self) -> None:
        for kind, model in MODELS.items():
            final = {
                e.reference: e.state
                for e in self.entities.values()
                if e.kind == kind and e.state in TERMINAL[kind]
            }
            if not final:
                continue
            rows = model.objects.filter(reference__in=list(final)).values_list("reference", "state")
            for reference, state in rows:
                check(
                    state == final[reference],
                    f"terminal {kind} {reference} changed",
                    final[reference],
                    state,
                )

    def _no_double_booking(self, company: Any) -> None:
        rows = list(
            Appointment.objects.filter(company=company, state="scheduled")
            .order_by("professional_id", "blocked_from")
            .values_list("professional_id", "blocked_from", "blocked_until", "reference")
        )
        for before, after in itertools.pairwise(rows):
            if before[0] == after[0]:
                check(after[1] >= before[2], "a slot booked twice", before[3], after[3])

    def _stock(self, tenant: str, company: Any) -> None:
        for product in Product.objects.filter(company=company, sku__in=list(STOCK)):
            check(
                0 <= product.quantity_reserved <= product.quantity_on_hand,
                f"stock of {product.sku}",
                product.quantity_on_hand,
                product.quantity_reserved,
            )
            accepted = (
                QuoteLine.objects.filter(
                    quote__company=company, quote__state="accepted", sku=product.sku
                ).aggregate(n=Sum("quantity"))["n"]
                or 0
            )
            check(
                accepted == self.reserved[(tenant, product.sku)],
                f"accepted {product.sku} in the database differs from the answered acceptances",
                accepted,
                self.reserved[(tenant, product.sku)],
            )
            check(
                accepted <= STOCK[product.sku],
                f"more {product.sku} accepted than there was",
                accepted,
            )

    # --- slots: the server's dates --------------------------------------------------------------

    def slot_item(self, tenant: str, item: dict[str, Any], moving: list[str]) -> str:
        """The slot's label, once checked; `moving`: the appointment being moved, whose own
        time counts as free."""
        tz = self.world.tenants[tenant].company.tz
        label = f"{item['date']} {item['time']}"
        wall = datetime.strptime(label, "%Y-%m-%d %H:%M")
        instant = wall.replace(tzinfo=tz)
        back = instant.astimezone(UTC).astimezone(tz).replace(tzinfo=None)
        check(back == wall, "a slot at a wall-clock time that does not exist", label)
        now = timezone.now()
        check(instant >= now + MINIMUM_NOTICE - timedelta(minutes=2), "a slot too soon", label)
        last_day = now.astimezone(tz).date() + timedelta(days=HORIZON_DAYS)
        check(wall.date() <= last_day, "a slot beyond the horizon", label, last_day)
        busy = Appointment.objects.filter(
            company=self.world.tenants[tenant].company,
            state="scheduled",
            professional__display_name=item["professional"],
            blocked_from__lt=instant + timedelta(minutes=40),  # 30 minutes and 10 of buffer
            blocked_until__gt=instant,
        )
        check(
            not busy.exclude(reference__in=moving).exists(),
            "a busy slot offered",
            label,
            item["professional"],
        )
        return label
