"""Oversized headers through the cluster's nginx (issue #42): answered in the APIs' JSON, by
gunicorn past its 8190-byte line (nginx lets up to 16 kB through) and by nginx past that."""

import json
import socket
from urllib.parse import urlsplit

import pytest


def raw_exchange(url: str, request: bytes) -> tuple[int, str, dict]:
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
    return int(status_line.split()[1]), headers["content-type"], json.loads(body)


@pytest.mark.parametrize("size", [10_000, 20_000], ids=["10 kB: gunicorn", "20 kB: nginx"])
def test_an_oversized_header_through_nginx_gets_a_json_431(cluster, size):
    request = (
        b"GET /api/ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
        + b"x" * size
        + b"\r\nConnection: close\r\n\r\n"
    )

    status, content_type, body = raw_exchange(cluster.url, request)

    assert (status, content_type) == (431, "application/json")
    assert body["error_type"] == "VALIDATION" and body["code"] == "request_headers_too_large"
