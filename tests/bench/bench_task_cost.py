# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What one Ansible task costs over the test harness's Docker connection, whatever it does.

Starts three containers of the base image (a sleeping process each, no systemd: nothing runs beside the
tasks), then runs one playbook of three kinds of trivial tasks against them, TASKS of each: a module that
runs on the node (``ansible.builtin.command: 'true'``), a task skipped by its condition, and a
``debug`` that runs on the controller only. Three ways, alternated, ``--trials`` times each:

* ``mitogen``: Mitogen's strategy with the interpreter named (``ansible_python_interpreter``), as the
  Molecule scenarios run;
* ``mitogen-auto``: the same with ``interpreter_python = auto_silent`` (``deploy.sh``'s ``ansible.cfg``);
* ``linear``: Ansible's own strategy with pipelining and the interpreter named, as ``deploy.sh`` runs.

Per way: the median wall time of each kind of task (profile_tasks, per task over the three hosts; the median
leaves out the first task, which starts the connections) and the
controller's CPU for the whole run (this process's children). Prints a table and writes it as JSON::

    python3 tests/bench/bench_task_cost.py --tasks 30 --trials 2 --json .cache/timing/bench-task-cost.json

It needs ``make collection`` (Mitogen's plugins under .cache/ansible_mitogen) and the base image; run it
with the machine to itself.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGE = os.environ.get("IMAGE", "aihost-llm-cluster/debian-systemd:bookworm")
NAMES = ["llmc-taskcost-1", "llmc-taskcost-2", "llmc-taskcost-3"]
KINDS = {"c": "module on the node (command)", "s": "skipped by its condition", "d": "debug (controller only)"}
WAYS = {
    "mitogen": {"strategy": "mitogen_linear", "interpreter": "/usr/bin/python3"},
    "mitogen-auto": {"strategy": "mitogen_linear", "interpreter": "auto_silent"},
    "linear": {"strategy": "linear", "interpreter": "/usr/bin/python3"},
}
TASK_RE = re.compile(r"^TASK \[(\w)\d+\]")
TIME_RE = re.compile(r"\((\d+):(\d+):([\d.]+)\)\s+\d+:\d+:[\d.]+ \*+\s*$")


def playbook(count):
    tasks = []
    for index in range(count):
        tasks.append({"name": "c%d" % index, "ansible.builtin.command": "true", "changed_when": False})
    for index in range(count):
        tasks.append({"name": "s%d" % index, "ansible.builtin.command": "true", "when": "inventory_hostname == 'none'"})
    for index in range(count):
        tasks.append({"name": "d%d" % index, "ansible.builtin.debug": {"msg": "x"}})
    return [{"hosts": "all", "gather_facts": False, "tasks": tasks}]


def durations(output):
    """Seconds of each task by kind: profile_tasks prints the previous task's time under each header."""
    kinds, times = [], []
    for line in output.splitlines():
        task = TASK_RE.match(line)
        if task:
            kinds.append(task.group(1))
        stamp = TIME_RE.search(line)
        if stamp:
            times.append(int(stamp.group(1)) * 3600 + int(stamp.group(2)) * 60 + float(stamp.group(3)))
    found = {kind: [] for kind in KINDS}
    # The first stamp follows the first header; stamp i+1 closes task i. The last task has none.
    for index in range(min(len(kinds), len(times)) - 1):
        found[kinds[index]].append(times[index + 1])
    return found


def run_way(way, path, work, count):
    inventory = os.path.join(work, "hosts-%s.json" % way)
    with open(inventory, "w", encoding="utf-8") as handle:
        json.dump({"all": {"hosts": {name: {} for name in NAMES},
                           "vars": {"ansible_connection": "docker",
                                    "ansible_python_interpreter": WAYS[way]["interpreter"]}}}, handle)
    env = dict(os.environ, ANSIBLE_STRATEGY=WAYS[way]["strategy"], ANSIBLE_PIPELINING="True",
               ANSIBLE_STRATEGY_PLUGINS=os.path.join(ROOT, ".cache", "ansible_mitogen", "plugins", "strategy"),
               ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks", PROFILE_TASKS_TASK_OUTPUT_LIMIT="all",
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="False", ANSIBLE_FORKS="8", ANSIBLE_TIMEOUT="60",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               ANSIBLE_CONFIG=os.path.join(work, "none.cfg"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    result = subprocess.run(["ansible-playbook", "-i", inventory, path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, env=env, check=False)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit("%s: ansible-playbook failed:\n%s" % (way, result.stdout[-3000:]))
    found = durations(result.stdout)
    return {"wall_s": round(wall, 2), "controller_cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2),
            "per_task_s": {kind: round(statistics.median(values), 3) for kind, values in found.items() if values},
            "tasks": {kind: len(values) for kind, values in found.items()}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=30, help="tasks of each kind (default 30)")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--json", default=os.path.join(ROOT, ".cache", "timing", "bench-task-cost.json"))
    args = parser.parse_args()
    runs = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "tasks.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(playbook(args.tasks), handle)
        open(os.path.join(work, "none.cfg"), "w", encoding="utf-8").close()
        subprocess.run(["docker", "rm", "-f"] + NAMES, capture_output=True, check=False)
        try:
            for name in NAMES:
                subprocess.run(["docker", "run", "--detach", "--name", name, "--entrypoint", "sleep", IMAGE, "infinity"],
                               capture_output=True, check=True)
            for _trial in range(args.trials):
                for way in WAYS:
                    runs[way].append(run_way(way, path, work, args.tasks))
        finally:
            subprocess.run(["docker", "rm", "-f"] + NAMES, capture_output=True, check=False)
    table = {}
    print("| way | %s | wall (s) | controller CPU (s) |" % " | ".join("%s, per task over 3 hosts (s)" % KINDS[k] for k in KINDS))
    print("|---|%s---:|---:|" % ("---:|" * len(KINDS)))
    for way, trials in runs.items():
        table[way] = {"per_task_s": {kind: round(statistics.median(t["per_task_s"][kind] for t in trials), 3) for kind in KINDS},
                      "wall_s": round(statistics.median(t["wall_s"] for t in trials), 1),
                      "controller_cpu_s": round(statistics.median(t["controller_cpu_s"] for t in trials), 1)}
        print("| %s | %s | %.1f | %.1f |" % (way, " | ".join("%.3f" % table[way]["per_task_s"][k] for k in KINDS),
                                             table[way]["wall_s"], table[way]["controller_cpu_s"]))
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as handle:
        json.dump({"tasks_per_kind": args.tasks, "trials": args.trials, "medians": table, "runs": runs}, handle, indent=2)
    print("JSON: %s" % args.json)


if __name__ == "__main__":
    main()
