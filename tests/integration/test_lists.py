"""Lists: keyset pages stay consistent while rows are written between them, and a list
parameter the API does not know is refused, never silently ignored."""

from urllib.parse import parse_qs, urlsplit

import pytest

from support.services import case_open, case_start

pytestmark = pytest.mark.django_db


def _open(company, contact, n):
    return case_open(company=company, contact=contact, subject=f"Caso {n}", description="x")


def _follow(api, link):
    """The page a `next` or `previous` link points to."""
    return api.client.get(link).json()


def _references(page):
    return [c["reference"] for c in page["results"]]


def test_pages_walk_the_whole_list_forwards_and_back(api, company, ana):
    cases = [_open(company, ana, n) for n in range(5)]

    first = api.get("cases", limit=2).json()
    second = _follow(api, first["next"])
    third = _follow(api, second["next"])
    back = _follow(api, third["previous"])

    newest_first = [c.reference for c in reversed(cases)]
    assert _references(first) + _references(second) + _references(third) == newest_first
    assert first["previous"] is None and third["next"] is None
    assert _references(back) == _references(second)
    assert first["count"] == 5


def test_a_case_opened_between_two_pages_does_not_repeat_a_row(api, company, ana):
    cases = [_open(company, ana, n) for n in range(4)]
    first = api.get("cases", limit=2).json()
    _open(company, ana, 99)  # another system opens a case meanwhile
    second = _follow(api, first["next"])

    assert _references(first) + _references(second) == [c.reference for c in reversed(cases)]


def test_a_case_updated_between_two_pages_is_not_skipped(api, company, ana):
    cases = [_open(company, ana, n) for n in range(4)]
    first = api.get("cases", limit=2, ordering="updated_at").json()
    case_start(case=cases[0], by=None)  # updated: moves from the first page to the end
    second = _follow(api, first["next"])
    rest = _follow(api, second["next"]) if second["next"] else {"results": []}

    seen = _references(first) + _references(second) + _references(rest)
    assert set(seen) == {c.reference for c in cases}


def test_rows_with_no_value_in_the_ordering_field_come_last_on_every_page(api, company, ana):
    from sales.services import opportunity_create, opportunity_lose

    opportunities = [
        opportunity_create(company=company, contact=ana, title=f"O{n}") for n in range(4)
    ]
    opportunity_lose(opportunity=opportunities[2], reason="Caro", by=None)

    first = api.get("opportunities", limit=1, ordering="closed_at").json()
    pages = [first]
    while pages[-1]["next"]:
        pages.append(_follow(api, pages[-1]["next"]))

    seen = [r for page in pages for r in _references(page)]
    assert seen[0] == opportunities[2].reference  # the only one closed
    assert sorted(seen) == sorted(o.reference for o in opportunities)


def test_a_cursor_of_another_ordering_or_a_forged_one_is_refused(api, company, ana):
    for n in range(3):
        _open(company, ana, n)
    first = api.get("cases", limit=1).json()
    cursor = parse_qs(urlsplit(first["next"]).query)["cursor"][0]

    reordered = api.get("cases", cursor=cursor, ordering="updated_at")
    forged = api.get("cases", cursor=cursor[:-2] + "xx")

    for response in (reordered, forged):
        assert response.status_code == 422
        assert response.json()["code"] == "invalid_pagination"


@pytest.mark.parametrize(
    ("params", "code", "field"),
    [
        ({"ordering": "internal_notes"}, "invalid_ordering", "ordering"),
        ({"ordering": "created"}, "invalid_ordering", "ordering"),
        ({"limit": "abc"}, "invalid_pagination", "limit"),
        ({"limit": "0"}, "invalid_pagination", "limit"),
        ({"limit": "101"}, "invalid_pagination", "limit"),
        ({"offset": "-3"}, "unknown_parameter", "offset"),
        ({"stat": "closed"}, "unknown_parameter", "stat"),
    ],
)
def test_bad_list_parameters_are_refused_not_ignored(api, company, ana, params, code, field):
    _open(company, ana, 1)

    response = api.get("cases", **params)

    assert response.status_code == 422
    body = response.json()
    assert (body["error_type"], body["code"]) == ("VALIDATION", code)
    assert [e["field"] for e in body["problems"]] == [field]


def test_the_known_parameters_are_accepted(api, company, ana):
    _open(company, ana, 1)

    response = api.get("cases", ordering="-updated_at", limit="5", state="open", format="json")

    assert response.status_code == 200
    assert len(response.json()["results"]) == 1
