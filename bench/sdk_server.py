"""The reference point: the same trivial tool served by the official MCP Python SDK server.

`list_services` answers the sandbox's services in Garante's listing shape, from memory (no
database, no authentication: the SDK server's best case). Served in stateless JSON mode under
uvicorn with several worker processes, as the SDK documents for horizontal scaling:

    .venv/bin/python bench/sdk_server.py --port 8100 --workers 2 [--nodelay] [--reuse-port] [--fast]

As shipped, `pip install mcp` brings uvicorn without its optional C extensions, so uvicorn
parses HTTP with h11 on asyncio's event loop; that is what runs without `--fast`. With `--fast`
it parses with httptools (C) on uvloop, uvicorn's fastest, as Garante's gunicorn parses with
its C parser (gunicorn_h1c).

Why `--nodelay`: with `workers > 1` uvicorn binds the listening socket itself with
`socket.socket(family=...)`, whose `proto` is 0, and asyncio only sets TCP_NODELAY on accepted
sockets whose `proto` is IPPROTO_TCP. Replies then wait on Nagle's algorithm against the
client's delayed ACK (~40 ms per keep-alive reply on Linux). `--nodelay` sets the option on
every accepted connection, which is what a single-process uvicorn does by itself.

Why `--reuse-port`: uvicorn's workers share one listening socket, and a client that opens its
kept-alive connections at once (wrk) often has every one accepted by the same worker, which
then serves the whole run on one core. With `--reuse-port` each worker listens on a socket of
its own bound with SO_REUSEPORT, and the kernel spreads new connections over them, as
gunicorn's `--reuse-port` does for Garante's workers in bench/load.py.
"""

import argparse
import contextlib
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The sandbox's services (agenda/sandbox.py), as Garante's list_services answers them.
SERVICES = [
    {"name": "Consulta de asesoría", "description": "", "duration_minutes": 45},
    {"name": "Corte de pelo", "description": "", "duration_minutes": 30},
    {"name": "Tinte", "description": "", "duration_minutes": 90},
]

server = MCPServer("sdk-bench", log_level="WARNING")


@server.tool(
    name="list_services",
    title="List bookable services",
    description="Lists the services customers can book, with their duration in minutes.",
)
def list_services(limit: int = 20) -> dict[str, Any]:
    items = SERVICES[:limit]
    return {"items": items, "count": len(items), "has_more": len(SERVICES) > limit}


app = server.streamable_http_app(json_response=True, stateless_http=True)


class _NoDelay:
    """Sets TCP_NODELAY on the accepted connection, then lets the protocol take it."""

    def connection_made(self, transport: Any) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)  # type: ignore[misc]


class NoDelayH11Protocol(_NoDelay, H11Protocol):
    pass


class NoDelayHttpToolsProtocol(_NoDelay, HttpToolsProtocol):
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--nodelay", action="store_true", help="work around the uvicorn bug")
    parser.add_argument("--reuse-port", action="store_true", help="a listening socket per worker")
    parser.add_argument("--fast", action="store_true", help="httptools and uvloop")
    options = parser.parse_args()
    protocol = "HttpToolsProtocol" if options.fast else "H11Protocol"
    if options.nodelay:
        http = f"bench.sdk_server:NoDelay{protocol}"
    else:
        http = "httptools" if options.fast else "h11"
    loop = "uvloop" if options.fast else "asyncio"
    if options.reuse_port:
        serve_on_own_sockets(options.port, options.workers, http, loop)
        return
    uvicorn.run(
        "bench.sdk_server:app",
        host="127.0.0.1",
        port=options.port,
        workers=options.workers,
        http=http,
        loop=loop,
        log_level="warning",
        access_log=False,
    )


def serve_on_own_sockets(port: int, workers: int, http: str, loop: str) -> None:
    """`workers` uvicorn processes, each on its own SO_REUSEPORT socket bound to `port`; this
    process waits for them and stops them all when it is stopped."""
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen(2048)
            config = uvicorn.Config(
                app, http=http, loop=loop, log_level="warning", access_log=False
            )
            uvicorn.Server(config).run(sockets=[sock])
            os._exit(0)
        children.append(pid)

    def stop(signum: int, frame: Any) -> None:
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for child in children:
        os.waitpid(child, 0)  # retried by Python when a signal interrupts it (PEP 475)


if __name__ == "__main__":
    main()
