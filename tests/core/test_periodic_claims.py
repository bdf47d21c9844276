"""A second beat started by mistake sends no sweep twice (core.periodic.ClaimingScheduler): two
schedulers with the real schedule, each applying every due entry, send each once; the claim
lasts most of the entry's period, so the same beat's next send is not refused."""

import pytest
import redis
from celery.beat import PersistentScheduler
from django.conf import settings

from config.celery import app
from core.periodic import ClaimingScheduler, claim_seconds
from tests.servers import wait_for

pytestmark = pytest.mark.redis


@pytest.fixture
def sent(monkeypatch) -> list[tuple[int, str]]:
    """What the schedulers hand to Celery to send, by (scheduler, entry): recorded instead of
    published, so no sweep runs in this process."""
    sent: list[tuple[int, str]] = []

    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        sent.append((id(self), entry.name))

    monkeypatch.setattr(PersistentScheduler, "apply_async", apply_async)
    return sent


def claims_forgotten() -> None:
    client = redis.Redis.from_url(app.conf.broker_url)
    for key in client.scan_iter(
        match=f"garante:beat-claim:{settings.DATABASES['default']['NAME']}:*"
    ):
        client.delete(key)


def schedulers(count: int) -> list[ClaimingScheduler]:
    app.loader.import_default_modules()
    app.finalize()
    return [ClaimingScheduler(app=app, lazy=True) for _ in range(count)]


def entries(scheduler: ClaimingScheduler) -> list:
    return [
        scheduler.Entry(name=name, app=app, **fields)
        for name, fields in app.conf.beat_schedule.items()
    ]


def test_two_beats_send_each_sweep_once(sent):
    claims_forgotten()
    first, second = schedulers(2)
    assert len(app.conf.beat_schedule) >= 5  # every app's sweeps

    for entry in entries(first):
        first.apply_entry(entry)
        second.apply_entry(entry)
    for entry in entries(second):  # the second beat's own turn, later in the period
        second.apply_entry(entry)

    assert sorted(sent) == sorted((id(first), name) for name in app.conf.beat_schedule)
    claims_forgotten()


def test_a_claim_ends_before_the_entry_is_due_again(sent):
    claims_forgotten()
    (beat,) = schedulers(1)
    entry = beat.Entry(name="core: a test entry", task="core.periodic_test", schedule=1.0, app=app)
    assert claim_seconds(entry.schedule) == pytest.approx(0.9)

    beat.apply_entry(entry)
    beat.apply_entry(entry)  # the same period: claimed
    assert sent == [(id(beat), entry.name)]
    wait_for(lambda: beat.claim(entry), timeout=5, interval=0.05)
    claims_forgotten()


def test_a_beat_that_cannot_reach_redis_sends_as_celery_would(sent, monkeypatch):
    (beat,) = schedulers(1)
    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:9/0")
    entry = beat.Entry(name="core: unreachable", task="core.periodic_test", schedule=60.0, app=app)

    beat.apply_entry(entry)

    assert sent == [(id(beat), entry.name)]
