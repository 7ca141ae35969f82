# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A second ``./deploy.sh demo`` (nothing to change) over Ansible's linear strategy and over Mitogen's, alternated.

The demo check (``tests/demo/check-demo.sh``) runs ``./deploy.sh demo`` and ``./deploy.sh rolling-restart``
six times on the same two nodes. The first deploy and the bench are what a new user runs (Ansible's linear
strategy, one ``docker exec`` and one Python per module); this script measures what the later runs would
save with Mitogen's strategy (one Python per node for the whole run), as Molecule's runs have it
(``.config/molecule/config.yml``). It needs the demo up (``./deploy.sh demo``) and Mitogen importable by
the Python that runs it (the test venv); it changes nothing on the nodes: every run must report
``changed=0`` on both, else it stops. For each run: the wall time, the CPU of the controller (Ansible and
its workers) and of the two node containers (cgroup), and the recap. The JSON goes to ``--json``::

    ./deploy.sh demo
    .venv/bin/python tests/bench/bench_demo_rerun.py --trials 2 --json .cache/timing/bench-demo-rerun.json

The nodes' CPU includes what the idle engines, Ray and the watchdogs use meanwhile, the same under both.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

# The cgroup and rusage readers of the deploy benchmark beside this file.
from bench_deploy_scale import container_cpu_seconds, controller_cpu_seconds

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODES = ("llmc-demo-master", "llmc-demo-worker")
RECAP = re.compile(r"^(?P<host>llmc-demo-\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=\d+"
                   r"\s+failed=(?P<failed>\d+)", re.M)


def node_cpu_seconds():
    """CPU time the demo's containers used so far."""
    return container_cpu_seconds(NODES)


def mitogen_environment(directory):
    """PYTHONPATH and the strategy for the demo's own venv: Mitogen's two packages, linked from this Python's."""
    import ansible_mitogen  # pylint: disable=import-outside-toplevel
    import mitogen  # pylint: disable=import-outside-toplevel
    for module in (mitogen, ansible_mitogen):
        link = os.path.join(directory, module.__name__)
        if not os.path.islink(link):
            os.symlink(os.path.dirname(module.__file__), link)
    return {"PYTHONPATH": directory, "ANSIBLE_STRATEGY": "mitogen_linear", "ANSIBLE_TIMEOUT": "60",
            "ANSIBLE_STRATEGY_PLUGINS": os.path.join(directory, "ansible_mitogen", "plugins", "strategy")}


def run(strategy, env):
    nodes, controller, start = node_cpu_seconds(), controller_cpu_seconds(), time.monotonic()
    result = subprocess.run([os.path.join(ROOT, "deploy.sh"), "demo"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    seconds = time.monotonic() - start
    row = {"strategy": strategy, "seconds": round(seconds, 1),
           "cpu_controller_s": round(controller_cpu_seconds() - controller, 1),
           "cpu_nodes_s": round(node_cpu_seconds() - nodes, 1),
           "recap": {m["host"]: {"ok": int(m["ok"]), "changed": int(m["changed"]), "failed": int(m["failed"])}
                     for m in RECAP.finditer(result.stdout)}}
    if result.returncode != 0 or len(row["recap"]) != 2 or any(r["changed"] or r["failed"] for r in row["recap"].values()):
        sys.stderr.write(result.stdout[-4000:])
        raise SystemExit("a rerun over %s changed something or failed: %s" % (strategy, row["recap"]))
    print("%-8s %6.1f s  controller CPU %5.1f s  nodes' CPU %5.1f s  %s" % (
        strategy, seconds, row["cpu_controller_s"], row["cpu_nodes_s"], row["recap"]), flush=True)
    return row


def commit():
    """This checkout's commit, or None where ROOT is a copy without its own .git (git would name a parent's)."""
    if not os.path.exists(os.path.join(ROOT, ".git")):
        return None
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, stdout=subprocess.PIPE,
                          universal_newlines=True, check=True).stdout.strip()


def median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--trials", type=int, default=2, help="runs of each strategy, alternated")
    parser.add_argument("--json", default=os.path.join(ROOT, ".cache", "timing", "bench-demo-rerun.json"))
    args = parser.parse_args()
    if not os.path.exists(os.path.join(ROOT, ".cache", "demo", "inventory", "hosts.yml")):
        raise SystemExit("no demo here: run ./deploy.sh demo first")
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        variants = {"linear": dict(os.environ), "mitogen": dict(os.environ, **mitogen_environment(directory))}
        for trial in range(args.trials):
            for strategy, env in variants.items():
                rows.append(dict(run(strategy, env), trial=trial + 1))
    summary = {strategy: {key: round(median([row[key] for row in rows if row["strategy"] == strategy]), 1)
                          for key in ("seconds", "cpu_controller_s", "cpu_nodes_s")} for strategy in variants}
    summary["ratio_wall_mitogen_to_linear"] = round(summary["mitogen"]["seconds"] / summary["linear"]["seconds"], 3)
    report = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count(),
              "commit": commit(),
              "loadavg": os.getloadavg(), "runs": rows, "summary": summary}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as handle:
        json.dump(report, handle, indent=2)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
