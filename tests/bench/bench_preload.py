# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The controller's CPU for one idempotent deploy, with and without the preload callback.

Ansible forks a worker for each task of each host; a worker that templates one of the collection's filters
imports every filter file of the collection and the helpers they import, compiled from source (Ansible's
collection loader keeps no byte code). ``aihost.llm_cluster.preload`` loads them once in ``ansible-playbook``
before the first task, so the workers inherit them.

On a Molecule scenario that is already converged (``molecule converge -s ray``), this runs
``molecule idempotence`` (the scenario's ``converge.yml`` again: every task, nothing to change) ``--trials``
times each way, alternated: ``callbacks_enabled`` with ``profile_tasks`` only (``without``) and with the
preload as well (``with``). Per run: the wall time and the CPU of this process's children (Molecule,
``ansible-playbook`` and its workers: the controller). Prints a table, the ratio of the medians, and writes
it as JSON::

    python3 tests/bench/bench_preload.py --scenario ray --trials 3 --json .cache/timing/bench-preload.json

Run it with the machine to itself; each run must report nothing changed, or the bench stops.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAYS = {
    "without": "ansible.posix.profile_tasks",
    "with": "ansible.posix.profile_tasks, aihost.llm_cluster.preload",
}


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(scenario, way):
    env = dict(os.environ, ANSIBLE_CALLBACKS_ENABLED=WAYS[way])
    cpu, begin = children_cpu(), time.monotonic()
    result = subprocess.run(["molecule", "idempotence", "-s", scenario], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    wall, cpu = time.monotonic() - begin, children_cpu() - cpu
    if result.returncode != 0:
        sys.exit("molecule idempotence -s %s (%s the preload) failed:\n%s" % (scenario, way, result.stdout[-3000:]))
    return {"wall_s": round(wall, 2), "controller_cpu_s": round(cpu, 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--scenario", default="ray", help="a converged Molecule scenario (default: ray)")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--json", default=os.path.join(ROOT, ".cache", "timing", "bench-preload.json"))
    args = parser.parse_args()

    runs = {way: [] for way in WAYS}
    for trial in range(args.trials):
        for way in WAYS:
            runs[way].append(run_once(args.scenario, way))
            print("trial %d, %-7s the preload: %6.1f s wall, %6.1f s controller CPU" % (
                trial + 1, way, runs[way][-1]["wall_s"], runs[way][-1]["controller_cpu_s"]), flush=True)
    median = {way: {key: statistics.median(run[key] for run in runs[way]) for key in ("wall_s", "controller_cpu_s")}
              for way in WAYS}
    doc = {"scenario": args.scenario, "trials": args.trials, "runs": runs, "median": median,
           "with_over_without": {key: round(median["with"][key] / median["without"][key], 2)
                                 for key in ("wall_s", "controller_cpu_s")}}
    print("| way | wall (s, median) | controller CPU (s, median) |\n|---|---:|---:|")
    for way in WAYS:
        print("| %s the preload | %.1f | %.1f |" % (way, median[way]["wall_s"], median[way]["controller_cpu_s"]))
    print("with/without: wall %(wall_s).2f, controller CPU %(controller_cpu_s).2f" % doc["with_over_without"])
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=2)
        handle.write("\n")


if __name__ == "__main__":
    main()
