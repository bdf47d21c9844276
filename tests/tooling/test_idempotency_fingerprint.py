"""The request fingerprint: RFC 8785 canonical JSON, as seed 2 describes what counts."""

import json
import random
import re
from datetime import UTC, datetime, timedelta

import pytest
import rfc8785
from django.db import OperationalError, connections
from django.utils import timezone
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from core.errors import ValidationFailed
from core.idempotency.engine import (
    MAX_KEY_LENGTH,
    _aware,
    _is_lock_wait_exceeded,
    canonical_json,
    check_gateway_key,
    check_http_key,
    idempotent_execute,
    request_fingerprint,
)
from core.models import IdempotencyRecord
from tests.wording import told_in_its_own_words

SAFE_INTEGER = 2**53 - 1  # RFC 8785 numbers are IEEE-754 doubles

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-SAFE_INTEGER, max_value=SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)
requests = st.dictionaries(st.text(max_size=8), json_values, max_size=6)


def shuffled(value, rng: random.Random):
    """The same JSON value with every object's keys in another order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@given(requests, st.randoms(use_true_random=False))
def test_key_order_does_not_change_the_fingerprint(request, rng):
    assert request_fingerprint("op", shuffled(request, rng)) == request_fingerprint("op", request)


@given(requests, st.sampled_from([None, 0, 1, 2, 4, "\t"]), st.booleans())
def test_whitespace_and_escaping_of_the_json_text_do_not_change_it(request, indent, ascii_only):
    text = json.dumps(request, indent=indent, ensure_ascii=ascii_only, separators=None)

    assert request_fingerprint("op", json.loads(text)) == request_fingerprint("op", request)


def keys_sorted_everywhere(value) -> bool:
    if isinstance(value, dict):
        keys = list(value)
        # Sorted by UTF-16 code units, as RFC 8785 §3.2.3 says.
        return keys == sorted(keys, key=lambda k: k.encode("utf-16-be")) and all(
            keys_sorted_everywhere(v) for v in value.values()
        )
    if isinstance(value, list):
        return all(keys_sorted_everywhere(v) for v in value)
    return True


STRING_LITERAL = re.compile(rb'"(?:[^"\\]|\\.)*"')


@given(requests)
def test_the_canonical_form_is_compact_sorted_faithful_and_a_fixed_point(request):
    canonical = canonical_json(request)
    # RFC 8785 numbers are doubles: a large float is written with integer digits.
    parsed = json.loads(canonical, parse_int=float)

    assert parsed == request
    assert canonical_json(parsed) == canonical
    assert keys_sorted_everywhere(parsed)
    assert not re.search(rb"\s", STRING_LITERAL.sub(b'""', canonical))


@given(st.lists(json_values, min_size=2, max_size=6), st.randoms(use_true_random=False))
def test_array_order_changes_the_fingerprint(items, rng):
    reordered = list(items)
    rng.shuffle(reordered)
    assume(canonical_json(reordered) != canonical_json(items))

    assert request_fingerprint("op", {"items": reordered}) != request_fingerprint(
        "op", {"items": items}
    )


@given(requests, st.text(max_size=8))
def test_null_is_not_the_same_as_omitted(request, key):
    assume(key not in request)

    assert request_fingerprint("op", {**request, key: None}) != request_fingerprint("op", request)


@given(requests, st.text(max_size=8), scalars, scalars)
def test_a_different_value_changes_the_fingerprint(request, key, one, other):
    assume(canonical_json(one) != canonical_json(other))

    assert request_fingerprint("op", {**request, key: one}) != request_fingerprint(
        "op", {**request, key: other}
    )


@given(requests)
def test_the_operation_is_part_of_the_fingerprint(request):
    assert request_fingerprint("cancel", request) != request_fingerprint("create", request)


def test_numbers_compare_as_rfc8785_numbers():
    # 1 and 1.0 are one JSON number; true is not 1; "1" is not 1.
    assert request_fingerprint("op", {"n": 1}) == request_fingerprint("op", {"n": 1.0})
    assert request_fingerprint("op", {"n": 1}) != request_fingerprint("op", {"n": True})
    assert request_fingerprint("op", {"n": 1}) != request_fingerprint("op", {"n": "1"})


def test_the_canonical_form_matches_the_rfc_8785_example():
    # RFC 8785 §3.2.2 / appendix: numbers, escapes and sorted keys.
    value = {"numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001]}
    value["string"] = "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/"
    value["literals"] = [None, True, False]

    assert (
        canonical_json(value)
        == (
            '{"literals":[null,true,false],'
            '"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
            '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
        ).encode()
    )


# Every value a validated request could hold, and those where the standard library's JSON and
# RFC 8785 part: floats, integers past 2**53, any text (lone surrogates included), and keys
# beyond ASCII, which RFC 8785 sorts by UTF-16 code units and Python by code points.
any_text = st.text(st.characters(exclude_categories=()), max_size=8)
ascii_text = st.text(st.characters(max_codepoint=0x7F), max_size=8)
tricky_text = st.text(st.sampled_from('a"\\\n\x00\x1f\x7f\u2028\ue000\U0001f600\ud800'), max_size=4)
any_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-SAFE_INTEGER - 1, max_value=SAFE_INTEGER + 1)
    | st.floats()
    | any_text
    | tricky_text,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(ascii_text | any_text | tricky_text, children, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=500)
@given(any_json)
@example({"\ue000": 1, "\U0001f600": 2})  # sorted otherwise by code point
@example({"n": 1e16, "m": 1e-7, "o": 2.0})  # written otherwise by repr
@example({"n": SAFE_INTEGER + 1})  # no canonical form
@example({"s": "\ud800"})  # not encodable as UTF-8
@example({"\ud800": 1, "a": 2})
@example({"s": 'a"\\\b\f\n\r\t\x00\x1f\x7f\u2028é😀', "k": [True, False, None, -1, 0]})
def test_the_canonical_form_is_the_rfc_8785_reference_byte_for_byte(value):
    try:
        expected = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeEncodeError):
        # No canonical form (a lone surrogate in a key cannot be sorted by UTF-16 units):
        # the caller's mistake, answered as such.
        with pytest.raises(ValidationFailed):
            canonical_json(value)
    else:
        assert canonical_json(value) == expected


@pytest.mark.parametrize("value", [2**60, float("nan"), float("inf"), {1, 2}, {"\ud800": 1}])
def test_a_request_without_a_canonical_form_is_a_validation_error(value):
    with pytest.raises(ValidationFailed) as caught:
        request_fingerprint("op", {"v": value})

    assert caught.value.code == "invalid_arguments"
    told_in_its_own_words(caught.value)


def test_a_fingerprint_stored_by_an_earlier_release_still_matches():
    """Records outlive deploys: a retry after an upgrade must find its request the same. The
    fingerprint is SHA-256 of the RFC 8785 form of {"operation": ..., "request": ...}."""
    request = {"reference": "AP-123456", "reason": None}

    assert (
        request_fingerprint("cancel_appointment", request)
        == "ede1364f510a37f3a9cb30bd1c0dbe0dc6a49ae33d49d7a1549816d947287c6a"
    )


@pytest.mark.django_db
def test_a_record_is_stored_with_the_fingerprint_an_earlier_release_computed(company):
    """What the engine stores is that same fingerprint, of its operation and its request: a
    record written today must match the retry a later release fingerprints."""
    idempotent_execute(
        company=company,
        key="k-pinned",
        operation="cancel_appointment",
        request={"reference": "AP-123456", "reason": None},
        effect=lambda: ({"done": True}, 200),
    )

    record = IdempotencyRecord.objects.get(company=company, key="k-pinned")
    assert (record.operation, record.fingerprint) == (
        "cancel_appointment",
        "ede1364f510a37f3a9cb30bd1c0dbe0dc6a49ae33d49d7a1549816d947287c6a",
    )


def test_a_request_of_text_integers_flags_and_nulls_never_needs_the_reference_encoder(
    monkeypatch,
):
    """Every write computes a fingerprint: requests made of what tools take (text, integers
    within IEEE-754's exact range, flags, nulls, lists, objects with ASCII keys) are written by
    the standard library's C encoder, the same bytes at a fraction of the pure-Python
    reference's CPU (canonical_json)."""
    request = {
        "name": 'Ana "la de Sol"\n\tcañón €',
        "by": [0, 1, -1, SAFE_INTEGER, -SAFE_INTEGER],
        "flags": [True, False],
        "note": None,
        "nested": {"lines": [{"sku": "CAF-001", "quantity": 3}], "empty": {}},
    }
    expected = rfc8785.dumps(request)

    def reference_encoder(value):
        raise AssertionError(f"the reference encoder wrote {value!r}")

    monkeypatch.setattr(rfc8785, "dumps", reference_encoder)

    assert canonical_json(request) == expected
    for scalar in ("x", True, False, None, SAFE_INTEGER, -SAFE_INTEGER, {"k": 1}, [1]):
        assert canonical_json(scalar) == json.dumps(scalar, separators=(",", ":")).encode()


# --- the keys' checks and the engine's refusals, in the company's language ------------------


def test_a_missing_key_is_refused_on_both_surfaces_in_its_own_words():
    for check in (check_http_key, check_gateway_key):
        with pytest.raises(ValidationFailed) as missing:
            check(None)

        assert missing.value.code == "missing_idempotency_key"
        told_in_its_own_words(missing.value)


@pytest.mark.parametrize(
    ("check", "key"),
    [
        (check_http_key, "-dash-first"),
        (check_gateway_key, "k" * (MAX_KEY_LENGTH + 1)),
        (check_gateway_key, "a\x00b"),
        (check_gateway_key, "\x00"),
    ],
)
def test_a_malformed_key_is_refused_in_its_own_words(check, key):
    with pytest.raises(ValidationFailed) as malformed:
        check(key)

    assert malformed.value.code == "invalid_idempotency_key"
    told_in_its_own_words(malformed.value)


def test_a_gateway_key_of_the_columns_full_length_is_used_as_given():
    longest = "k" * MAX_KEY_LENGTH  # IdempotencyRecord.key holds 255 characters

    assert check_gateway_key(longest) == longest
    assert check_gateway_key(" spaced key ") == " spaced key "


# --- the SQLite demo's readings (its races run in gunicorn, which mutmut cannot credit) ----


def test_sqlites_naive_datetimes_are_read_as_utc_and_aware_ones_are_kept():
    """Django stores UTC; SQLite's driver gives it back naive. Read as UTC even while a
    company's own time zone is active (the admin shows its local times), or a replay window
    would move by the zone's offset."""
    naive = datetime(2026, 12, 1, 9, 30)
    aware = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)

    with timezone.override("Europe/Madrid"):
        read = _aware(naive)

    assert read == aware and read.utcoffset() == timedelta(0)
    assert _aware(aware) is aware


def test_only_sqlites_busy_timeout_or_postgresqls_lock_timeout_is_a_lock_wait(monkeypatch):
    """A twin's wait past its bound is "still in progress"; any other failure is SYSTEM."""
    locked = OperationalError("database is locked")
    other = OperationalError("disk I/O error")

    wrapper = connections["default"]
    monkeypatch.setitem(wrapper.__dict__, "vendor", "sqlite")  # the demo's connection
    sqlite = (_is_lock_wait_exceeded(locked), _is_lock_wait_exceeded(other))
    monkeypatch.setitem(wrapper.__dict__, "vendor", "postgresql")
    postgresql = _is_lock_wait_exceeded(locked)

    assert sqlite == (True, False)
    assert postgresql is False
