# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Shared code of the fake vendor tools (npu-smi, hccn_tool, nvidia-smi).

The fakes are test doubles for the container test harness. Each node has one
JSON state file (``$LLM_CLUSTER_FAKE_STATE``, default
``/var/lib/llm-cluster-fakes/state.json``) that describes its accelerators and
the fault knobs. The tools never rewrite that file: what their set commands
change goes into a runtime overlay next to it (``state.runtime.json``), which
is merged over the state on every read. tests/fakes/README.md documents the
schema.
"""

from __future__ import annotations

import json
import os
import sys
import zlib

DEFAULT_STATE = "/var/lib/llm-cluster-fakes/state.json"
DEFAULT_FABRIC = "/var/lib/llm-cluster-fabric"
DEFAULT_HCCN_CONF = "/etc/hccn.conf"


class Exit(Exception):
    """End of a tool run: what to print on stdout and stderr, and the exit status."""

    def __init__(self, rc: int = 0, out: str = "", err: str = "") -> None:
        super().__init__(rc)
        self.rc = rc & 0xFF  # the shell sees the low byte of main()'s return value
        self.out = out
        self.err = err


DEFAULT_CALL_LOG = "/var/lib/llm-cluster-fakes/calls.log"


def log_call(argv: list, rc: int) -> None:
    """Append "<tool> <args> -> <rc>" to the call log, so tests can count calls (e.g. hccn_tool -s)."""
    path = os.environ.get("LLM_CLUSTER_FAKE_LOG") or DEFAULT_CALL_LOG
    if not os.path.isdir(os.path.dirname(path)):
        return
    tool = os.path.basename(sys.argv[0]).replace("_", "-").replace(".py", "").replace("hccn-tool", "hccn_tool")
    try:
        with open(path, "a") as handle:
            handle.write("%s %s -> %d\n" % (tool, " ".join(argv), rc))
    except OSError:
        pass


def run(main) -> None:
    """Call ``main(argv)`` (which returns or raises an Exit), log the call, print its result and exit."""
    try:
        result = main(sys.argv[1:])
    except Exit as exc:
        result = exc
    log_call(sys.argv[1:], result.rc)
    sys.stdout.write(result.out)
    sys.stdout.flush()
    sys.stderr.write(result.err)
    sys.exit(result.rc)


def lines(*rows: str) -> str:
    """Join output rows, each terminated by a newline."""
    return "".join(row + "\n" for row in rows)


def kv(key: str, value) -> str:
    """One npu-smi key/value row: leading TAB, key left-justified in 30 columns."""
    return f"\t{key:<30} : {value}"


def deep_merge(base, over):
    """Merge ``over`` into a copy of ``base``: dicts recursively, anything else replaced."""
    if not isinstance(base, dict) or not isinstance(over, dict):
        return over
    merged = dict(base)
    for key, value in over.items():
        merged[key] = deep_merge(base[key], value) if key in base else value
    return merged


def read_json(path: str, default=None):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        if default is not None:
            return default
        raise


def write_atomic(path: str, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` (temp file + rename); no-op when unchanged."""
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        pass
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    import tempfile  # pylint: disable=import-outside-toplevel

    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def dump_json(data) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


class State:
    """The node's state file with the runtime overlay merged over it."""

    def __init__(self, tool: str) -> None:
        self.path = os.environ.get("LLM_CLUSTER_FAKE_STATE") or DEFAULT_STATE
        stem = self.path[:-5] if self.path.endswith(".json") else self.path
        self.runtime_path = stem + ".runtime.json"
        try:
            with open(self.path, "rb") as handle:
                raw = handle.read()
            self.base = json.loads(raw)
            # CRC-32 and size, not hashlib (importing OpenSSL took a tenth of every call): the
            # overlay belongs to this state only, which detects a new profile or fault.
            self.fingerprint = "%08x-%d" % (zlib.crc32(raw), len(raw))
            runtime = self._read_runtime()
        except (OSError, ValueError) as exc:
            raise Exit(1, err=f"{tool} (fake): cannot read state file {self.path}: {exc}\n") from exc
        self.data = deep_merge(self.base, runtime)

    def _read_runtime(self) -> dict:
        runtime = read_json(self.runtime_path, {})
        return runtime if runtime.get("state_fingerprint") == self.fingerprint else {}

    def get(self, key: str, default=None):
        value = self.data.get(key)
        return default if value is None else value

    def knob(self, name: str, index: int, default=None):
        """Per-device fault knob: ``{"<index>": value}`` maps at the top level."""
        value = (self.data.get(name) or {}).get(str(index))
        return default if value is None else value

    @property
    def missing(self) -> set[int]:
        return {int(i) for i in self.data.get("missing_devices") or []}

    def devices(self, section: str, id_key: str) -> list[dict]:
        """Devices of ``section`` (``npu``/``gpu``) with defaults applied, missing ones left out."""
        sect = self.data.get(section) or {}
        defaults = sect.get("device_defaults") or {}
        return [
            {**defaults, **dev}
            for dev in sect.get("devices") or []
            if int(dev[id_key]) not in self.missing
        ]

    @property
    def hostname(self) -> str:
        return os.environ.get("LLM_CLUSTER_FAKE_HOSTNAME") or self.data.get("hostname") or os.uname().nodename

    @property
    def fabric_dir(self) -> str:
        return os.environ.get("LLM_CLUSTER_FAKE_FABRIC") or self.data.get("fabric_dir") or DEFAULT_FABRIC

    @property
    def hccn_conf(self) -> str:
        return os.environ.get("LLM_CLUSTER_FAKE_HCCN_CONF") or self.data.get("hccn_conf") or DEFAULT_HCCN_CONF

    def update_runtime(self, mutate) -> None:
        """Apply ``mutate(runtime_dict)`` to the overlay under a lock and persist it."""
        os.makedirs(os.path.dirname(self.runtime_path) or ".", exist_ok=True)
        with open(self.runtime_path + ".lock", "a", encoding="utf-8") as lock:
            import fcntl  # pylint: disable=import-outside-toplevel

            fcntl.flock(lock, fcntl.LOCK_EX)
            runtime = self._read_runtime()
            runtime["state_fingerprint"] = self.fingerprint
            mutate(runtime)
            write_atomic(self.runtime_path, dump_json(runtime))
        self.data = deep_merge(self.base, runtime)


def serve_metrics(address, render) -> None:
    """Serve ``GET /metrics`` (Prometheus text format 0.0.4) from ``render()`` at ``address`` (host, port) until
    killed; anything else is 404, a state that cannot be read a 500 with the tool's message. For the fake exporters:
    http.server is imported here, not with this module, which every fake tool call imports."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the http.server API)
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            try:
                body = render().encode()
            except Exit as exc:
                self.send_error(500, exc.err.strip())
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):
            return

    ThreadingHTTPServer(address, Handler).serve_forever()
