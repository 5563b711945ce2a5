"""A small HTTP proxy that sends every request to the other replica than the last (round robin),
as a load balancer with no stickiness would: one request per client connection, `Connection:
close` to the replica, the answer relayed as it comes (server-sent events stream through).

`served` records which replica answered each request, in order, for the test to read.
"""

from __future__ import annotations

import asyncio
import itertools
from contextlib import suppress
from dataclasses import dataclass, field

HEAD_LIMIT = 64 * 1024


@dataclass
class RoundRobin:
    """Listens on a free loopback port in front of `replicas` (ports on 127.0.0.1)."""

    replicas: list[int]
    served: list[tuple[int, str]] = field(default_factory=list)  # (replica's index, "METHOD /path")
    turn: itertools.cycle[int] = field(init=False)
    server: asyncio.Server | None = None
    open_to_clients: set[asyncio.StreamWriter] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.turn = itertools.cycle(range(len(self.replicas)))

    @property
    def base(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> RoundRobin:
        self.server = await asyncio.start_server(self.relay, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for client in list(self.open_to_clients):  # streams still relayed end with the proxy
            client.close()
        with suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), 5)

    async def relay(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        self.open_to_clients.add(client_out)
        try:
            await self.relay_one(client_in, client_out)
        finally:
            self.open_to_clients.discard(client_out)
            client_out.close()

    async def relay_one(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        try:
            head = await client_in.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            client_out.close()
            return
        request_line, *headers = head.decode("latin-1").split("\r\n")[:-2]
        length = next((int(value) for name, _, value in (h.partition(":") for h in headers)
                       if name.strip().lower() == "content-length"), 0)
        body = await client_in.readexactly(length) if length else b""
        kept = [h for h in headers if h.partition(":")[0].strip().lower() != "connection"]
        index = next(self.turn)
        method, path = request_line.split(" ")[:2]
        self.served.append((index, f"{method} {path.split('?')[0]}"))
        try:
            replica_in, replica_out = await asyncio.open_connection("127.0.0.1", self.replicas[index])
        except OSError:
            client_out.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await client_out.drain()
            client_out.close()
            return
        replica_out.write("\r\n".join([request_line, *kept, "Connection: close", "", ""]).encode("latin-1") + body)
        await replica_out.drain()
        try:
            while chunk := await replica_in.read(65536):
                client_out.write(chunk)
                await client_out.drain()
        except ConnectionError:
            pass
        finally:
            replica_out.close()
            client_out.close()
