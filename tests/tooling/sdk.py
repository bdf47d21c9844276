"""The official MCP Python SDK as the Gateway's client, against a live server in either era."""

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def run_sdk(url: str, token: str, mode: str, session: Callable[[Client], Awaitable[Any]]) -> Any:
    """Open an SDK client on the live server in `mode` and run `session(client)` with it."""

    async def main() -> Any:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
        async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            return await session(client)

    return anyio.run(main)
