# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Model distribution to 4 destinations with every link shaped to the same rate B: star, rounds, chain.

Needs the five containers of the Molecule ``model`` scenario after a converge (``make bench-model`` does
it all). Every container's egress (its eth0) and ingress (the host-side veth) get a TBF of rate B, so each
node can send and receive B at once, like a server NIC. Two models of the same size S: the scenario's
``4x64`` (four 64 MiB shards and three json files, /srv/models/synthetic) and ``64x4`` (64 shards of 4 MiB
and the same json files, /srv/models/synthetic64, written on md-master1 by this script), so the only
difference is the number of files.

Variants: ``single`` (star to md-worker1 alone: the single-transfer bound), ``star``, ``rounds``,
``chain`` (the role's defaults: the sender's daemon holds each request until the file is complete there,
and the small files come over one connection) and ``chain-poll`` (the chain as it was before both:
``model_distribution_sender_waits=false``, the receiver asks every 0.5 s, and
``model_distribution_batch_below=0``, one connection per file), and ``chain-file`` (the chain with every
shard over its own connection, ``model_distribution_batch_bytes=0``). The trials go round the variants in turn, so
that a change in the machine's load touches every variant alike; compare the ratios of one run.

For each run the workers' copies are deleted and the model step runs with ``profile_tasks``; the transfer
time is read from the role's report (the longest transfer of each round, summed over the rounds) and compared
with S/B and, for the chain, with its ideal (shards + hops) / shards x S/B. Prints one JSON line and the
slowest tasks per run, and the summary; writes every run's per-task table (``*.profile.txt``) and
``model-fanout.json`` (rows, summary, load) under ``--out``::

    make bench-model
    python3 tests/bench/bench_model_fanout.py --rate-mbit 200 --trials 2   # containers already up
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import tempfile
import time

NODES = ["md-master1", "md-worker1", "md-worker2", "md-worker3", "md-worker4"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "molecule", "model", "model.yml")
MODELS = {
    # name: (path, shards, MiB per shard); the json files are the same in both.
    "4x64": ("/srv/models/synthetic", 4, 64),
    "64x4": ("/srv/models/synthetic64", 64, 4),
}
VARIANTS = {
    "single": ["-e", "model_distribution_strategy=star"],
    "star": ["-e", "model_distribution_strategy=star"],
    "rounds": ["-e", "model_distribution_strategy=rounds"],
    "chain-poll": ["-e", "model_distribution_strategy=chain", "-e", "model_distribution_sender_waits=false",
                   "-e", "model_distribution_batch_below=0", "-e", "model_distribution_batch_bytes=0"],
    "chain-file": ["-e", "model_distribution_strategy=chain", "-e", "model_distribution_batch_bytes=0"],
    "chain": ["-e", "model_distribution_strategy=chain"],
}
INVENTORY = """all:
  vars:
    ansible_connection: community.docker.docker
    ansible_python_interpreter: /usr/bin/python3
    node_num: 5
  children:
    masters: {hosts: {md-master1: {}}}
    workers: {hosts: {md-worker1: {}, md-worker2: {}, md-worker3: {}, md-worker4: {}}}
"""


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


def make_model(name):
    """Write the model on md-master1 unless it is there: random shards, and the scenario's json files."""
    path, shards, mib = MODELS[name]
    script = ("set -e; mkdir -p {p}; cd {p}; for i in $(seq 1 {n}); do f=$(printf 'model-%05d-of-%05d.safetensors' $i {n}); "
              "[ -s $f ] || dd if=/dev/urandom of=$f bs=1M count={m} status=none; done; "
              "for f in config.json generation_config.json model.safetensors.index.json; do "
              "[ -s $f ] || cp /srv/models/synthetic/$f .; done").format(p=path, n=shards, m=mib)
    subprocess.run(["docker", "exec", "md-master1", "sh", "-c", script], check=True)


def transfer_seconds(report):
    by_round = {}
    for transfer in report["transfers"]:
        by_round[transfer["round"]] = max(by_round.get(transfer["round"], 0.0), float(transfer["seconds"]))
    return sum(by_round.values())


def profile(text):
    """The per-task table of profile_tasks: [(task, seconds)], in the order printed."""
    tasks, inside = [], False
    for line in text.splitlines():
        if line.startswith("TASKS RECAP"):
            inside = True
            continue
        if not inside or not line.strip() or line.startswith("=") or re.match(r"^\w+day \d", line):
            continue
        head, seconds = (line.rstrip().rsplit(" ", 1) + [""])[:2]
        if seconds.endswith("s"):
            try:
                tasks.append((head.rstrip("-").rstrip(), float(seconds[:-1])))
            except ValueError:
                pass
    return tasks


def one_run(model, variant, trial, inventory, out, env):
    path = MODELS[model][0]
    receivers = NODES[1:2] if variant == "single" else NODES[1:]
    for node in receivers:
        subprocess.run(["docker", "exec", node, "rm", "-rf", path], check=True)
    artifacts = os.path.join(out, "artifacts")
    tag = "%s-%s-%d" % (model, variant, trial)
    started = time.time()
    result = subprocess.run(["ansible-playbook", "-i", inventory, PLAYBOOK, "-e", "model_distribution_path=%s" % path]
                            + VARIANTS[variant], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, env=dict(env, LLM_CLUSTER_ARTIFACTS=artifacts), check=False)
    wall = time.time() - started
    with open(os.path.join(out, tag + ".log"), "w") as handle:
        handle.write(result.stdout)
    if result.returncode != 0:
        raise SystemExit("%s: ansible-playbook exited %d; see %s.log" % (tag, result.returncode, os.path.join(out, tag)))
    tasks = profile(result.stdout)
    with open(os.path.join(out, tag + ".profile.txt"), "w") as handle:
        handle.writelines("%-100s %8.2fs\n" % task for task in tasks)
    with open(os.path.join(artifacts, "model-distribution-last-transfer.json")) as handle:
        report = json.load(handle)
    row = {"model": model, "variant": variant, "trial": trial, "destinations": len(receivers),
           "rounds": len(report["rounds"]), "transfer_s": round(transfer_seconds(report), 2),
           "playbook_s": round(wall, 2), "total_bytes": report["total_bytes"], "files": report["files"],
           "connections": sum(t.get("connections", t["files"]) for t in report["transfers"]),
           "waited_s": round(sum(t["waited"] for t in report["transfers"]), 2), "tasks": tasks}
    print(json.dumps(dict((key, value) for key, value in row.items() if key != "tasks")), flush=True)
    for task, seconds in sorted(tasks, key=lambda item: -item[1])[:8]:
        print("    %-90s %7.2fs" % (task[:90], seconds), flush=True)
    return row


def summarize(rows, rate_mbit):
    summary = {}
    for model in sorted(set(row["model"] for row in rows)):
        mine = [row for row in rows if row["model"] == model]
        size, shards = mine[0]["total_bytes"], MODELS[model][1]
        bound = size * 8 / (rate_mbit * 1e6)
        hops = len(NODES) - 2
        entry = {"model_bytes": size, "shards": shards, "files": mine[0]["files"], "s_over_b": round(bound, 2),
                 "chain_ideal_s": round((shards + hops) / float(shards) * bound, 2),
                 "target_fanout_s": round(1.3 * math.ceil(math.log2(len(NODES))) * bound, 2)}
        for variant in VARIANTS:
            runs = [row for row in mine if row["variant"] == variant]
            if not runs:
                continue
            median = statistics.median(row["transfer_s"] for row in runs)
            entry[variant] = {"median_transfer_s": median, "x_s_over_b": round(median / bound, 2),
                              "median_playbook_s": statistics.median(row["playbook_s"] for row in runs),
                              "connections": runs[0]["connections"],
                              "median_waited_s": statistics.median(row["waited_s"] for row in runs),
                              "trials": len(runs)}
            if variant.startswith("chain"):
                entry[variant]["x_ideal"] = round(median / entry["chain_ideal_s"], 2)
        for variant in ("rounds", "chain-poll", "chain-file", "chain"):
            if "star" in entry and variant in entry:
                entry[variant]["speedup_vs_star"] = round(entry["star"]["median_transfer_s"]
                                                          / entry[variant]["median_transfer_s"], 2)
        for before in ("chain-poll", "chain-file"):
            if "chain" in entry and before in entry:
                entry["chain"]["speedup_vs_" + before.replace("-", "_")] = round(
                    entry[before]["median_transfer_s"] / entry["chain"]["median_transfer_s"], 2)
        summary[model] = entry
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--rate-mbit", type=int, default=200)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--models", default="4x64,64x4", help="comma-separated: %s" % ", ".join(MODELS))
    parser.add_argument("--variants", default="star,rounds,chain-poll,chain,single",
                        help="comma-separated, run in this order in every trial: %s" % ", ".join(VARIANTS))
    parser.add_argument("--out", default=os.path.join(ROOT, ".cache", "timing", "model-fanout"))
    args = parser.parse_args()
    models, variants = args.models.split(","), args.variants.split(",")
    for name in models + variants:
        if name not in MODELS and name not in VARIANTS:
            parser.error("unknown model or variant %r" % name)
    out = os.path.abspath(args.out)
    os.makedirs(os.path.join(out, "artifacts"), exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="bench-model-")
    inventory = os.path.join(workdir, "hosts.yml")
    with open(inventory, "w") as handle:
        handle.write(INVENTORY)
    env = dict(os.environ, ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks", PROFILE_TASKS_TASK_OUTPUT_LIMIT="all",
               PROFILE_TASKS_SORT_ORDER="none", ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               PY_COLORS="0", ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                            universal_newlines=True, check=False).stdout.strip()
    report = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit, "rate_mbit": args.rate_mbit,
              "trials": args.trials, "loadavg_start": os.getloadavg(), "rows": []}
    for model in models:
        make_model(model)
    shape(args.rate_mbit)
    try:
        for model in models:
            for trial in range(1, args.trials + 1):
                for variant in variants:
                    report["rows"].append(one_run(model, variant, trial, inventory, out, env))
    finally:
        unshape()
        report["loadavg_end"] = os.getloadavg()
        report["summary"] = summarize(report["rows"], args.rate_mbit) if report["rows"] else {}
        with open(os.path.join(out, "model-fanout.json"), "w") as handle:
            json.dump(report, handle, indent=1)
    print(json.dumps(report["summary"]))


if __name__ == "__main__":
    main()
