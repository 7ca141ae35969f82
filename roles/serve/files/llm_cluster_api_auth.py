# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Default-deny API key guard for the inference engine's HTTP server.

Installed by the aihost.llm_cluster serve role and loaded by vLLM with
``--middleware llm_cluster_api_auth.ApiKeyGuard``. vLLM's own key check guards
only a few path prefixes (/v1, /v2, /inference, /cohere); this guard refuses
every request without the key except the few read-only routes in OPEN_ROUTES,
so that a route added by a later engine release needs the key too.

Pure ASGI, standard library only: it reads the key when the application is
built, from the file LLM_CLUSTER_API_KEY_FILE names (the container runtime: a
0600 file mounted read-only, so the key is not in the container's environment
that ``docker inspect`` shows) or else from VLLM_API_KEY (an empty or missing
key, or an unreadable file, stops the server from starting),
accepts exactly one ``Authorization: Bearer <key>`` header (scheme in any case,
one space, the key byte for byte), compares digests in constant time, and
answers 401 before the request's body is read.
"""

import hashlib
import hmac
import json
import os

KEY_ENV = "VLLM_API_KEY"
KEY_FILE_ENV = "LLM_CLUSTER_API_KEY_FILE"

# (method, path) pairs served without the key: health checks and Prometheus
# metrics. Exact matches only ("/health/" or "/metrics/x" need the key).
# /version needs the key: the exact engine release helps an attacker pick an
# exploit, and nothing outside the cluster needs it without the key.
OPEN_ROUTES = frozenset({
    ("GET", "/health"),
    ("GET", "/ping"),
    ("GET", "/metrics"),
})

_BODY = json.dumps({"error": {"message": "Unauthorized: send the API key as 'Authorization: Bearer <key>'",
                              "type": "authentication_error", "code": 401}}).encode("ascii")
_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(_BODY)).encode("ascii")),
    (b"www-authenticate", b"Bearer"),
]


def _digest(value):
    return hashlib.sha256(value).digest()


def route_path(scope):
    """The path the application routes on: the request path without the root path (as Starlette does)."""
    path = scope.get("path") or ""
    root = scope.get("root_path") or ""
    if root and path.startswith(root):
        if path == root:
            return ""
        if path[len(root)] == "/":
            return path[len(root):]
    return path


def bearer_token(headers):
    """The token of the request's one ``Authorization: Bearer`` header (bytes), or None.

    None when the header is missing, repeated, not the Bearer scheme, or has
    no token. The token is taken as sent: no spaces are stripped.
    """
    values = [value for name, value in headers if name.lower() == b"authorization"]
    if len(values) != 1:
        return None
    scheme, sep, token = values[0].partition(b" ")
    if not sep or scheme.lower() != b"bearer" or not token:
        return None
    return token


class ApiKeyGuard:
    """ASGI middleware: 401 for every request without the key, except OPEN_ROUTES."""

    def __init__(self, app, api_key=None):
        source = KEY_ENV
        if api_key is not None:
            key = api_key
        elif os.environ.get(KEY_FILE_ENV):
            source = os.environ[KEY_FILE_ENV]
            try:
                with open(source, encoding="utf-8") as handle:
                    key = handle.read().rstrip("\n")
            except OSError as exc:
                raise RuntimeError("llm_cluster_api_auth: cannot read the key file %s (%s); the engine refuses to "
                                   "serve without an API key" % (source, exc.strerror)) from exc
        else:
            key = os.environ.get(KEY_ENV, "")
        if not key:
            raise RuntimeError("llm_cluster_api_auth: %s is empty; the engine refuses to serve without an API key"
                               % source)
        self.app = app
        self._key_digest = _digest(key.encode("utf-8"))

    def authorized(self, headers):
        token = bearer_token(headers)
        # Compare digests, so that neither content nor length shows in the timing.
        offered = _digest(token if token is not None else b"")
        return hmac.compare_digest(offered, self._key_digest) and token is not None

    async def __call__(self, scope, receive, send):
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            # lifespan: startup and shutdown of the server itself.
            await self.app(scope, receive, send)
            return
        if kind == "http" and (scope.get("method"), route_path(scope)) in OPEN_ROUTES:
            await self.app(scope, receive, send)
            return
        if self.authorized(scope.get("headers") or ()):
            await self.app(scope, receive, send)
            return
        if kind == "http":
            await send({"type": "http.response.start", "status": 401, "headers": _HEADERS})
            await send({"type": "http.response.body", "body": _BODY})
        elif "websocket.http.response" in (scope.get("extensions") or {}):
            await send({"type": "websocket.http.response.start", "status": 401, "headers": _HEADERS})
            await send({"type": "websocket.http.response.body", "body": _BODY})
        else:
            # Closing before the handshake is accepted: the server answers 403.
            await send({"type": "websocket.close", "code": 1008})
