# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Whether vLLM's router sends a request to an engine of the model it names, and whether it weighs its workers.

Serving groups with a model of their own (docs/serving-groups.md, "Not done yet") need a router that routes by
the request's ``model``; weights between groups need a router that shares by a weight. This starts stand-in
engines on the loopback (Python's HTTP server: ``/health``, ``/v1/models`` naming one model, and an
OpenAI-style completion that counts the model each request asked for), then a real ``vllm-router`` three ways:

- ``plain``: two engines of two models (``big``, ``small``) in ``--worker-urls``, round robin;
- ``igw``: the same two engines in its Inference-Gateway mode (``--enable-igw``), which starts with no worker
  and takes each through ``POST /workers``; it reads each engine's model from its ``/v1/models``;
- ``igw-weights``: two engines of one model in that mode, registered with the ``priority`` and ``cost`` that
  ``POST /workers`` accepts (90 and 1.0 against 10 and 9.0), under ``random``, ``round_robin`` and
  ``power_of_two``.

For each it prints how many requests for each model each engine answered, and for an unknown model what
answered. Nothing in it is timed.

  python3 tests/bench/bench_router_models.py --router /path/to/venv/bin/vllm-router [--json FILE]
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import subprocess
import threading
import time

from bench_router_policy import JsonHandler, free_port


def stand_in(model):
    """An engine of ``model`` on a free loopback port; returns its port and its counts of the models asked for."""
    counts = {}

    class Handler(JsonHandler):
        def do_GET(self):
            if self.path.startswith("/v1/models"):
                return self._answer(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
            return self._answer(200 if self.path == "/health" else 404, {})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            if self.path != "/v1/completions":
                return self._answer(404, {})
            asked = str(request.get("model"))
            counts[asked] = counts.get(asked, 0) + 1
            return self._answer(200, {"id": "c", "object": "text_completion", "model": model,
                                      "choices": [{"index": 0, "text": "a", "finish_reason": "length"}],
                                      "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return port, counts


def call(port, method, path, document=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        body = json.dumps(document) if document is not None else None
        conn.request(method, path, body, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        return answer.status, answer.read().decode("utf-8", "replace")
    finally:
        conn.close()


def completion(port, model, index):
    request = {"model": model, "prompt": "request %d" % index, "max_tokens": 1}
    status, body = call(port, "POST", "/v1/completions", request)
    try:
        answered_by = json.loads(body).get("model")
    except ValueError:
        answered_by = None
    return status, answered_by, body[:120]


def start_router(router, policy, urls=None, igw=False):
    port = free_port()
    argv = [router, "--host", "127.0.0.1", "--port", str(port), "--policy", policy,
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())]
    argv += ["--enable-igw"] if igw else ["--worker-urls"] + list(urls or [])
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if call(port, "GET", "/health")[0] == 200:
                return process, port
        except OSError:
            pass
        time.sleep(0.3)
    process.terminate()
    raise SystemExit("the router did not answer /health in 60 s")


def stop(process):
    process.terminate()
    process.wait(timeout=30)


def wait_workers(port, count):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, body = call(port, "GET", "/workers")
        workers = json.loads(body).get("workers", []) if status == 200 else []
        if sum(1 for worker in workers if worker.get("is_healthy")) == count:
            return workers
        time.sleep(0.3)
    raise SystemExit("the router did not list %d healthy workers in 30 s" % count)


def by_model(router, igw, requests):
    engines = {model: stand_in(model) for model in ("big", "small")}
    urls = ["http://127.0.0.1:%d" % engine[0] for engine in engines.values()]
    process, port = start_router(router, "round_robin", None if igw else urls, igw)
    try:
        registered = []
        if igw:
            for url in urls:
                status, body = call(port, "POST", "/workers", {"url": url})
                registered.append({"url": url, "status": status, "model_id": json.loads(body)["worker"]["model_id"]})
            wait_workers(port, 2)
        else:
            # The plain router sends its first requests only once its health checks passed: wait for one answer.
            deadline = time.monotonic() + 60
            while completion(port, "big", -1)[0] != 200 and time.monotonic() < deadline:
                time.sleep(0.3)
        for engine in engines.values():
            engine[1].clear()
        sent = {model: [completion(port, model, i)[:2] for i in range(requests)] for model in ("big", "small")}
        unknown = completion(port, "other", 0)
    finally:
        stop(process)
    return {"way": "igw" if igw else "plain", "registered": registered,
            "answered_200": {model: sum(1 for row in rows if row[0] == 200) for model, rows in sent.items()},
            "engine_big_asked": engines["big"][1], "engine_small_asked": engines["small"][1],
            "unknown_model": {"status": unknown[0], "answered_by": unknown[1], "body": unknown[2]}}


def weights(router, policy, requests):
    engines = [stand_in("m"), stand_in("m")]
    process, port = start_router(router, policy, igw=True)
    try:
        given = [{"priority": 90, "cost": 1.0}, {"priority": 10, "cost": 9.0}]
        kept = []
        for engine, extra in zip(engines, given):
            status, body = call(port, "POST", "/workers", dict({"url": "http://127.0.0.1:%d" % engine[0]}, **extra))
            worker = json.loads(body)["worker"]
            kept.append({"status": status, "priority": worker.get("priority"), "cost": worker.get("cost")})
        wait_workers(port, 2)
        for engine in engines:
            engine[1].clear()
        ok = sum(1 for i in range(requests) if completion(port, "m", i)[0] == 200)
    finally:
        stop(process)
    return {"way": "igw-weights", "policy": policy, "given": given, "kept": kept, "answered_200": ok,
            "served": [engine[1].get("m", 0) for engine in engines]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--router", required=True, help="the vllm-router executable")
    parser.add_argument("--requests", type=int, default=6, help="completions per model (by model)")
    parser.add_argument("--weighted-requests", type=int, default=60, help="completions per policy (weights)")
    parser.add_argument("--json", help="write the results there too")
    args = parser.parse_args()
    rows = [by_model(args.router, False, args.requests), by_model(args.router, True, args.requests)]
    for row in rows:
        print("%-6s requests for big: engine big %d, engine small %d; for small: engine big %d, engine small %d; "
              "an unknown model: HTTP %s from the engine of %s" % (
                  row["way"], row["engine_big_asked"].get("big", 0), row["engine_small_asked"].get("big", 0),
                  row["engine_big_asked"].get("small", 0), row["engine_small_asked"].get("small", 0),
                  row["unknown_model"]["status"], row["unknown_model"]["answered_by"]))
    for policy in ("random", "round_robin", "power_of_two"):
        row = weights(args.router, policy, args.weighted_requests)
        rows.append(row)
        print("igw-weights %-12s priority/cost kept %s; served %d/%d of %d" % (
            policy, ["%s/%s" % (k["priority"], k["cost"]) for k in row["kept"]], row["served"][0], row["served"][1],
            row["answered_200"]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"settings": vars(args), "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
