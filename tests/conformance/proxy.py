"""A loopback HTTP proxy that adds `Authorization: Bearer <token>` to every request it forwards.

The official MCP conformance suite cannot send a bearer token, and every request to Garante's
`/mcp` needs one. This proxy stands in front of a live server: it forwards each request's
method, path, headers and body unchanged except for the Authorization header (any the client
sent is replaced), and relays the server's status, headers and body back. `Host` and `Origin`
pass through as the client sent them, so what the server judges (DNS rebinding protection) is
what the client asked, not what the proxy would say.

    with bearer_proxy("http://127.0.0.1:8000", token) as url:
        ...  # point the client at f"{url}/mcp"

Or from a shell: `python -m tests.conformance.proxy --upstream URL --token T --port N`.
"""

import argparse
import http.client
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# Connection-level headers (RFC 9110 §7.6.1) belong to one hop and are not forwarded.
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}
UPSTREAM_TIMEOUT_SECONDS = 60


class BearerProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], upstream: str, token: str) -> None:
        super().__init__(address, _ForwardingHandler)
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the upstream must be an http:// URL, not {upstream!r}")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 80
        self.token = token

    def handle_error(self, request: object, client_address: object) -> None:
        """A client hanging up on a kept-alive connection is routine, not worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class _ForwardingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the clients behind it expect
    server: BearerProxyServer

    def _forward(self) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.send_error(411, "send a Content-Length")  # not needed by the clients it serves
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {
            name: value
            for name, value in self.headers.items()
            if name.lower() not in HOP_BY_HOP and name.lower() != "authorization"
        }
        headers["Authorization"] = f"Bearer {self.server.token}"
        if "Host" not in self.headers:
            headers["Host"] = f"{self.server.upstream_host}:{self.server.upstream_port}"
        upstream = http.client.HTTPConnection(
            self.server.upstream_host, self.server.upstream_port, timeout=UPSTREAM_TIMEOUT_SECONDS
        )
        try:
            # skip_host: the client's own Host header is among `headers` and goes as sent.
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers.items():
                upstream.putheader(name, value)
            upstream.endheaders(body)
            response = upstream.getresponse()
            payload = response.read()
        except OSError as error:
            self.send_error(502, f"upstream unreachable: {error}")
            return
        finally:
            upstream.close()
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        if response.status not in (204, 304) and not 100 <= response.status < 200:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _forward

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the server behind keeps its own log."""


@contextmanager
def bearer_proxy(upstream: str, token: str, *, port: int = 0) -> Iterator[str]:
    """Serve the proxy on 127.0.0.1 (a free port unless given) in a thread; yields its URL."""
    server = BearerProxyServer(("127.0.0.1", port), upstream, token)
    thread = threading.Thread(target=server.serve_forever, name="bearer-proxy", daemon=True)
    thread.start()
    try:
        yield server.url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--token", required=True, help="the gateway token to add")
    parser.add_argument("--port", type=int, default=0, help="where to listen (default: any)")
    options = parser.parse_args()
    server = BearerProxyServer(("127.0.0.1", options.port), options.upstream, options.token)
    print(f"forwarding {server.url} -> {options.upstream}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
