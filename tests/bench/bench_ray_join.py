# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Time from the first Ray unit start to every node joined, on a converged container cluster.

Needs the containers of the Molecule ``ray`` scenario (or ``default``) after a converge:
``ray-master1`` running ``llm-cluster-ray-head`` and ``ray-worker1``/``ray-worker2`` running
``llm-cluster-ray-worker``. Each round stops every unit, then starts them the way the role does
(the head, then the workers as soon as the head's GCS port answers) or all at once, and measures on
ray-master1 the time from the head's start until Ray's own API shows every node alive and every NPU
visible. Prints one JSON line per round and a summary line with the medians::

    make bench-ray            # creates, converges, measures and destroys the ray scenario
    python3 tests/bench/bench_ray_join.py --rounds 5   # against containers that are already up
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time

HEAD, WORKERS = "ray-master1", ["ray-worker1", "ray-worker2"]
PY = "/opt/llm_cluster/ray/bin/python"
# Runs on ray-master1: waits for the GCS port, then reads ray.nodes() until complete. Prints seconds since t0.
WATCH = r'''
import json, socket, sys, time
t0, address, want, npu = float(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
host, port = address.rsplit(":", 1)
while True:
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        break
    except OSError:
        time.sleep(0.05)
gcs = time.time() - t0
import ray
ray.init(address=address, logging_level="ERROR", log_to_driver=False)
while True:
    alive = [n for n in ray.nodes() if n["Alive"]]
    if len(alive) >= want and sum(n["Resources"].get("NPU", 0) for n in alive) >= npu:
        break
    time.sleep(0.1)
print(json.dumps({"gcs_open": round(gcs, 2), "all_joined": round(time.time() - t0, 2)}))
'''


def sh(node, *argv, check=True):
    return subprocess.run(["docker", "exec", node] + list(argv), check=check, stdout=subprocess.PIPE,
                          universal_newlines=True).stdout


def head_address():
    for line in sh(HEAD, "cat", "/etc/llm_cluster/env").splitlines():
        if line.startswith("LLM_CLUSTER_NODE_ADDRESS="):
            return line.split("=", 1)[1]
    raise SystemExit("no LLM_CLUSTER_NODE_ADDRESS on %s: converge first" % HEAD)


def stop_all():
    for node in WORKERS:
        sh(node, "systemctl", "stop", "llm-cluster-ray-worker")
    sh(HEAD, "systemctl", "stop", "llm-cluster-ray-head")


def one_round(address, ordered, port):
    stop_all()
    t0 = time.time()
    # The cluster's token settings (RAY_AUTH_MODE, RAY_AUTH_TOKEN_PATH), as the Ray units read them.
    watch = subprocess.Popen(["docker", "exec", HEAD, "sh", "-c", 'set -a; . /etc/llm_cluster/ray-auth.env; exec "$@"', "-",
                              PY, "-c", WATCH, repr(t0), address, "3", "24"],
                             stdout=subprocess.PIPE, universal_newlines=True)
    sh(HEAD, "systemctl", "start", "--no-block", "llm-cluster-ray-head")
    if ordered:
        # What the role does: workers after the head's GCS port answers.
        sh(HEAD, "python3", "-c", "import socket, time\nwhile True:\n    try:\n        socket.create_connection(('%s', %d), 1)"
           "\n        break\n    except OSError:\n        time.sleep(0.05)" % (address.rsplit(":", 1)[0], port))
    for node in WORKERS:
        sh(node, "systemctl", "start", "--no-block", "llm-cluster-ray-worker")
    out = watch.communicate(timeout=300)[0]
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--port", type=int, default=6379)
    args = parser.parse_args()
    address = "%s:%d" % (head_address(), args.port)
    results = {"ordered": [], "simultaneous": []}
    for index in range(args.rounds):
        for mode in ("ordered", "simultaneous"):
            result = one_round(address, mode == "ordered", args.port)
            result.update(mode=mode, round=index + 1)
            results[mode].append(result)
            print(json.dumps(result), flush=True)
    print(json.dumps({mode: {"rounds": len(rows), "median_gcs_open_s": statistics.median(r["gcs_open"] for r in rows),
                             "median_all_joined_s": statistics.median(r["all_joined"] for r in rows),
                             "max_all_joined_s": max(r["all_joined"] for r in rows)}
                      for mode, rows in results.items()}))


if __name__ == "__main__":
    main()
