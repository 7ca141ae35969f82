# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Model distribution to 4 destinations with every link shaped to the same rate B: star, rounds, chain.

Needs the five containers of the Molecule ``model`` scenario after a converge (``make bench-model`` does
it all). Every container's egress (its eth0) and ingress (the host-side veth) get a TBF of rate B, so each
node can send and receive B at once, like a server NIC. For each strategy and trial the workers' copies are
deleted and the model step runs with ``model_distribution_strategy`` set; the transfer time is read from the
role's report (the longest transfer of each round, summed over the rounds) and compared with the
single-transfer bound S/B. Prints one JSON line per run and a summary line::

    make bench-model
    python3 tests/bench/bench_model_fanout.py --rate-mbit 200 --trials 2   # containers already up
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import tempfile
import time

NODES = ["md-master1", "md-worker1", "md-worker2", "md-worker3", "md-worker4"]
MODEL = "/srv/models/synthetic"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "molecule", "model", "model.yml")
INVENTORY = """all:
  vars:
    ansible_connection: community.docker.docker
    ansible_python_interpreter: /usr/bin/python3
    node_num: 5
    model_path: %s
  children:
    masters: {hosts: {md-master1: {}}}
    workers: {hosts: {md-worker1: {}, md-worker2: {}, md-worker3: {}, md-worker4: {}}}
""" % MODEL


def run(argv, **kwargs):
    return subprocess.run(argv, check=True, stdout=subprocess.PIPE, universal_newlines=True, **kwargs).stdout


def host_veth(node):
    index = run(["docker", "exec", node, "cat", "/sys/class/net/eth0/iflink"]).strip()
    for name in os.listdir("/sys/class/net"):
        with open("/sys/class/net/%s/ifindex" % name) as handle:
            if handle.read().strip() == index:
                return name
    raise SystemExit("no host-side veth for %s" % node)


def shape(rate_mbit):
    spec = ["tbf", "rate", "%dmbit" % rate_mbit, "burst", "256kb", "latency", "50ms"]
    for node in NODES:
        subprocess.run(["docker", "exec", node, "tc", "qdisc", "replace", "dev", "eth0", "root"] + spec, check=True)
        subprocess.run(["tc", "qdisc", "replace", "dev", host_veth(node), "root"] + spec, check=True)


def unshape():
    for node in NODES:
        subprocess.run(["docker", "exec", node, "tc", "qdisc", "del", "dev", "eth0", "root"], check=False)
        subprocess.run(["tc", "qdisc", "del", "dev", host_veth(node), "root"], check=False)


def transfer_seconds(report):
    by_round = {}
    for transfer in report["transfers"]:
        by_round[transfer["round"]] = max(by_round.get(transfer["round"], 0.0), float(transfer["seconds"]))
    return sum(by_round.values())


def one_run(strategy, inventory, artifacts, receivers):
    for node in receivers:
        subprocess.run(["docker", "exec", node, "rm", "-rf", MODEL], check=True)
    env = dict(os.environ, LLM_CLUSTER_ARTIFACTS=artifacts)
    started = time.time()
    subprocess.run(["ansible-playbook", "-i", inventory, PLAYBOOK, "-e", "model_distribution_strategy=%s" % strategy],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.time() - started
    with open(os.path.join(artifacts, "model-distribution-last-transfer.json")) as handle:
        report = json.load(handle)
    return {"strategy": strategy, "destinations": len(receivers), "rounds": len(report["rounds"]),
            "transfer_s": round(transfer_seconds(report), 2), "playbook_s": round(wall, 2),
            "total_bytes": report["total_bytes"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--rate-mbit", type=int, default=200)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--strategies", default="single,star,rounds,chain")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="bench-model-")
    inventory = os.path.join(workdir, "hosts.yml")
    with open(inventory, "w") as handle:
        handle.write(INVENTORY)
    shape(args.rate_mbit)
    results = {}
    try:
        for strategy in args.strategies.split(","):
            for trial in range(args.trials):
                if strategy == "single":
                    row = one_run("star", inventory, workdir, NODES[1:2])
                    row["strategy"] = "single"
                else:
                    row = one_run(strategy, inventory, workdir, NODES[1:])
                row["trial"] = trial + 1
                results.setdefault(strategy, []).append(row)
                print(json.dumps(row), flush=True)
    finally:
        unshape()
    size = next(iter(results.values()))[0]["total_bytes"]
    bound = size * 8 / (args.rate_mbit * 1e6)
    summary = {"rate_mbit": args.rate_mbit, "model_bytes": size, "s_over_b": round(bound, 2),
               "target_fanout_s": round(1.3 * math.ceil(math.log2(len(NODES))) * bound, 2)}
    for strategy, rows in results.items():
        median = statistics.median(row["transfer_s"] for row in rows)
        summary[strategy] = {"median_transfer_s": median, "x_s_over_b": round(median / bound, 2),
                             "median_playbook_s": statistics.median(row["playbook_s"] for row in rows)}
    if "star" in summary:
        for strategy in ("rounds", "chain"):
            if strategy in summary:
                summary[strategy]["speedup_vs_star"] = round(summary["star"]["median_transfer_s"]
                                                             / summary[strategy]["median_transfer_s"], 2)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
