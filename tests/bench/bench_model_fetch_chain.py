# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""model_fetch alone on one machine: a chain of 4 receivers behind a source, polling against holding senders.

No containers and no Ansible run: five rsync daemons on 127.0.0.1 (the source's, and each receiver's serving
its own copy, with the role's ``files/sender_wait.py`` as ``pre-xfer exec`` when the variant holds) and four
``model_fetch`` processes started together, each pulling from the one before it with ``--bwlimit`` as the
link's rate B. A model of S bytes in N shards of S/N plus three small json files. Variants:

* ``poll``: ``sender_waits=false``, ``batch_below=0`` (the chain before: ``rsync --list-only`` every 0.5 s,
  one connection per file);
* ``hold``: ``sender_waits=true`` and the default ``batch_below`` (the sender's daemon holds each pull until
  the file is complete there; the json files over one connection).

The time is the wall time until the last receiver has everything, against the chain's ideal
(N + 3) / N x S/B. The trials go round the variants in turn. Prints one JSON line per run and a summary, and
writes ``model-fetch-chain.json`` under ``--out``::

    python3 tests/bench/bench_model_fetch_chain.py --mib 64 --rate-kib 8192 --shards 4 64 --trials 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE = os.path.join(ROOT, "plugins", "modules", "model_fetch.py")
HOOK = os.path.join(ROOT, "roles", "model_distribution", "files", "sender_wait.py")
RECEIVERS = 4
JSON_FILES = {"config.json": b'{"hidden_size": 256}\n', "generation_config.json": b'{"max_new_tokens": 16}\n',
              "model.safetensors.index.json": b'{"metadata": {}, "weight_map": {}}\n'}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def daemon(work, name, path, hold):
    port = free_port()
    conf = os.path.join(work, name + ".conf")
    with open(conf, "w") as handle:
        handle.write("address = 127.0.0.1\nport = %d\nuse chroot = no\npid file = %s/%s.pid\nlog file = %s/%s.log\n"
                     "[model]\n path = %s\n read only = yes\n auth users = llmc\n secrets file = %s/secrets\n%s"
                     % (port, work, name, work, name, path, work,
                        " pre-xfer exec = %s -S -I %s\n" % (sys.executable, HOOK) if hold else ""))
    proc = subprocess.Popen(["rsync", "--daemon", "--no-detach", "--config=" + conf])
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("rsync daemon %s did not start" % name)


def one_run(work, source, files, sizes, variant, rate_kib):
    nodes = [source] + [os.path.join(work, "node%d" % index) for index in range(1, RECEIVERS + 1)]
    for path in nodes[1:]:
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
    hold = variant == "hold"
    daemons = [daemon(work, "d%d" % index, path, hold and index > 0) for index, path in enumerate(nodes[:-1])]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, ".cache", "collections"))
    procs = []
    try:
        started = time.time()
        for index in range(1, RECEIVERS + 1):
            params = {"url": "rsync://llmc@127.0.0.1:%d/model" % daemons[index - 1][1], "dest": nodes[index],
                      "files": files, "password_file": os.path.join(work, "password"), "wait": 600,
                      "extra_args": ["--bwlimit=%d" % rate_kib]}
            params.update({"sender_waits": True, "sizes": sizes} if hold else {"sender_waits": False, "batch_below": 0})
            args = os.path.join(work, "args%d.json" % index)
            with open(args, "w") as handle:
                json.dump({"ANSIBLE_MODULE_ARGS": params}, handle)
            procs.append(subprocess.Popen([sys.executable, "-m", "ansible_collections.aihost.llm_cluster.plugins.modules.model_fetch",
                                           args], stdout=subprocess.PIPE, universal_newlines=True, env=env))
        results = []
        for proc in procs:
            out = proc.communicate()[0]
            results.append(json.loads(out))
            results[-1]["ended"] = time.time() - started
        if any(result.get("failed") for result in results):
            raise SystemExit("a pull failed: %s" % [result.get("msg") for result in results if result.get("failed")])
        for path in nodes[1:]:
            for name in files:
                if os.path.getsize(os.path.join(path, name)) != os.path.getsize(os.path.join(source, name)):
                    raise SystemExit("%s differs at %s" % (name, path))
        return {"wall_s": round(max(result["ended"] for result in results), 2),
                "connections": sum(len(result["pulls"]) for result in results),
                "waited_s": round(sum(pull["waited"] for result in results for pull in result["pulls"]), 2)}
    finally:
        for proc, dummy in daemons:
            proc.terminate()
            proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--mib", type=int, default=64, help="model size S in MiB")
    parser.add_argument("--rate-kib", type=int, default=8192, help="B, rsync --bwlimit in KiB/s per link")
    parser.add_argument("--shards", type=int, nargs="+", default=[4, 64])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(ROOT, ".cache", "timing"))
    args = parser.parse_args()
    if not os.path.exists(os.path.join(ROOT, ".cache", "collections", "ansible_collections", "aihost", "llm_cluster")):
        raise SystemExit("run `make collection` first (the module is imported from .cache/collections)")
    work = tempfile.mkdtemp(prefix="bench-fetch-chain-")
    for name, content in (("secrets", "llmc:bench\n"), ("password", "bench\n")):
        with open(os.path.join(work, name), "w") as handle:
            handle.write(content)
        os.chmod(os.path.join(work, name), 0o600)
    report = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "mib": args.mib, "rate_kib": args.rate_kib,
              "trials": args.trials, "loadavg_start": os.getloadavg(), "rows": [], "summary": {}}
    try:
        for shards in args.shards:
            source = os.path.join(work, "source%d" % shards)
            os.makedirs(source)
            files, sizes = [], {}
            for index in range(1, shards + 1):
                name = "model-%05d-of-%05d.safetensors" % (index, shards)
                with open(os.path.join(source, name), "wb") as handle:
                    handle.write(os.urandom(args.mib * 1048576 // shards))
                files.append(name)
            for name, content in JSON_FILES.items():
                with open(os.path.join(source, name), "wb") as handle:
                    handle.write(content)
                files.insert(1, name)
            sizes = {name: os.path.getsize(os.path.join(source, name)) for name in files}
            bound = sum(sizes.values()) / (args.rate_kib * 1024.0)
            ideal = (shards + RECEIVERS - 1) / float(shards) * bound
            for trial in range(1, args.trials + 1):
                for variant in ("poll", "hold"):
                    row = dict(one_run(work, source, files, sizes, variant, args.rate_kib), shards=shards,
                               variant=variant, trial=trial)
                    report["rows"].append(row)
                    print(json.dumps(row), flush=True)
            entry = {"s_over_b": round(bound, 2), "chain_ideal_s": round(ideal, 2)}
            for variant in ("poll", "hold"):
                median = statistics.median(row["wall_s"] for row in report["rows"]
                                           if row["shards"] == shards and row["variant"] == variant)
                entry[variant] = {"median_s": median, "x_ideal": round(median / ideal, 2),
                                  "connections_per_node": [row["connections"] for row in report["rows"]
                                                           if row["shards"] == shards and row["variant"] == variant][0]
                                  // RECEIVERS}
            entry["hold_speedup"] = round(entry["poll"]["median_s"] / entry["hold"]["median_s"], 2)
            report["summary"][str(shards)] = entry
    finally:
        shutil.rmtree(work, ignore_errors=True)
        report["loadavg_end"] = os.getloadavg()
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "model-fetch-chain.json"), "w") as handle:
            json.dump(report, handle, indent=1)
    print(json.dumps(report["summary"]))


if __name__ == "__main__":
    main()
