"""One MCP server and the one session every tool call of this worker shares.

A supervisor task owns the session: it starts the stdio process (or opens the
streamable HTTP connection), lists the tools, then pings the server every few
seconds. When the process dies or a ping goes unanswered it opens a new
session, backing off while the server stays down; a `tools/list_changed`
notification makes it list the tools again. The transports' cancel scopes are
entered and left by that one task, which is what anyio requires. Closing the
connection closes stdin of a stdio server, then terminates it (the SDK's
shutdown sequence), so a stopping worker leaves no process behind.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from contextlib import AsyncExitStack
from typing import Any, Callable

import httpx2
from mcp import ClientSession, StdioServerParameters, types
# Private in mcp 2.3: its only public caller is mcp.Client(mode="auto"), which owns its transport and
# session, while this module needs its own (the sandboxed stdio process, the ping, the tool-change
# stream). Re-implementing the SDK's fallback rules here would drift from them; the unit test
# tests/unit/test_mcp_negotiation.py fails by name if the SDK moves or changes it.
from mcp.client._probe import negotiate_auto
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import listen
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from activities.mcp.config import ServerEntry
from activities.mcp.elicitation import decline_live_elicitation
from activities.mcp.sandbox import bwrap_path, sandboxed_command
from hitl.control_characters import shown

log = logging.getLogger("hitl.mcp")

CONNECT_SECONDS = 20.0  # start the process, initialize, list tools
PING_EVERY_SECONDS = 2.0
PING_TIMEOUT_SECONDS = 5.0
BACKOFF_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)
CLOSE_SECONDS = 5.0

ToolsListener = Callable[[str, list[types.Tool]], None]


class ServerUnavailable(Exception):
    """No session with the server now; a call was not sent."""


class CallInterrupted(Exception):
    """The call was sent and no answer came: the server may or may not have acted on it."""


class ServerConnection:
    def __init__(self, name: str, entry: ServerEntry, on_tools: ToolsListener) -> None:
        self.name = name
        self.entry = entry
        self.on_tools = on_tools
        self.last_error: str | None = None
        self.sessions_opened = 0
        self._session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._attempted = asyncio.Event()  # the first connection attempt ended, either way
        self._wake = asyncio.Event()
        self._broken = False
        self._refresh = False
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()  # set when the current session has ended
        self._in_flight = 0

    @property
    def protocol_version(self) -> str | None:
        """The MCP revision the current session speaks (2026-07-28, or an older server's), if connected."""
        return self._session.protocol_version if self._session is not None else None

    async def start(self, wait_seconds: float = CONNECT_SECONDS) -> bool:
        """Start supervising; True when the first session is up within `wait_seconds`."""
        self._task = asyncio.create_task(self._supervise(), name=f"mcp-server-{self.name}")
        try:
            await asyncio.wait_for(self._attempted.wait(), wait_seconds)
        except asyncio.TimeoutError:
            pass
        return self._ready.is_set()

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), CLOSE_SECONDS + 3)
        except asyncio.TimeoutError:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def call(self, tool: str, args: dict[str, Any], on_sent: Callable[[], None], wait_seconds: float,
                   input_responses: dict[str, Any] | None = None, request_state: str | None = None,
                   ) -> types.CallToolResult | types.InputRequiredResult:
        """Call a tool on the shared session. `on_sent` runs just before the request leaves. A
        2026-07-28 server may answer input_required (activities/mcp/elicitation.py); the call
        that answers it carries `input_responses` and the kept `request_state`.

        A call in flight when its session is lost (the supervisor noticed a
        dead process or an unanswered ping) fails at once rather than at its
        timeout; so does one whose own transport reports the break."""
        session = await self._session_within(wait_seconds)
        lost = self._lost
        on_sent()
        self._in_flight += 1
        try:
            result = await _unless(lost, session.call_tool(
                tool, args, read_timeout_seconds=self.entry.timeout_seconds, input_responses=input_responses,
                request_state=request_state, allow_input_required=True))
            if not isinstance(result, (types.CallToolResult, types.InputRequiredResult)):
                raise CallInterrupted(f"the server answered with a {type(result).__name__}, not a tool result")
            return result
        except MCPError as error:
            if error.error.code == types.CONNECTION_CLOSED:
                self._mark_broken(session, error.error.message)
                raise CallInterrupted(error.error.message) from None
            if error.error.code == types.REQUEST_TIMEOUT:  # slow, not broken: the pings tell
                raise CallInterrupted(f"no answer within {self.entry.timeout_seconds:g} s") from None
            raise  # the server answered with an error: its answer to this call
        except (OSError, httpx2.HTTPError, EOFError) as error:
            self._mark_broken(session, str(error))
            raise CallInterrupted(f"{type(error).__name__}: {error}") from None
        except Exception as error:  # anyio's closed or broken streams when the process died mid-call
            if type(error).__module__.startswith("anyio"):
                self._mark_broken(session, type(error).__name__)
                raise CallInterrupted(f"the connection to the server broke ({type(error).__name__})") from None
            raise
        finally:
            self._in_flight -= 1


    def _mark_broken(self, session: ClientSession, why: str) -> None:
        """Have the supervisor open a new session, unless it already replaced this one."""
        if self._session is session:
            self.last_error = why
            self._broken = True
            self._wake.set()

    async def _session_within(self, seconds: float) -> ClientSession:
        if not self._ready.is_set():
            try:
                await asyncio.wait_for(self._ready.wait(), seconds)
            except asyncio.TimeoutError:
                pass
        session = self._session
        if session is None or self._closing:
            why = f": {self.last_error}" if self.last_error else ""
            raise ServerUnavailable(f"the MCP server {self.name!r} is not reachable{why}")
        return session

    # ---------------------------------------------------------------- supervision

    async def _supervise(self) -> None:
        failures = 0
        while not self._closing:
            try:
                await self._one_session()
                failures = 0
            except Exception as error:  # noqa: BLE001 (any failure of the server: reopen)
                self.last_error = _describe(error)
                failures += 1
                log.warning("MCP server %s: %s", self.name, self.last_error)
            finally:
                self._session = None
                self._ready.clear()
                self._lost.set()
                self._attempted.set()
            if not self._closing:
                await self._sleep(BACKOFF_SECONDS[min(failures, len(BACKOFF_SECONDS) - 1)])

    async def _one_session(self) -> None:
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport())
            session = await stack.enter_async_context(ClientSession(
                read, write, read_timeout_seconds=CONNECT_SECONDS, message_handler=self._on_message,
                # Advertises elicitation (form and URL), which 2026-07-28 servers ask by input_required.
                elicitation_callback=decline_live_elicitation))
            # server/discover first (2026-07-28), the initialize handshake for an older server.
            await asyncio.wait_for(negotiate_auto(session), CONNECT_SECONDS)
            await self._list_tools(session)
            await self._listen_for_tool_changes(session, stack)
            self._broken = False
            self._lost = asyncio.Event()
            self._session = session
            self.sessions_opened += 1
            self.last_error = None
            self._ready.set()
            self._attempted.set()
            await self._watch(session)

    def _transport(self) -> Any:
        if self.entry.command is not None:
            env = {**get_default_environment(), **(self.entry.env or {})}
            command, args, cwd = self.entry.command, self.entry.args, self.entry.cwd
            bwrap = bwrap_path()
            if self.entry.sandbox_grant is not None and bwrap is not None:
                command, args = sandboxed_command(self.entry, env, bwrap)
                cwd = None  # bwrap's --chdir, inside the sandbox
            parameters = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
            stderr = _ServerStderr(self.name)  # to the worker's, one line at a time, control characters shown
            return _FirstTwo(stdio_client(parameters, errlog=stderr.writer), after=stderr.close_writer)
        return _HttpStreams(self.entry.url or "", self.entry.headers)

    async def _watch(self, session: ClientSession) -> None:
        """Until closing or broken: ping, and list the tools again when the server says they changed.

        A stdio server is not pinged while a call is in flight: many handle one
        request at a time (mcp-server-git blocks in a commit hook), and their
        death is seen at once anyway, as the end of their output."""
        while not self._closing and not self._broken:
            woke = await self._sleep(PING_EVERY_SECONDS)
            if self._closing or self._broken:
                return
            if self._refresh:
                self._refresh = False
                await self._list_tools(session)
            if not woke and not (self.entry.command is not None and self._in_flight):
                await asyncio.wait_for(_ping(session), PING_TIMEOUT_SECONDS)

    async def _listen_for_tool_changes(self, session: ClientSession, stack: AsyncExitStack) -> None:
        """On 2026-07-28 a server says its tools changed only on a subscriptions/listen stream (older
        ones send a notification, _on_message). A server that cannot listen is listed only at connect."""
        if session.discover_result is None:
            return
        try:
            # Acknowledged within the session's read timeout, CONNECT_SECONDS.
            subscription = await stack.enter_async_context(listen(session, tools_list_changed=True))
        except Exception as error:  # noqa: BLE001 (its tools stay as listed)
            log.warning("MCP server %s: no subscription to its tool changes (%s)", self.name, _describe(error))
            return

        async def follow() -> None:
            async for _ in subscription:
                self._tools_changed()

        following = asyncio.create_task(follow(), name=f"mcp-listen-{self.name}")
        stack.callback(following.cancel)

    async def _list_tools(self, session: ClientSession) -> None:
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await asyncio.wait_for(
                session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None), CONNECT_SECONDS
            )
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.on_tools(self.name, tools)

    async def _on_message(self, message: Any) -> None:
        """Runs in the session's receive loop: it may not send requests itself, so it wakes the supervisor."""
        if isinstance(message, types.ToolListChangedNotification):
            self._tools_changed()

    def _tools_changed(self) -> None:
        self._refresh = True
        self._wake.set()

    async def _sleep(self, seconds: float) -> bool:
        """Sleep, or less when woken; True when woken."""
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            self._wake.clear()


async def _ping(session: ClientSession) -> None:
    """2026-07-28 has no ping: a server/discover at the negotiated version is as cheap, and answered."""
    if session.discover_result is not None and session.protocol_version is not None:
        await session.send_discover(session.protocol_version)
    else:
        await session.send_ping()


async def _unless(lost: asyncio.Event, call: Any) -> Any:
    """The call's result, or CallInterrupted as soon as its session is lost."""
    task = asyncio.ensure_future(call)
    watch = asyncio.ensure_future(lost.wait())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
    if not task.done() or task.cancelled():
        raise CallInterrupted("the connection to the server was lost mid-call")
    return task.result()


class _FirstTwo:
    """The transport's streams without the extras some transports add (e.g. a session id getter)."""

    def __init__(self, manager: Any, after: Callable[[], None] | None = None) -> None:
        self.manager = manager
        self.after = after

    async def __aenter__(self) -> tuple[Any, Any]:
        try:
            streams = await self.manager.__aenter__()
        except BaseException:
            if self.after:
                self.after()
            raise
        return streams[0], streams[1]

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self.manager.__aexit__(*exc)
        finally:
            if self.after:
                self.after()


class _ServerStderr:
    """A pipe for a stdio server's stderr: each line reaches the worker's stderr as
    `MCP server <name>: <line>` with its control characters shown, so a server cannot
    rewrite the operator's terminal (or the log) with escape sequences."""

    def __init__(self, name: str) -> None:
        read, write = os.pipe()
        self.writer = os.fdopen(write, "w")
        reader = os.fdopen(read, "rb")
        threading.Thread(target=self._relay, args=(name, reader), name=f"mcp-stderr-{name}", daemon=True).start()

    @staticmethod
    def _relay(name: str, reader: Any) -> None:
        with reader:
            for line in reader:
                sys.stderr.write(f"MCP server {name}: {shown(line.decode(errors='replace').rstrip(chr(10)))}\n")
                sys.stderr.flush()

    def close_writer(self) -> None:
        """Ours; the server keeps its own copy until it exits, which ends the relay."""
        if not self.writer.closed:
            self.writer.close()


class _HttpStreams:
    """Streamable HTTP with the entry's headers on an httpx client this connection owns."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url, self.headers = url, headers
        self.stack = AsyncExitStack()

    async def __aenter__(self) -> tuple[Any, Any]:
        client = await self.stack.enter_async_context(create_mcp_http_client(headers=self.headers or None))
        streams = await self.stack.enter_async_context(streamable_http_client(self.url, http_client=client))
        return streams[0], streams[1]

    async def __aexit__(self, *exc: Any) -> Any:
        return await self.stack.__aexit__(*exc)


def _describe(error: BaseException) -> str:
    """The innermost useful message of an error (anyio groups wrap the real one)."""
    while getattr(error, "exceptions", None):  # an exception group (Python 3.11+, or anyio's backport)
        error = error.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(error, MCPError):
        return error.error.message
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text}" if not isinstance(error, OSError) else text
