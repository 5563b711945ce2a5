"""An MCP server that asks a person during its tool calls, written with the SDK's MCPServer (FastMCP in mcp 1.x).

python asking_mcp.py <state folder> [--older] [--plain-http]

- `book_table(day)` asks, in form mode, who the table is for and for how many
  (the SDK's Resolve/Elicit: input_required at 2026-07-28, elicitation/create before).
- `sign_in()` asks, in URL mode, the person to sign in at a page (a hand-made
  input_required result with its requestState).

- `remember_me()` asks the old way, `ctx.elicit` (an elicitation/create request mid-call).
- `--plain-http`: `sign_in` sends the person to its page over plain http.
- `--older` makes it a server of the handshake era (2025-11-25): server/discover is not found, so
  the client falls back to initialize, and a question is an elicitation/create request mid-call.

Each answer it sees is appended to <state>/seen.jsonl.

Its requestState is sealed with a fixed key and a week's lifetime, as the SDK says a server whose
state must outlive its process must: MCPServer's default (a key made per process, ten minutes)
refuses, after a restart, the state it minted before ("Invalid or expired requestState").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp import types
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, RequestStateSecurity, Resolve
from mcp.server.elicitation import AcceptedElicitation
from pydantic import BaseModel, Field

STATE = Path(sys.argv[1])
STATE_KEY = "asking-test-server: a key that outlives its process"
app = MCPServer("asking", request_state_security=RequestStateSecurity(keys=[STATE_KEY], ttl=7 * 24 * 3600))
SIGN_IN_URL = "https://login.example.org/device?code=XY-42"


async def older(ctx: Any, call_next: Any) -> Any:
    """Answers server/discover as a server that predates it does."""
    if ctx.method == "server/discover":
        raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found")
    return await call_next(ctx)


async def serve_as_an_older_server() -> None:
    """The handshake era only (the SDK's serve_loop), as a 2025-11-25 server: MCPServer.run would
    take server/discover as the opening of a 2026-07-28 connection. MCPServer has no public way to
    serve one era, so its lowlevel server is taken from a private attribute."""
    app.middleware.insert(0, older)
    server = app._lowlevel_server  # noqa: SLF001
    async with stdio_server() as (read, write), server.lifespan(server) as state:
        await serve_loop(server, read, write, lifespan_state=state,
                         init_options=server.create_initialization_options())


def seen(record: dict[str, object]) -> None:
    with (STATE / "seen.jsonl").open("a") as log:
        log.write(json.dumps(record) + "\n")


class Booking(BaseModel):
    name: str = Field(description="Whose name the table is under")
    guests: int = Field(description="How many people")


def ask_booking() -> Elicit[Booking]:
    return Elicit("Who is the table for?", Booking)


@app.tool()
def book_table(day: str, booking: Annotated[ElicitationResult[Booking], Resolve(ask_booking)]) -> str:
    """Book a table; asks the person whose name and how many."""
    if isinstance(booking, AcceptedElicitation):
        seen({"tool": "book_table", "action": "accept", "content": booking.data.model_dump()})
        return f"booked {day} for {booking.data.name}, {booking.data.guests} guests"
    seen({"tool": "book_table", "action": booking.action})
    return f"not booked: the person answered {booking.action}"


def sign_in_url() -> str:
    """SIGN_IN_URL, or with `--plain-http` the same page over http."""
    return SIGN_IN_URL.replace("https://", "http://") if "--plain-http" in sys.argv[2:] else SIGN_IN_URL


@app.tool()
def sign_in(ctx: Context) -> str | types.InputRequiredResult:
    """Sign in to the booking service; the person signs in at a page."""
    answered = (ctx.input_responses or {}).get("login")
    if answered is None:
        return types.InputRequiredResult(request_state="waiting-for-login", input_requests={"login": types.ElicitRequest(
            params=types.ElicitRequestURLParams(message="Sign in to the booking service", url=sign_in_url(),
                                                elicitation_id="login-1"))})
    seen({"tool": "sign_in", "action": answered.action, "request_state": ctx.request_state})
    return f"signed in ({answered.action})" if answered.action == "accept" else f"not signed in: {answered.action}"


class Remember(BaseModel):
    remember: bool = Field(description="Remember me on this device")


@app.tool()
async def remember_me(ctx: Context) -> str:
    """Asks, during the call, whether to remember the person on this device."""
    try:
        answered = await ctx.elicit("Remember you on this device?", Remember)
    except MCPError as error:
        seen({"tool": "remember_me", "error": error.error.message})
        return f"not asked: {error.error.message}"
    seen({"tool": "remember_me", "action": answered.action})
    return f"asked: {answered.action}"


if __name__ == "__main__":
    if "--older" in sys.argv[2:]:
        anyio.run(serve_as_an_older_server)
    else:
        app.run("stdio")
