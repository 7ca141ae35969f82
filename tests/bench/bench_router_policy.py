# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""How vLLM's router shares requests between a fast and a slow replica, per policy.

A mixed cluster of serving groups (docs/serving-groups.md) puts engines of different speeds behind one router,
and vllm-router 0.1.17 has no weight per worker (a URL listed twice is listed once). This starts two stand-in
engines on the loopback (Python's HTTP server, one OpenAI-style completion route and /health; each request held
``--fast-ms`` or ``--slow-ms`` milliseconds, at most ``--slots`` at a time per engine, as an engine's batch does),
then for each policy a real ``vllm-router`` in front of them, and sends ``--requests`` completions from
``--clients`` concurrent clients. It prints, per policy, the share of requests the slow replica answered, the
wall time and the mean and 95th-percentile latency, as ratios to round robin's in the same run.

  python3 tests/bench/bench_router_policy.py --router /path/to/venv/bin/vllm-router
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class JsonHandler(http.server.BaseHTTPRequestHandler):
    """A stand-in engine's base: HTTP/1.1, nothing logged, JSON answers (bench_router_models.py uses it too)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # the base class's signature; nothing is logged
        del format, args

    def _answer(self, code, document):
        body = json.dumps(document).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def stand_in(port, delay, slots):
    """An engine that answers /health and POST /v1/completions after ``delay`` s, ``slots`` requests at a time."""
    gate = threading.BoundedSemaphore(slots)
    counts = {"completions": 0}

    class Handler(JsonHandler):
        def do_GET(self):
            if self.path.startswith("/v1/models"):
                return self._answer(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})
            return self._answer(200 if self.path == "/health" else 404, {})

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/v1/completions":
                # What else a policy asks the engine first (cache_aware: /v1/completions/render) is counted and
                # answered 404 at once: the stand-in renders no prompt, so the policy works without it.
                counts["POST " + self.path] = counts.get("POST " + self.path, 0) + 1
                return self._answer(404, {})
            with gate:
                time.sleep(delay)
                counts["completions"] += 1
            return self._answer(200, {"id": "c", "object": "text_completion",
                                      "choices": [{"index": 0, "text": "a", "finish_reason": "length"}],
                                      "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, counts


def completion(port, index):
    body = json.dumps({"model": "m", "prompt": "request %d" % index, "max_tokens": 1})
    began = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        status = conn.getresponse().status
    finally:
        conn.close()
    return status, time.monotonic() - began


def wait_ready(port, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if completion(port, -1)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit("the router on port %d did not answer a completion in %d s" % (port, timeout))


def run_policy(args, policy, engines):
    port = free_port()
    router = subprocess.Popen([args.router, "--host", "127.0.0.1", "--port", str(port), "--policy", policy,
                               "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
                               "--worker-urls"] + ["http://127.0.0.1:%d" % engine["port"] for engine in engines],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port)
        before = [dict(engine["counts"]) for engine in engines]
        began = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            results = list(pool.map(lambda i: completion(port, i), range(args.requests)))
        wall = time.monotonic() - began
        served = [engine["counts"]["completions"] - b["completions"] for engine, b in zip(engines, before)]
        others = sorted(set(k for engine, b in zip(engines, before) for k in engine["counts"]
                            if k != "completions" and engine["counts"][k] != b.get(k, 0)))
    finally:
        router.terminate()
        router.wait(timeout=30)
    latencies = sorted(result[1] for result in results)
    return {"policy": policy, "ok": sum(1 for result in results if result[0] == 200), "served": served, "others": others,
            "slow_share": served[1] / max(sum(served), 1), "wall": wall,
            "mean": sum(latencies) / len(latencies), "p95": latencies[int(0.95 * (len(latencies) - 1))]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--router", required=True, help="the vllm-router executable")
    parser.add_argument("--policies", default="round_robin,random,power_of_two,cache_aware")
    parser.add_argument("--fast-ms", type=float, default=50)
    parser.add_argument("--slow-ms", type=float, default=250)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=240)
    parser.add_argument("--json", help="write the results there too")
    args = parser.parse_args()
    engines = []
    for delay in (args.fast_ms / 1000.0, args.slow_ms / 1000.0):
        port = free_port()
        engines.append({"port": port, "counts": stand_in(port, delay, args.slots)[1]})
    rows = [run_policy(args, policy, engines) for policy in args.policies.split(",")]
    base = rows[0]
    print("fast replica %g ms, slow %g ms per request, %d at a time each; %d requests from %d clients"
          % (args.fast_ms, args.slow_ms, args.slots, args.requests, args.clients))
    print("%-20s %8s %12s %10s %8s %8s %8s %10s" % ("policy", "answered", "fast/slow", "slow share", "wall s",
                                                    "mean s", "p95 s", "wall/%s" % base["policy"][:5]))
    for row in rows:
        print("%-20s %8d %12s %10.2f %8.2f %8.3f %8.3f %10.2f" % (
            row["policy"], row["ok"], "%d/%d" % tuple(row["served"]), row["slow_share"], row["wall"], row["mean"],
            row["p95"], row["wall"] / base["wall"]) + ("  (also %s)" % ", ".join(row["others"]) if row["others"] else ""))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"settings": vars(args), "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
