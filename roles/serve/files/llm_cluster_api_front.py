# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The key-checking front of vLLM's router (the replicas topology).

vllm-router (0.1.x) has no client authentication: it forwards the client's
``Authorization`` header to the engines, and its management routes
(``/add_worker``, ``/remove_worker``, ``/workers``, ``/list_workers``,
``/get_loads``, ``/flush_cache``) answer anyone who reaches its port. The
serve role therefore binds the router to loopback and puts this front on the
API port: it answers 401 to a request without the key (except the engine's
open routes, GET /health, /ping and /metrics), 403 to any path outside the
inference routes even with the key (so the router's management stays on the
host), and passes the rest to the router unchanged, the key included (each
engine checks it again).

Standard library only (asyncio), one request per client connection: the
request's head is parsed and checked, its body is framed by Content-Length or
chunked encoding exactly (a request that could be framed two ways is refused),
the router is told ``Connection: close``, and the answer is streamed back
(server-sent events pass as they come). Nothing a client sends after its one
request reaches the router.

Run by the llm-cluster-api-front unit:
    python3 llm_cluster_api_front.py --listen ADDR --port N --upstream-port M --key-stdin [--tls-cert F --tls-key F]
With --key-stdin the key is read from standard input, which systemd opens on
the 0600 root key file (StandardInput=file:), so the front's account never
opens the file and the key is in neither its environment nor its command
line; without it, the guard module llm_cluster_api_auth beside this file reads
LLM_CLUSTER_API_KEY_FILE or VLLM_API_KEY.
"""

import argparse
import asyncio
import json
import re
import signal
import ssl
import sys

import llm_cluster_api_auth

# Routes that need the key and reach the router: the OpenAI API and rerank.
# Everything else is refused: the router's management, and the engine routes
# on which vllm-router 0.1.17 drops the client's key (/version, /tokenize,
# /detokenize, /pooling, /classify, /score answered 401 by the engine behind it,
# with the key sent; docs/serving-groups.md).
INFERENCE_PREFIXES = ("/v1/",)
INFERENCE_ROUTES = frozenset({"/rerank"})
MAX_HEAD = 64 * 1024
HEAD_TIMEOUT = 30.0
# Hop-by-hop headers (RFC 9110 section 7.6.1) and what this front sets itself.
_DROPPED = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"upgrade", b"trailer",
                      b"proxy-authorization", b"proxy-authenticate", b"x-forwarded-for"})
_TOKEN = re.compile(rb"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_CHUNK_SIZE = re.compile(rb"^[0-9A-Fa-f]{1,16}$")
_TARGET = re.compile(rb"^/[A-Za-z0-9._~!$&'()*+,;=:@/-]*(\?[A-Za-z0-9._~!$&'()*+,;=:@/?%-]*)?$")


class Refused(Exception):
    """A request answered by the front itself, with its status and reason."""

    def __init__(self, status, reason, message):
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


def route_allowed(path):
    """True when a checked path is an inference route the router may serve."""
    return path.startswith(INFERENCE_PREFIXES) or path in INFERENCE_ROUTES


def parse_head(head):
    """(method, target, path, headers) of one HTTP/1.x request head, or Refused.

    headers: (lower-case name, value) pairs, as ASGI gives them. Refused for
    anything a lenient parser and a strict one could read differently: bare
    line feeds, folded or malformed header lines, a target that is not a plain
    absolute path (no percent-encoding, dot segments, double slashes or
    absolute-form URL), and a body framed both ways or twice.
    """
    if b"\n" in head.replace(b"\r\n", b""):
        raise Refused(400, "Bad Request", "bare line feed in the request head")
    lines = head[:-4].split(b"\r\n") if head.endswith(b"\r\n\r\n") else head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not _TOKEN.match(parts[0]) or parts[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise Refused(400, "Bad Request", "malformed request line")
    method, target = parts[0], parts[1]
    path = target.split(b"?", 1)[0]
    if (not _TARGET.match(target) or b"//" in path or b"/./" in path + b"/" or b"/../" in path + b"/"):
        raise Refused(400, "Bad Request", "the request target must be a plain absolute path")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.match(name):
            raise Refused(400, "Bad Request", "malformed header line")
        headers.append((name.lower(), value.strip(b" \t")))
    lengths = [value for name, value in headers if name == b"content-length"]
    codings = [value for name, value in headers if name == b"transfer-encoding"]
    if lengths and codings:
        raise Refused(400, "Bad Request", "both Content-Length and Transfer-Encoding")
    if len(lengths) > 1 or len(codings) > 1:
        raise Refused(400, "Bad Request", "the body's framing header is repeated")
    if lengths and not lengths[0].isdigit():
        raise Refused(400, "Bad Request", "Content-Length is not a number")
    if codings and codings[0].lower() != b"chunked":
        raise Refused(501, "Not Implemented", "only the chunked transfer coding is accepted")
    return method.decode("ascii"), target, path.decode("ascii"), headers


def decide(method, path, headers, guard):
    """None when the request may go to the router, else Refused (401 or 403)."""
    if (method, path) in llm_cluster_api_auth.OPEN_ROUTES:
        return None
    if not guard.authorized(headers):
        return Refused(401, "Unauthorized", "Unauthorized: send the API key as 'Authorization: Bearer <key>'")
    if not route_allowed(path):
        return Refused(403, "Forbidden", "%s is not served through the API port" % path)
    return None


def upstream_head(method, target, headers, peer):
    """The request head sent to the router: hop-by-hop headers out, Connection: close in."""
    lines = [b"%s %s HTTP/1.1" % (method.encode("ascii"), target)]
    lines += [b"%s: %s" % (name, value) for name, value in headers if name not in _DROPPED]
    lines.append(b"X-Forwarded-For: %s" % peer.encode("ascii"))
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


def answer(status, reason, message):
    body = json.dumps({"error": {"message": message, "type": "llm_cluster_front", "code": status}}).encode("utf-8")
    head = ["HTTP/1.1 %d %s" % (status, reason), "Content-Type: application/json",
            "Content-Length: %d" % len(body), "Connection: close"]
    if status == 401:
        head.append("WWW-Authenticate: Bearer")
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


async def copy_exact(reader, writer, count):
    while count:
        chunk = await reader.read(min(count, 65536))
        if not chunk:
            raise Refused(400, "Bad Request", "the body ended before its Content-Length")
        writer.write(chunk)
        await writer.drain()
        count -= len(chunk)


async def copy_chunked(reader, writer):
    """Copy a chunked body as sent, chunk by chunk, up to its last chunk and trailers."""
    while True:
        line = await reader.readuntil(b"\r\n")
        size_text = line[:-2].split(b";", 1)[0].strip()
        if not size_text or not _CHUNK_SIZE.match(size_text):
            raise Refused(400, "Bad Request", "malformed chunk size")
        writer.write(line)
        size = int(size_text, 16)
        if size == 0:
            while True:
                trailer = await reader.readuntil(b"\r\n")
                writer.write(trailer)
                if trailer == b"\r\n":
                    await writer.drain()
                    return
        await copy_exact(reader, writer, size)
        if await reader.readexactly(2) != b"\r\n":
            raise Refused(400, "Bad Request", "a chunk does not end with CRLF")
        writer.write(b"\r\n")


async def relay_response(reader, writer):
    """The router's answer with Connection: close, then its body as it comes."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    kept = [lines[0]] + [line for line in lines[1:]
                         if line.split(b":", 1)[0].strip().lower() not in (b"connection", b"keep-alive")]
    writer.write(b"\r\n".join(kept + [b"Connection: close"]) + b"\r\n\r\n")
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        writer.write(chunk)
        await writer.drain()


class Front:
    def __init__(self, guard, upstream_host, upstream_port):
        self.guard = guard
        self.upstream = (upstream_host, upstream_port)

    async def handle(self, reader, writer):
        upstream_writer = None
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
            except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
                return
            except asyncio.LimitOverrunError:
                writer.write(answer(431, "Request Header Fields Too Large", "the request head is too large"))
                return
            try:
                method, target, path, headers = parse_head(head)
                refused = decide(method, path, headers, self.guard)
                if refused:
                    raise refused
            except Refused as exc:
                writer.write(answer(exc.status, exc.reason, exc.message))
                return
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream, limit=MAX_HEAD)
            except OSError:
                writer.write(answer(502, "Bad Gateway", "the router is not answering"))
                return
            peer = (writer.get_extra_info("peername") or ("unknown",))[0]
            upstream_writer.write(upstream_head(method, target, headers, str(peer)))
            lengths = [value for name, value in headers if name == b"content-length"]
            try:
                if lengths:
                    await copy_exact(reader, upstream_writer, int(lengths[0]))
                elif any(name == b"transfer-encoding" for name, dummy in headers):
                    await copy_chunked(reader, upstream_writer)
                await upstream_writer.drain()
            except Refused as exc:
                writer.write(answer(exc.status, exc.reason, exc.message))
                return
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                writer.write(answer(400, "Bad Request", "the request body is cut or malformed"))
                return
            try:
                await relay_response(upstream_reader, writer)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                return
        except OSError:
            return
        finally:
            for stream in (upstream_writer, writer):
                if stream is not None:
                    try:
                        stream.close()
                    except (ConnectionError, RuntimeError):
                        pass


def tls_context(cert, key):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


def read_key(stream):
    """The key on ``stream`` without its line end; RuntimeError when it is empty."""
    key = stream.read().rstrip("\n")
    if not key:
        raise RuntimeError("llm_cluster_api_front: the key on standard input is empty; the front refuses to serve "
                           "without an API key")
    return key


async def serve(args, key=None):
    guard = llm_cluster_api_auth.ApiKeyGuard(None, api_key=key)
    front = Front(guard, args.upstream_host, args.upstream_port)
    context = tls_context(args.tls_cert, args.tls_key) if args.tls_cert else None
    server = await asyncio.start_server(front.handle, args.listen, args.port, limit=MAX_HEAD, ssl=context,
                                        reuse_address=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sys.stderr.write("llm_cluster_api_front: serving %s:%d for the router at %s:%d\n"
                     % (args.listen, args.port, args.upstream_host, args.upstream_port))
    async with server:
        await stop.wait()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream-host", default="127.0.0.1")
    parser.add_argument("--upstream-port", type=int, required=True)
    parser.add_argument("--key-stdin", action="store_true", help="read the API key from standard input")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    args = parser.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    try:
        asyncio.run(serve(args, read_key(sys.stdin) if args.key_stdin else None))
    except RuntimeError as exc:
        sys.stderr.write("%s\n" % exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
