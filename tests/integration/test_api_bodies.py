"""Property: no body, however odd, makes any route of the API answer 5xx.

Every route the app serves (read from `app.routes`, so a new route is covered
the day it is added) gets generated bodies, with a valid token and, where its
path names a session and a call, a real session with a call waiting: valid
JSON of odd shapes and values (the keys the API's bodies name, holding lone
surrogates, NaN, infinities, 1e400, huge integers, duplicated keys, deep
nesting, megabytes), invalid JSON, bytes that are not UTF-8, and the content
types a client might get wrong. Temporal is reachable throughout, so every
answer must be below 500: a client's mistake is a 4xx with a reason.

HITL_API_BODY_EXAMPLES sets the examples per route (10; the whole test takes
well under a minute); the generation is derandomized, so CI meets the same bodies.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import fastapi.routing
import httpx2 as httpx
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from tests.support.api_server import Api, api, signing_key, token_of  # noqa: F401  (fixtures)
from workflows.session import SessionInput

EXAMPLES = int(os.environ.get("HITL_API_BODY_EXAMPLES", "10"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # a failure is printed unshrunk: shrinking replays it against the server
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large,
                           HealthCheck.large_base_example],
)
DELETE = "please delete notes.txt"
# The codec's bodies are protobuf JSON, which no schema of the app declares.
CODEC_KEYS = ("payloads", "metadata", "data", "encoding")
ODD_NUMBERS = ("NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "-0", "1E+2", "9" * 30, "-" + "9" * 30,
               "9" * 5000, "0.1" + "0" * 400)
ODD_STRINGS = ('"\\udfff"', '"\\ud800"', '"text\\ud83d"', '"\\ud83d\\ude00"', '"\\u0000"', '"\\u202e"', '""',
               '"\\\\"', '"<script>"')
CONTENT_TYPES = ("application/json", "application/json", "application/json", None, "application/json; charset=utf-8",
                 "application/problem+json", "text/plain", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=x", "application/octet-stream", "garbage")


def fields_of(document: dict[str, Any], method: str, path: str) -> list[str]:
    """The property names of a route's request body in the OpenAPI document; where it declares
    none (`POST /sessions` takes any object, the codec reads its own body), every name the
    document, a session's input and the codec's protobuf JSON know."""
    names: set[str] = set()

    def collect(node: Any, seen: frozenset[str] = frozenset()) -> None:
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str) and reference not in seen:
                collect(document["components"]["schemas"][reference.rsplit("/", 1)[1]], seen | {reference})
            if isinstance(node.get("properties"), dict):
                names.update(node["properties"])
            for value in node.values():
                collect(value, seen)
        elif isinstance(node, list):
            for value in node:
                collect(value, seen)

    collect(document.get("paths", {}).get(path, {}).get(method.lower(), {}).get("requestBody"))
    if not names:
        collect(document)
        names.update(SessionInput.model_fields, CODEC_KEYS)
    return sorted(names)


def odd_json(fields: list[str]) -> st.SearchStrategy[str]:
    """JSON text, valid or only nearly so: mostly an object of the route's own fields holding
    values of every type, now and then an odd one (NaN, 1e400, a lone surrogate...)."""
    key = st.one_of(st.sampled_from(fields).map(json.dumps), st.text(max_size=6).map(json.dumps),
                    st.sampled_from(ODD_STRINGS))
    plain = st.one_of(
        st.text(max_size=20).map(lambda text: json.dumps(text, ensure_ascii=False)),
        st.integers(-10**6, 10**6).map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
        st.sampled_from(("true", "false", "null", '"tool"', '"same_args"', "900", "0", "-1")),
    )
    leaf = st.one_of(plain, plain, plain, st.sampled_from(ODD_NUMBERS + ODD_STRINGS))

    def containers(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.lists(children, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
            st.lists(st.tuples(key, children), max_size=4).map(an_object),
        )

    value = st.recursive(leaf, containers, max_leaves=10)
    top = st.lists(st.tuples(st.sampled_from(fields).map(json.dumps), value), max_size=4).map(an_object)
    return st.one_of(top, top, top, value)


def an_object(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{name}:{value}" for name, value in pairs) + "}"


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


def bodies(fields: list[str]) -> st.SearchStrategy[bytes]:
    """A request body: odd JSON, JSON nested or sized past every bound, or not JSON at all."""
    field = st.sampled_from(fields)
    shaped = odd_json(fields).map(str.encode)
    depth = st.sampled_from([10, 63, 64, 65, 100, 199, 201, 999, 1001, 100_000])
    size = st.sampled_from([1_000, 100_001, 1_000_000, 3_000_000])
    return st.one_of(
        shaped, shaped, shaped, shaped, shaped, shaped,
        depth.map(lambda d: nested(d).encode()),
        st.tuples(field, depth).map(lambda fd: f'{{"{fd[0]}": {nested(fd[1])}}}'.encode()),
        st.tuples(field, depth).map(lambda fd: ('{"' + fd[0] + '": ' + '{"a":' * fd[1] + "1" + "}" * fd[1] + "}").encode()),
        st.tuples(field, size).map(lambda fs: f'{{"{fs[0]}": "{"a" * fs[1]}"}}'.encode()),
        st.tuples(field, size).map(lambda fs: f'{{"{fs[0]}": [{",".join(["0"] * (fs[1] // 2))}]}}'.encode()),
        st.tuples(field, st.sampled_from([b"\xff", b"\xed\xbf\xbf", b"\xc0\xaf", b"\xe4\xb8"])).map(
            lambda fb: b'{"' + fb[0].encode() + b'": "' + fb[1] + b'"}'),
        odd_json(fields).flatmap(lambda text: st.integers(0, len(text)).map(lambda cut: text[:cut].encode())),
        st.binary(max_size=40),
        st.sampled_from([b"\xef\xbb\xbf{}", b"{}" * 2, b"null", b" ", b"\x00"]),
    )


def routes_of(app: Any) -> list[tuple[str, str]]:
    """(method, path template) of every route the app serves, included routers' too, HEAD aside
    (GET's twin), as OpenAPI names them (no `:path` converter). FastAPI 0.165 keeps an included router whole in `app.routes`; older ones flatten it."""
    flattened = getattr(fastapi.routing, "iter_route_contexts", lambda routes: routes)(app.routes)
    return sorted((method, getattr(route, "path_format", route.path)) for route in flattened
                  for method in getattr(route, "methods", None) or () if method != "HEAD")


class Target:
    """The session the routes act on, with a call waiting; started afresh once a request may have
    settled the call or closed the session, so later bodies still reach past the guards."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        self.session_id = ""
        self.call_id = ""
        self.renew()

    def renew(self) -> None:
        if self.session_id:
            self.http.post(f"/sessions/{self.session_id}/cancel", json={})
        started = self.http.post("/sessions", json={"message": DELETE})
        assert started.status_code == 201, started.text
        self.session_id = started.json()["session_id"]
        self.call_id = started.json()["pending"][0]["call_id"]

    def path(self, template: str) -> str:
        return template.format(session_id=self.session_id, call_id=self.call_id, name="inbox.js", token="m1.e30.not-a-mac",
                               id="so-0123456789abcdef")


async def test_no_body_on_any_route_is_answered_with_a_server_error(api: Api) -> None:
    routes = routes_of(api.app)
    document = api.app.openapi()
    assert ("POST", "/sessions/{session_id}/calls/{call_id}/approve") in routes and ("POST", "/codec/decode") in routes
    answered: dict[tuple[str, str], set[int]] = {}

    def every_route() -> None:
        with httpx.Client(base_url=api.base, headers={"Authorization": f"Bearer {token_of('ana')}"}, timeout=120) as http:
            target = Target(http)
            for method, template in routes:

                @SETTINGS
                @given(body=bodies(fields_of(document, method, template)), content_type=st.sampled_from(CONTENT_TYPES))
                # The issue's own cases, met by every route whatever the generator draws.
                @example(body=b'{"comment": "\\udfff"}', content_type="application/json")
                @example(body=b'{"for_seconds": NaN}', content_type="application/json")
                @example(body=b'{"for_seconds": Infinity}', content_type="application/json")
                @example(body=nested(100_000).encode(), content_type="application/json")
                def answers_below_500(body: bytes, content_type: str | None) -> None:
                    headers = {"Content-Type": content_type} if content_type else {}
                    with http.stream(method, target.path(template), content=body, headers=headers) as answer:
                        if not answer.headers.get("content-type", "").startswith("text/event-stream"):
                            answer.read()
                    answered.setdefault((method, template), set()).add(answer.status_code)
                    assert answer.status_code < 500, (method, template, content_type, body[:300], answer.text[:500])
                    if answer.status_code >= 400 and answer.headers.get("content-type") == "application/json":
                        reason = answer.json()["detail"]  # a line, or FastAPI's list of field errors
                        assert isinstance(reason, list) or ("\n" not in reason and "Traceback" not in reason), reason
                    if answer.status_code < 300 and method == "POST" and "{session_id}" in template:
                        target.renew()

                answers_below_500()

    await asyncio.to_thread(every_route)
    assert set(answered) == set(routes)
    assert any(status < 300 for statuses in answered.values() for status in statuses)  # some bodies reached the routes


async def test_the_issues_bodies_are_refused_with_their_reason_and_the_call_still_waits(api: Api) -> None:
    """Issue 26's bodies, each answered 500 before: a lone surrogate in a comment, NaN and Infinity
    as a claim's duration, JSON nested past the stack on the codec; and a body sent as text."""
    started = await api.start("ana", DELETE)
    url = f"/sessions/{started['session_id']}/calls/{started['pending'][0]['call_id']}"
    as_json = {"Content-Type": "application/json"}
    async with api.as_("ana") as ana:
        for path, body, status, reason in (
            (f"{url}/approve", b'{"comment": "\\udfff"}', 422, "lone surrogate"),
            (f"{url}/claim", b'{"for_seconds": NaN}', 422, "holds NaN, which is not JSON"),
            (f"{url}/claim", b'{"for_seconds": Infinity}', 422, "holds Infinity, which is not JSON"),
            (f"{url}/claim", b'{"for_seconds": 1e400}', 422, "beyond a double's range"),
            (f"{url}/reject", b'{"reason": "a", "reason": "b"}', 422, "names the key 'reason' twice"),
            (f"{url}/approve", b'{"comment": "\xff"}', 422, "not UTF-8"),
            ("/codec/decode", nested(100_000).encode(), 422, "nested deeper than 64 levels"),
            ("/codec/decode", b'{"payloads": ' + nested(64).encode() + b"}", 422, "nested deeper than 64 levels"),
            ("/sessions", b'{"message": "hello", "max_steps": ' + b"9" * 30 + b"}", 422, "beyond 64 bits"),
        ):
            answer = await ana.post(path, content=body, headers=as_json)
            assert (answer.status_code, reason in answer.json()["detail"]) == (status, True), (path, body[:80], answer.text)
        as_text = await ana.post(f"{url}/approve", content=b"{}", headers={"Content-Type": "text/plain"})
        assert as_text.status_code == 415, as_text.text
        assert "must be JSON (Content-Type: application/json)" in as_text.json()["detail"]
        assert [item["call_id"] for item in (await ana.get(f"/sessions/{started['session_id']}/pending")).json()] == \
            [started["pending"][0]["call_id"]]
        assert (await ana.post(f"{url}/approve", json={"comment": "fine"})).status_code == 200
