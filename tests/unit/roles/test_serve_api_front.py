# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The router's key-checking front (roles/serve/files/llm_cluster_api_front.py) on real sockets.

Each test starts the front on a loopback port in front of a recording upstream (an asyncio server that
keeps every byte it receives and answers with a canned response), then speaks raw HTTP/1.1 to it, so
that framing tricks reach the front exactly as written. The management routes named are those
vllm-router 0.1.17 answers without any key (measured against the PyPI wheel: docs/serving-groups.md).
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from role_files import load_role_file

KEY = "Zt4pQ9wL2xN7vB1mK8cR5sD3fH6jG0aYeU2iO4kE"
AUTH = b"Authorization: Bearer " + KEY.encode() + b"\r\n"

sys.modules["llm_cluster_api_auth"] = load_role_file("serve", "llm_cluster_api_auth.py")
front = load_role_file("serve", "llm_cluster_api_front.py")

RESPONSE = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n"
            b"connection: keep-alive\r\n\r\n{\"ok\": true}")


class Upstream:
    """A router stand-in: records each connection's bytes, answers RESPONSE (or streams, when told)."""

    def __init__(self, stream=None):
        self.connections = []
        self.stream = stream

    async def handle(self, reader, writer):
        received = bytearray()
        self.connections.append(received)
        while b"\r\n\r\n" not in received:
            chunk = await reader.read(65536)
            if not chunk:
                break
            received += chunk
        # Read what follows for a moment: a pipelined second request would arrive here.
        try:
            while True:
                chunk = await asyncio.wait_for(reader.read(65536), 0.3)
                if not chunk:
                    break
                received += chunk
        except asyncio.TimeoutError:
            pass
        if self.stream:
            await self.stream(writer)
        else:
            writer.write(RESPONSE)
        await writer.drain()
        writer.close()


def run(requests, stream=None, upstream_up=True):
    """Send each raw request on its own connection; return (answers, upstream connections)."""

    async def main():
        upstream = Upstream(stream)
        up_server = await asyncio.start_server(upstream.handle, "127.0.0.1", 0)
        up_port = up_server.sockets[0].getsockname()[1]
        if not upstream_up:
            up_server.close()
            await up_server.wait_closed()
        guard = sys.modules["llm_cluster_api_auth"].ApiKeyGuard(None, api_key=KEY)
        handler = front.Front(guard, "127.0.0.1", up_port)
        server = await asyncio.start_server(handler.handle, "127.0.0.1", 0, limit=front.MAX_HEAD)
        port = server.sockets[0].getsockname()[1]
        answers = []
        for raw in requests:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(raw)
            await writer.drain()
            answers.append(await asyncio.wait_for(reader.read(), 10))
            writer.close()
        server.close()
        if upstream_up:
            up_server.close()
        return answers, upstream.connections

    return asyncio.run(main())


def status(answer):
    return int(answer.split(b" ", 2)[1])


def test_a_request_without_the_key_or_with_a_wrong_one_never_reaches_the_router():
    answers, upstream = run([
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nContent-Length: 2\r\n\r\n{}",
        # Two Authorization headers, one of them right: refused (the guard takes exactly one).
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Authorization: Bearer wrong\r\n\r\n",
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " + KEY.encode() + b"\r\n\r\n",
    ])
    assert [status(a) for a in answers] == [401, 401, 401, 401]
    assert all(b"WWW-Authenticate: Bearer" in a for a in answers)
    assert upstream == []


@pytest.mark.parametrize("path", [
    b"/add_worker?url=http://10.0.0.66:8000", b"/remove_worker?url=http://10.0.0.2:8001", b"/workers",
    b"/list_workers", b"/get_loads", b"/flush_cache", b"/", b"/docs", b"/openapi.json",
    # Engine routes on which the router drops the client's key (docs/serving-groups.md).
    b"/version", b"/tokenize", b"/detokenize", b"/pooling", b"/classify", b"/score",
])
def test_the_router_s_management_routes_are_refused_even_with_the_key(path):
    answers, upstream = run([b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: 0\r\n\r\n"])
    assert status(answers[0]) == 403
    assert upstream == []


@pytest.mark.parametrize("target", [
    b"/v1/../add_worker", b"/v1/./completions", b"/v1/%2e%2e/add_worker", b"/v1%2F..%2Fadd_worker",
    b"//add_worker", b"http://127.0.0.1:30000/add_worker", b"*", b"/v1/completions#x", b"/v1\\..\\workers",
    b"/v1/completions/..",
])
def test_a_target_that_is_not_a_plain_absolute_path_is_refused_before_the_key_is_looked_at(target):
    answers, upstream = run([b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n" + AUTH + b"\r\n"])
    assert status(answers[0]) == 400
    assert upstream == []


@pytest.mark.parametrize("head, code", [
    # Request smuggling: a body framed two ways, or the same framing twice.
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: 2\r\nContent-Length: 40\r\n\r\n", 400),
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: +2\r\n\r\n", 400),
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Transfer-Encoding: gzip, chunked\r\n\r\n", 501),
    # Bare line feeds and folded header lines read differently by lenient parsers.
    (b"POST /v1/completions HTTP/1.1\nHost: x\n" + AUTH + b"\r\n", 400),
    (b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + AUTH + b" Authorization: Bearer wrong\r\n\r\n", 400),
    (b"GET /v1/models HTTP/1.1\r\nHost : x\r\n" + AUTH + b"\r\n", 400),
    (b"GET /v1/models HTTP/2.0\r\nHost: x\r\n" + AUTH + b"\r\n", 400),
    (b"GET  /v1/models HTTP/1.1\r\nHost: x\r\n" + AUTH + b"\r\n", 400),
])
def test_ambiguous_framing_is_refused(head, code):
    answers, upstream = run([head + b"{}"])
    assert status(answers[0]) == code
    assert upstream == []


def test_an_authorized_request_reaches_the_router_once_with_its_body_and_connection_close():
    body = b'{"model": "tiny", "prompt": "Hello", "max_tokens": 4}'
    second = b"POST /add_worker?url=http://10.0.0.66:8000 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    request = (b"POST /v1/completions?x=1 HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Connection: keep-alive\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body) + body + second)
    answers, upstream = run([request])
    assert status(answers[0]) == 200
    assert answers[0].endswith(b'{"ok": true}')
    head = answers[0].split(b"\r\n\r\n")[0].lower()
    assert b"connection: close" in head and b"keep-alive" not in head
    assert len(upstream) == 1
    sent_head, sent_body = bytes(upstream[0]).split(b"\r\n\r\n", 1)
    lines = sent_head.split(b"\r\n")
    assert lines[0] == b"POST /v1/completions?x=1 HTTP/1.1"
    # The key goes on: each engine checks it again.
    assert b"authorization: Bearer " + KEY.encode() in lines
    assert b"Connection: close" in lines and b"connection: keep-alive" not in lines
    assert b"X-Forwarded-For: 127.0.0.1" in lines
    # The pipelined second request (the router's management) never reaches the router.
    assert sent_body == body


def test_a_chunked_body_is_passed_as_sent_and_nothing_after_it():
    chunks = b"5\r\nHello\r\n3;ext=1\r\n, w\r\n0\r\nX-Trailer: 1\r\n\r\n"
    request = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Transfer-Encoding: chunked\r\n\r\n"
               + chunks + b"GET /workers HTTP/1.1\r\n\r\n")
    answers, upstream = run([request])
    assert status(answers[0]) == 200
    assert bytes(upstream[0]).split(b"\r\n\r\n", 1)[1] == chunks


@pytest.mark.parametrize("chunks", [b"zz\r\nHello\r\n0\r\n\r\n", b"5\r\nHelloXX0\r\n\r\n", b"\r\n"])
def test_a_malformed_chunked_body_is_answered_400(chunks):
    request = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Transfer-Encoding: chunked\r\n\r\n"
               + chunks)
    answers = run([request])[0]
    assert status(answers[0]) == 400


def test_the_open_routes_pass_without_the_key_and_only_as_get():
    answers, upstream = run([b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n",
                             b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
                             b"GET /health/ HTTP/1.1\r\nHost: x\r\n\r\n"])
    assert [status(a) for a in answers] == [200, 200, 401, 401]
    assert len(upstream) == 2


def test_a_router_that_is_down_is_answered_502():
    answers = run([b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + AUTH + b"\r\n"], upstream_up=False)[0]
    assert status(answers[0]) == 502


def test_a_head_above_the_limit_is_answered_431():
    answers, upstream = run([b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (front.MAX_HEAD + 10) + b"\r\n\r\n"])
    assert status(answers[0]) == 431
    assert upstream == []


def test_a_streamed_answer_arrives_as_it_is_written():
    """Server-sent events: the first event reaches the client while the router still holds the second."""
    release = {}

    async def stream(writer):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: one\n\n")
        await writer.drain()
        await release["event"].wait()
        writer.write(b"data: two\n\n")

    async def main():
        release["event"] = asyncio.Event()
        upstream = Upstream(stream)
        up_server = await asyncio.start_server(upstream.handle, "127.0.0.1", 0)
        guard = sys.modules["llm_cluster_api_auth"].ApiKeyGuard(None, api_key=KEY)
        handler = front.Front(guard, "127.0.0.1", up_server.sockets[0].getsockname()[1])
        server = await asyncio.start_server(handler.handle, "127.0.0.1", 0, limit=front.MAX_HEAD)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: 2\r\n\r\n{}")
        await writer.drain()
        first = b""
        while b"data: one" not in first:
            first += await asyncio.wait_for(reader.read(4096), 10)
        release["event"].set()
        rest = await asyncio.wait_for(reader.read(), 10)
        server.close()
        up_server.close()
        return first, rest

    first, rest = asyncio.run(main())
    assert b"data: two" not in first
    assert rest == b"data: two\n\n"


def test_the_front_refuses_to_start_without_a_key(tmp_path, monkeypatch):
    empty = tmp_path / "key"
    empty.write_text("")
    monkeypatch.setenv("LLM_CLUSTER_API_KEY_FILE", str(empty))
    assert front.main(["--listen", "127.0.0.1", "--port", "0", "--upstream-port", "1"]) == 1


def test_the_key_is_read_from_standard_input_and_an_empty_one_refused():
    import io
    assert front.read_key(io.StringIO(KEY + "\n")) == KEY
    with pytest.raises(RuntimeError, match="the key on standard input is empty"):
        front.read_key(io.StringIO("\n"))
