#!/usr/bin/python
# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: serve_probe
short_description: Prove that an OpenAI-compatible endpoint (vLLM) is ready by running an inference through it
version_added: 0.2.0
description:
  - Ready means that the endpoint answers an inference, not only that its port is open or that C(/health) says so.
    From the managed node, against the engine's address, the probe
  - 1) polls C(GET /health) until it answers 200 (a refused, reset or timed-out connection and any other status
    mean "not yet"), for at most O(wait_timeout) seconds; with O(unit) or O(container) it also reads the engine's
    state at every poll and fails at once when the engine's process has exited, instead of waiting out the rest
    of O(wait_timeout) while the engine starts and dies again;
  - 2) reads C(GET /v1/models) with the key, which must answer 200 and list O(model) (the failure lists the ids
    it does list);
  - 3) reads C(GET /version) for RV(version) (errors are ignored);
  - 4) sends one C(POST /v1/completions) with O(prompt), O(max_tokens), C(temperature=0) and C(ignore_eos=true),
    which must answer 200 with at least one completion token;
  - 5) with O(chat), sends the same as one C(POST /v1/chat/completions) with a single user message;
  - 6) with O(dp_ranks) of 2 or more, sends the completion again to each data-parallel rank by vLLM's
    C(X-data-parallel-rank) header; a plain completion goes to whichever rank the API server picks, so a rank that
    hangs or died after the API server came up passes steps 1 to 5 and fails here, named by its number. The ranks
    are asked at once (up to 32 at a time), so hung ranks cost one O(request_timeout) together, not one each;
  - 7) with O(api_key) and O(check_auth), proves that every route needs the key. First C(GET) of a path no engine
    serves, without the key, must answer 401 (a default-deny key guard is in front of every route; otherwise the
    step fails before any other route is sent a request without the key). Then every operation that
    C(GET /openapi.json) (read with the key) lists, with path parameters filled in, is sent once without the key
    and once with a wrong key, with its own method and an empty body; each must answer 401. Only C(GET /health),
    C(GET /ping) and C(GET /metrics) may answer without the key; they are sent once without it and listed in
    RV(routes_open) when they answer.
  - Any failing step fails the task with a message that names the URL, the step, the HTTP status and the first
    300 characters of the answer (or the connection error), and returns what was measured before it. The key is
    never shown.
  - Requests go straight to the engine; proxy settings of the environment are not used.
  - Changes nothing; check mode runs the same probe.
options:
  url:
    description:
      - Base URL of the endpoint, for example C(http://10.0.0.1:8000).
      - A trailing C(/v1) (the OpenAI client's base URL) is accepted and removed.
    type: str
    required: true
  ca_path:
    description:
      - PEM file of the CA (or the certificates) that an C(https) O(url)'s certificate must chain to, for example the
        CA the serve role made (C(serve_tls)). Without it the system's trust store is used.
      - The certificate must name the host of O(url) (its address or DNS name); a certificate that does not, or that
        no trusted CA signed, fails the C(health) step with the reason.
    type: path
  api_key:
    description: 'Key of the endpoint (vLLM C(--api-key)), sent as C(Authorization: Bearer <key>); none sends no key.'
    type: str
  model:
    description: Served model name that C(/v1/models) must list and the completions are sent to.
    type: str
    required: true
  prompt:
    description: Prompt of the completion (and the user message of the chat completion).
    type: str
    default: Hello
  max_tokens:
    description: Tokens to generate per request (EOS is ignored, so the engine generates them all).
    type: int
    default: 8
  chat:
    description: Also send one C(/v1/chat/completions) request (needs a chat template in the model).
    type: bool
    default: false
  dp_ranks:
    description:
      - Data-parallel ranks behind the endpoint (vLLM C(--data-parallel-size)); with 2 or more, every rank must answer a
        completion of its own (step 6). 0 or 1 sends only the plain completion.
      - An engine that does not read the header answers each of these from any rank; the step then proves nothing
        more than step 4 and costs O(dp_ranks) completions.
    type: int
    default: 0
  check_auth:
    description:
      - When O(api_key) is set, walk every route of C(/openapi.json) without the key and with a wrong key and fail
        when one that must be protected answers anything but 401 (step 7 above), so that an endpoint that serves
        without the key is caught.
      - Ignored without O(api_key).
    type: bool
    default: true
  wait_timeout:
    description: Seconds to keep polling C(/health) until it answers 200; 0 tries once.
    type: int
    default: 0
  unit:
    description:
      - The systemd unit that runs the engine on this host, for example C(llm-cluster-engine.service).
      - While the probe waits for C(/health), it reads the unit's state at every poll (C(systemctl show)). The engine
        has exited when the unit is C(failed) or C(inactive), waits for its automatic restart (C(auto-restart)), or
        has a different main PID or more restarts than at the first poll. The step then fails at once with that
        state (exit code or signal, restarts) in its message.
      - A unit that systemd does not know fails the step at once too.
    type: str
  container:
    description:
      - The Docker container that runs the engine on this host, watched like O(unit) (C(docker inspect)). It has
        exited when it is not C(running), or when its restart count or process id changed since the first poll.
    type: str
  interval:
    description: Seconds between polls of C(/health).
    type: float
    default: 2.0
  request_timeout:
    description:
      - Seconds each request to C(/v1/models) and each completion may take. The first completion after the
        engine started can take several seconds.
      - Each poll of C(/health) and the read of C(/version) take at most 10 seconds.
    type: int
    default: 120
attributes:
  check_mode:
    description: Can run in check mode and return the same result; the probe changes nothing.
    support: full
  platform:
    description: Any host that reaches the endpoint.
extends_documentation_fragment:
  - aihost.llm_cluster.attributes
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Wait up to 15 minutes for the engine, then prove it answers a completion and a chat completion
  aihost.llm_cluster.serve_probe:
    url: http://192.168.10.11:8000
    api_key: "{{ llm_cluster_api_key }}"
    model: DeepSeek-R1
    chat: true
    wait_timeout: 900
    interval: 5
  register: serve_probe

- name: Wait for the engine of a systemd unit; stop as soon as it exits instead of after 15 minutes
  aihost.llm_cluster.serve_probe:
    url: http://192.168.10.11:8000
    api_key: "{{ llm_cluster_api_key }}"
    model: DeepSeek-R1
    wait_timeout: 900
    unit: llm-cluster-engine.service

- name: Show the first request's latency
  ansible.builtin.debug:
    msg: "{{ serve_probe.completion.completion_tokens }} tokens in {{ serve_probe.completion.seconds }}s"
"""

RETURN = r"""
ready:
  description: Whether every step passed (false only in a failure's output).
  returned: always
  type: bool
  sample: true
health_seconds:
  description: Seconds waited until C(/health) answered 200; null when it did not.
  returned: always
  type: float
  sample: 12.4
models:
  description: Ids that C(/v1/models) lists (served model names), empty before that step.
  returned: always
  type: list
  elements: str
  sample: ["DeepSeek-R1"]
version:
  description: Version that C(/version) reports, or null when it reports none.
  returned: always
  type: str
  sample: 0.11.0
completion:
  description:
    - The C(/v1/completions) request, with its HTTP status, the token counts of its C(usage), the finish reason of
      its first choice and its wall time in seconds.
    - Null before that step; status is null when no HTTP answer came.
  returned: always
  type: dict
  sample: {"status": 200, "prompt_tokens": 2, "completion_tokens": 8, "finish_reason": "length", "seconds": 0.41}
chat:
  description: The C(/v1/chat/completions) request, as RV(completion); null without O(chat) or before that step.
  returned: always
  type: dict
  sample: {"status": 200, "prompt_tokens": 9, "completion_tokens": 8, "finish_reason": "length", "seconds": 0.38}
ranks:
  description:
    - One completion per data-parallel rank (step 6), as RV(completion) with its C(rank); empty with O(dp_ranks)
      below 2 or before that step. Every rank is asked at once and listed, in rank order; a failed one has the
      C(status) it got, or null when nothing answered.
  returned: always
  type: list
  elements: dict
  sample: [{"rank": 0, "status": 200, "prompt_tokens": 2, "completion_tokens": 8, "finish_reason": "length", "seconds": 0.4}]
auth_enforced:
  description:
    - Whether every route that must be protected refused a missing and a wrong key with 401 (true), or one did not
      (false, which fails the task).
    - Null when not checked (no O(api_key), O(check_auth=false), or a failure before that step).
  returned: always
  type: bool
  sample: true
routes_checked:
  description: The operations checked by the auth step, as C(METHOD /path) with the OpenAPI path template; empty before it.
  returned: always
  type: list
  elements: str
  sample: ["GET /health", "POST /tokenize", "GET /v1/models", "GET /v1/responses/{response_id}"]
routes_open:
  description: The allowed routes that answered without the key (with their status), for example C(GET /health 200).
  returned: always
  type: list
  elements: str
  sample: ["GET /health 200", "GET /metrics 200", "GET /ping 200"]
auth_findings:
  description: Each request to a protected route that did not answer 401, with what it answered; empty when none.
  returned: always
  type: list
  elements: str
  sample: ["POST /tokenize without the key answered HTTP 422"]
engine:
  description:
    - The last state read of the engine's unit or container while waiting (with O(unit) or O(container)), for
      example C(ActiveState), C(SubState), C(MainPID), C(NRestarts), C(ExecMainCode), C(ExecMainStatus) of a unit.
    - Null without O(unit) and O(container).
  returned: always
  type: dict
  sample: {"ActiveState": "activating", "SubState": "auto-restart", "MainPID": "0", "NRestarts": "1", "Result": "exit-code",
           "ExecMainCode": "1", "ExecMainStatus": "1"}
failed_step:
  description: The step that failed, one of C(health), C(models), C(completion), C(chat), C(rank), C(auth).
  returned: failure
  type: str
  sample: completion
"""

import concurrent.futures
import http.client
import json
import os
import socket
import ssl
import time
import urllib.error
from secrets import token_hex
from urllib.parse import urlsplit

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import ConnectionError as UrlsConnectionError
from ansible.module_utils.urls import open_url
from ansible_collections.aihost.llm_cluster.plugins.module_utils._api_routes import (
    CANARY_PATH,
    OPEN_ROUTES,
    RoutesError,
    is_open,
    operations,
)

# Timeout of each /health poll and of the /version read.
QUICK_TIMEOUT = 10
# Characters of an answer's body quoted in a failure message.
BODY_CHARS = 300
MASK = "********"
USER_AGENT = "aihost.llm_cluster-serve_probe"
# Ranks asked at the same time (step 6); a larger data-parallel size is asked in waves of this many.
RANK_WORKERS = 32


class NoAnswer(Exception):
    """The request got no HTTP answer (refused, reset, timed out, TLS error)."""


class TlsFailed(NoAnswer):
    """The TLS handshake failed: the certificate is not trusted or does not name the host, or the port speaks plain
    HTTP. Waiting does not mend it."""


def tls_error(exc):
    """The ssl error behind a connection error, or None."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, ssl.SSLError) or exc.__class__.__name__ == "SSLValidationError":
            return exc
        exc = getattr(exc, "reason", None) if isinstance(exc, urllib.error.URLError) else exc.__cause__ or exc.__context__
        seen += 1
    return None


class ProbeFailed(Exception):
    """A step failed; args are (step, detail)."""

    def __init__(self, step, detail):
        super().__init__(step, detail)
        self.step = step
        self.detail = detail


def base_url(url):
    """The URL without trailing slashes and without a trailing /v1."""
    url = url.strip().rstrip("/")
    if url.endswith("/v1"):
        url = url[:-3].rstrip("/")
    return url


def describe_error(exc):
    """A short text for a connection error."""
    reason = getattr(exc, "reason", None)
    if isinstance(exc, urllib.error.URLError) and reason is not None:
        exc = reason
    if isinstance(exc, BaseException):
        text = str(exc) or exc.__class__.__name__
    else:
        text = str(reason)
    if isinstance(exc, (socket.timeout, TimeoutError)) and "timed out" not in text:
        text = "timed out (%s)" % text
    return text


# What systemctl show reads of the engine's unit; ExecMainCode is the CLD_* code (1 exited, 2 killed, 3 dumped).
UNIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "MainPID", "NRestarts", "Result", "ExecMainCode", "ExecMainStatus")
CONTAINER_FORMAT = '{"Status": {{json .State.Status}}, "Pid": {{json .State.Pid}}, "ExitCode": {{json .State.ExitCode}}, ' \
                   '"RestartCount": {{json .RestartCount}}, "Error": {{json .State.Error}}}'


class EngineWatch:
    """Reads the engine's unit or container; ``exited()`` names how the engine's process ended, or None."""

    def __init__(self, run_command, unit=None, container=None):
        self.run_command = run_command
        self.unit = unit
        self.container = container
        self.first = None
        self.state = None

    def read(self):
        if self.unit:
            rc, out, err = self.run_command(["systemctl", "show", self.unit, "--property=" + ",".join(UNIT_PROPERTIES)])
            if rc != 0:
                raise ProbeFailed("health", "cannot read the engine's unit %s: systemctl show exited %d: %s" % (
                    self.unit, rc, (err or out).strip()[:BODY_CHARS]))
            state = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        else:
            rc, out, err = self.run_command(["docker", "inspect", "--format", CONTAINER_FORMAT, self.container])
            if rc != 0:
                raise ProbeFailed("health", "the engine's container %s does not exist or cannot be read: %s" % (
                    self.container, (err or out).strip()[:BODY_CHARS]))
            try:
                state = json.loads(out)
            except ValueError:
                raise ProbeFailed("health", "docker inspect %s answered %s" % (self.container, out.strip()[:BODY_CHARS])) from None
        self.state = state
        if self.first is None:
            self.first = dict(state)
        return state

    def exited(self):
        """How the engine's process ended since the first read (a sentence), or None while it runs or starts."""
        state, first = self.read(), self.first
        if self.unit:
            if state.get("LoadState") == "not-found":
                return "systemd has no unit %s" % self.unit
            # ExecMainCode is 0 while the main process runs (or never ran), 1 after an exit, 2 or 3 after a signal.
            how = ""
            if state.get("ExecMainCode") == "1":
                how = ", exit status %s" % state.get("ExecMainStatus")
            elif state.get("ExecMainCode") in ("2", "3"):
                how = ", killed by signal %s" % state.get("ExecMainStatus")
            facts = "ActiveState=%s SubState=%s Result=%s NRestarts=%s%s" % (
                state.get("ActiveState"), state.get("SubState"), state.get("Result"), state.get("NRestarts"), how)
            if state.get("ActiveState") in ("failed", "inactive", "deactivating"):
                return "the engine's unit %s stopped (%s)" % (self.unit, facts)
            if state.get("SubState") == "auto-restart":
                return "the engine's unit %s exited and waits to be restarted (%s)" % (self.unit, facts)
            if state.get("NRestarts") != first.get("NRestarts"):
                return "the engine's unit %s was restarted since the probe began (NRestarts %s, now %s; %s)" % (
                    self.unit, first.get("NRestarts"), state.get("NRestarts"), facts)
            if first.get("MainPID") not in (None, "0") and state.get("MainPID") != first.get("MainPID"):
                return "the engine's unit %s has a new main process since the probe began (PID %s, now %s; %s)" % (
                    self.unit, first.get("MainPID"), state.get("MainPID"), facts)
            return None
        error = ", error: %s" % state["Error"] if state.get("Error") else ""
        facts = "status %s, exit code %s, restarts %s%s" % (state.get("Status"), state.get("ExitCode"), state.get("RestartCount"), error)
        if state.get("Status") != "running":
            return "the engine's container %s is not running (%s)" % (self.container, facts)
        if state.get("RestartCount") != first.get("RestartCount") or state.get("Pid") != first.get("Pid"):
            return "the engine's container %s was restarted since the probe began (restarts %s, now %s; %s)" % (
                self.container, first.get("RestartCount"), state.get("RestartCount"), facts)
        return None


class Probe:
    def __init__(self, url, api_key, secrets=(), watch=None, ca_path=None):
        self.url = url
        self.ca_path = ca_path
        self.api_key = api_key
        self.secrets = [s for s in secrets if s]
        self.watch = watch

    def scrub(self, text):
        """``text`` with every secret masked."""
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text

    def snippet(self, body):
        body = self.scrub(body.strip())
        return body[:BODY_CHARS] if body else "(empty body)"

    def request(self, method, path, timeout, payload=None, with_key=True, key=None, extra_headers=None):
        """Return (status, body text, seconds); raise NoAnswer when no HTTP answer came.

        ``key`` replaces the probe's key (the auth step's wrong key). A method
        other than GET without ``payload`` sends an empty body.
        """
        headers = dict(extra_headers or {}, Accept="application/json")
        data = None
        if payload is not None:
            data = json.dumps(payload).encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif method != "GET":
            data = b""
        key = key or (self.api_key if with_key else None)
        if key:
            headers["Authorization"] = "Bearer %s" % key
        started = time.time()
        try:
            response = open_url(self.url + path, data=data, headers=headers, method=method, timeout=timeout,
                                use_proxy=False, http_agent=USER_AGENT, use_netrc=False, ca_path=self.ca_path)
            status = response.getcode()
            raw = response.read()
        except urllib.error.HTTPError as exc:
            status = exc.code
            try:
                raw = exc.read() or b""
            except (OSError, http.client.HTTPException, AttributeError):
                raw = b""
        except (urllib.error.URLError, OSError, http.client.HTTPException, UrlsConnectionError, ValueError) as exc:
            if tls_error(exc) is not None:
                raise TlsFailed(self.scrub(describe_error(exc))) from exc
            raise NoAnswer(self.scrub(describe_error(exc))) from exc
        seconds = round(time.time() - started, 3)
        return status, raw.decode("utf-8", "replace"), seconds

    def answer(self, method, path, status, body):
        return "%s %s answered HTTP %d: %s" % (method, path, status, self.snippet(body))

    def wait_healthy(self, wait_timeout, interval):
        """Poll /health until it answers 200; return the seconds waited."""
        started = time.time()
        deadline = started + max(wait_timeout, 0)
        polls = 0
        while True:
            polls += 1
            timeout = QUICK_TIMEOUT
            if wait_timeout > 0:
                timeout = max(1.0, min(QUICK_TIMEOUT, deadline - time.time()))
            try:
                status, body, dummy = self.request("GET", "/health", timeout)
                if status == 200:
                    if self.watch is not None:
                        self.watch.read()
                    return round(time.time() - started, 2)
                last = self.answer("GET", "/health", status, body)
            except TlsFailed as exc:
                raise ProbeFailed("health", "the TLS handshake failed (%s): give ca_path the CA that signed the endpoint's "
                                            "certificate, and a certificate that names %s; an endpoint that serves plain "
                                            "HTTP needs an http:// URL" % (exc, urlsplit(self.url).hostname)) from exc
            except NoAnswer as exc:
                last = "GET /health got no answer: %s" % exc
            if self.watch is not None:
                ended = self.watch.exited()
                if ended:
                    raise ProbeFailed("health", "%s after %.0fs of waiting, so the probe stops before its %ds; last: %s" % (
                        ended, time.time() - started, wait_timeout, last))
            now = time.time()
            if now >= deadline:
                if wait_timeout > 0:
                    raise ProbeFailed("health", "not healthy after %ds (%d polls); last: %s" % (wait_timeout, polls, last))
                raise ProbeFailed("health", last)
            time.sleep(max(0.0, min(interval, deadline - now)))

    def list_models(self, timeout):
        try:
            status, body, dummy = self.request("GET", "/v1/models", timeout)
        except NoAnswer as exc:
            raise ProbeFailed("models", "GET /v1/models got no answer: %s" % exc) from exc
        if status != 200:
            raise ProbeFailed("models", self.answer("GET", "/v1/models", status, body))
        try:
            ids = [str(entry["id"]) for entry in json.loads(body)["data"]]
        except (ValueError, KeyError, TypeError):
            raise ProbeFailed("models", "GET /v1/models answered HTTP 200 but not with a model list: %s" % self.snippet(body)) from None
        return ids

    def read_version(self):
        try:
            status, body, dummy = self.request("GET", "/version", QUICK_TIMEOUT)
            if status == 200:
                version = json.loads(body).get("version")
                return None if version is None else str(version)
        except (NoAnswer, ValueError, AttributeError):
            pass
        return None

    def generate(self, step, path, payload, timeout, record, rank=None):
        """Send one completion request (to one data-parallel rank when ``rank`` is given), filling ``record``;
        raise ProbeFailed unless tokens came back."""
        record.update(status=None, prompt_tokens=None, completion_tokens=None, finish_reason=None, seconds=None)
        headers = None
        if rank is not None:
            # vLLM's API server sends a request with this header to that rank's engine, not the least loaded one.
            headers = {"X-data-parallel-rank": str(rank)}
            path_name = "%s to rank %d" % (path, rank)
        else:
            path_name = path
        started = time.time()
        try:
            status, body, seconds = self.request("POST", path, timeout, payload=payload, extra_headers=headers)
        except NoAnswer as exc:
            waited = round(time.time() - started, 3)
            record["seconds"] = waited
            raise ProbeFailed(step, "POST %s got no answer after %.1fs: %s" % (path_name, waited, exc)) from exc
        record.update(status=status, seconds=seconds)
        if status != 200:
            raise ProbeFailed(step, self.answer("POST", path_name, status, body))
        try:
            answer = json.loads(body)
            usage = answer.get("usage") or {}
            record["prompt_tokens"] = usage.get("prompt_tokens")
            record["completion_tokens"] = usage.get("completion_tokens")
            choices = answer.get("choices") or [{}]
            record["finish_reason"] = choices[0].get("finish_reason")
        except (ValueError, AttributeError, TypeError, IndexError):
            raise ProbeFailed(step, "POST %s answered HTTP 200 but not with a completion: %s" % (path_name, self.snippet(body))) from None
        tokens = record["completion_tokens"]
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
            raise ProbeFailed(step, "POST %s answered HTTP 200 with usage.completion_tokens %s, expected 1 or more: %s" % (
                path_name, json.dumps(tokens), self.snippet(body)))

    def check_auth(self, timeout, result):
        """Prove that every route but OPEN_ROUTES refuses a missing and a wrong key (step auth)."""
        try:
            status, body, dummy = self.request("GET", CANARY_PATH, QUICK_TIMEOUT, with_key=False)
        except NoAnswer as exc:
            raise ProbeFailed("auth", "GET %s without the key got no answer: %s" % (CANARY_PATH, exc)) from exc
        if status != 401:
            result["auth_enforced"] = False
            raise ProbeFailed("auth", "the endpoint has no default-deny key guard: GET %s (a path no engine serves) "
                                      "without the key answered HTTP %d, expected 401; no other route was sent a request "
                                      "without the key. Start the engine with the serve role's key guard "
                                      "(--middleware llm_cluster_api_auth.ApiKeyGuard)" % (CANARY_PATH, status))
        try:
            status, body, dummy = self.request("GET", "/openapi.json", timeout)
        except NoAnswer as exc:
            raise ProbeFailed("auth", "GET /openapi.json with the key got no answer: %s" % exc) from exc
        if status != 200:
            raise ProbeFailed("auth", "cannot list the routes: %s (the walk needs the engine's OpenAPI document; "
                                      "do not pass --disable-fastapi-docs)" % self.answer("GET", "/openapi.json", status, body))
        try:
            ops = operations(json.loads(body))
        except (ValueError, RoutesError) as exc:
            raise ProbeFailed("auth", "cannot list the routes: GET /openapi.json answered HTTP 200 but %s: %s" % (
                exc if isinstance(exc, RoutesError) else "not with JSON", self.snippet(body))) from None
        listed = set((method, path) for method, path, template in ops)
        ops += [(method, path, path) for method, path in sorted(OPEN_ROUTES) if (method, path) not in listed]
        wrong = "wrong-" + token_hex(16)
        while wrong == self.api_key:
            wrong = "wrong-" + token_hex(16)
        checked, opened, findings = [], [], []
        sent = 0
        for method, path, template in ops:
            name = "%s %s" % (method, template)
            checked.append(name)
            attempts = [("without the key", None)] if is_open(method, path) else [("without the key", None), ("with a wrong key", wrong)]
            for how, key in attempts:
                sent += 0 if is_open(method, path) else 1
                try:
                    status, body, dummy = self.request(method, path, QUICK_TIMEOUT, with_key=False, key=key)
                except NoAnswer as exc:
                    findings.append("%s %s got no answer: %s" % (name, how, exc))
                    continue
                if is_open(method, path):
                    if status != 401:
                        opened.append("%s %d" % (name, status))
                elif status != 401:
                    findings.append("%s %s answered HTTP %d" % (name, how, status))
        result["routes_checked"] = checked
        result["routes_open"] = opened
        result["auth_findings"] = findings
        result["auth_enforced"] = not findings
        if findings:
            raise ProbeFailed("auth", "%d of %d requests to protected routes were not refused with 401 (%d routes "
                                      "checked): %s" % (len(findings), sent, len(ops), "; ".join(findings)))


def ask_ranks(probe, params, payload, result):
    """Send the completion to every data-parallel rank at once (step 6), listing each in ``result['ranks']``; raise
    ProbeFailed naming each rank that failed. At once: a hung rank costs one request timeout, however many there are."""
    result["ranks"] = [{"rank": rank} for rank in range(params["dp_ranks"])]

    def ask(record):
        try:
            probe.generate("rank", "/v1/completions", payload, params["request_timeout"], record, rank=record["rank"])
        except ProbeFailed as exc:
            return exc.detail
        return None

    with concurrent.futures.ThreadPoolExecutor(min(len(result["ranks"]), RANK_WORKERS)) as pool:
        failed = [detail for detail in pool.map(ask, result["ranks"]) if detail is not None]
    if failed:
        raise ProbeFailed("rank", "; ".join(failed))


def run_probe(params, result, run_command=None):
    """Run every step, filling ``result``; raise ProbeFailed at the first failing one."""
    watch = None
    if params["unit"] or params["container"]:
        watch = EngineWatch(run_command, unit=params["unit"], container=params["container"])
    probe = Probe(base_url(params["url"]), params["api_key"], secrets=[params["api_key"]], watch=watch,
                  ca_path=params.get("ca_path"))
    try:
        result["health_seconds"] = probe.wait_healthy(params["wait_timeout"], params["interval"])
    finally:
        result["engine"] = watch.state if watch is not None else None
    result["models"] = probe.list_models(params["request_timeout"])
    if params["model"] not in result["models"]:
        raise ProbeFailed("models", "model %s is not served; /v1/models lists %s" % (
            json.dumps(params["model"]), ", ".join(json.dumps(i) for i in result["models"]) or "no model"))
    result["version"] = probe.read_version()
    common = {"model": params["model"], "max_tokens": params["max_tokens"], "temperature": 0, "ignore_eos": True}
    result["completion"] = {}
    probe.generate("completion", "/v1/completions", dict(common, prompt=params["prompt"]), params["request_timeout"],
                   result["completion"])
    if params["chat"]:
        result["chat"] = {}
        probe.generate("chat", "/v1/chat/completions", dict(common, messages=[{"role": "user", "content": params["prompt"]}]),
                       params["request_timeout"], result["chat"])
    if params["dp_ranks"] > 1:
        ask_ranks(probe, params, dict(common, prompt=params["prompt"]), result)
    if params["api_key"] and params["check_auth"]:
        probe.check_auth(params["request_timeout"], result)
    result["ready"] = True


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            api_key=dict(type="str", no_log=True),
            ca_path=dict(type="path"),
            model=dict(type="str", required=True),
            prompt=dict(type="str", default="Hello"),
            max_tokens=dict(type="int", default=8, no_log=False),
            chat=dict(type="bool", default=False),
            check_auth=dict(type="bool", default=True),
            dp_ranks=dict(type="int", default=0),
            wait_timeout=dict(type="int", default=0),
            unit=dict(type="str"),
            container=dict(type="str"),
            interval=dict(type="float", default=2.0),
            request_timeout=dict(type="int", default=120),
        ),
        mutually_exclusive=[("unit", "container")],
        supports_check_mode=True,
    )
    params = module.params
    url = base_url(params["url"])
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        module.fail_json(msg="url must be the endpoint's base URL, for example http://10.0.0.1:8000, got %s" % params["url"])
    if params["ca_path"] and not os.path.isfile(params["ca_path"]):
        module.fail_json(msg="ca_path %s is not a file on %s: copy the CA's PEM file there, or leave ca_path out"
                         % (params["ca_path"], socket.gethostname()))
    if params["max_tokens"] < 1:
        module.fail_json(msg="max_tokens must be 1 or more, got %d" % params["max_tokens"])
    if params["dp_ranks"] < 0:
        module.fail_json(msg="dp_ranks must be 0 or more, got %d" % params["dp_ranks"])
    if params["wait_timeout"] < 0:
        module.fail_json(msg="wait_timeout must be 0 or more, got %d" % params["wait_timeout"])
    if params["interval"] <= 0:
        module.fail_json(msg="interval must be above 0, got %s" % params["interval"])
    if params["request_timeout"] < 1:
        module.fail_json(msg="request_timeout must be 1 or more, got %d" % params["request_timeout"])

    result = {"ready": False, "health_seconds": None, "models": [], "version": None, "completion": None, "chat": None,
              "ranks": [], "auth_enforced": None, "routes_checked": [], "routes_open": [], "auth_findings": [], "engine": None}
    try:
        run_probe(params, result, module.run_command)
    except ProbeFailed as exc:
        module.fail_json(msg="%s: %s step failed: %s" % (url, exc.step, exc.detail), failed_step=exc.step, changed=False,
                         **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
