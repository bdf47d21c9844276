"""Celery's Redis transport keeps one Redis client per channel (core.broker), on a real Redis.

A real worker consuming through it is exercised by tests/core/test_delivery.py and
tests/sales/test_email_delivery.py.
"""

import base64
import json
import uuid
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection, Queue

from config.celery import app
from core.broker import Channel, Transport

pytestmark = pytest.mark.redis

URL = "redis://127.0.0.1:6379/13"


@pytest.fixture
def queue() -> Iterator[str]:
    name = f"test-broker-{uuid.uuid4().hex[:8]}"
    yield name
    client = redis.Redis.from_url(URL)
    for key in client.scan_iter(match=f"*{name}*"):
        client.delete(key)
    client.close()


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every Redis client the channels build to send commands (not the polling loop's own,
    built once per channel by kombu)."""
    clients: list[object] = []
    create = Channel._create_client

    def counting(self: Channel, asynchronous: bool = False) -> object:
        client = create(self, asynchronous=asynchronous)
        if not asynchronous:
            clients.append(client)
        return client

    monkeypatch.setattr(Channel, "_create_client", counting)
    return clients


def test_celery_publishes_through_this_transport_when_the_broker_is_redis():
    assert app.conf.broker_transport == "core.broker:Transport"
    with app.connection_for_write(URL) as connection:
        assert connection.transport_cls == "core.broker:Transport"
        assert isinstance(connection.transport, Transport)


def test_a_channel_builds_its_client_once_and_every_message_arrives(queue, built):
    with Connection(URL, transport=Transport) as connection:
        producer = connection.Producer(serializer="json")
        for n in range(5):
            producer.publish({"n": n}, routing_key=queue, declare=[Queue(queue)])
        assert len(built) == 1

    raw = redis.Redis.from_url(URL).lrange(queue, 0, -1)
    bodies = sorted(json.loads(base64.b64decode(json.loads(item)["body"]))["n"] for item in raw)
    assert bodies == [0, 1, 2, 3, 4]


def test_a_new_pool_gets_a_new_client(queue, built):
    """kombu replaces a channel's pool after a fork (and on close): the kept client, bound to
    the old pool, is not used again."""
    with Connection(URL, transport=Transport) as connection:
        channel = connection.default_channel
        producer = connection.Producer(channel, serializer="json")
        producer.publish({"n": 1}, routing_key=queue)
        first_pool = channel.pool
        channel._after_fork()  # what kombu runs in a forked child: the pools are dropped
        producer.publish({"n": 2}, routing_key=queue)
        assert channel.pool is not first_pool
        assert len(built) == 2
        assert built[1].connection_pool is channel.pool  # type: ignore[attr-defined]

    assert redis.Redis.from_url(URL).llen(queue) == 2


def test_an_explicit_client_is_used_as_given():
    with Connection(URL, transport=Transport) as connection:
        channel = connection.default_channel
        given = redis.Redis.from_url(URL)
        with channel.conn_or_acquire(given) as client:
            assert client is given
        with channel.conn_or_acquire() as kept, channel.conn_or_acquire() as again:
            assert kept is again
            assert kept.connection_pool is channel.pool
