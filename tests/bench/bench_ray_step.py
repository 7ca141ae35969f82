# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""CPU of one idempotent Ray step (molecule/ray/ray.yml) on the controller and on the nodes.

Needs the containers of the Molecule ``ray`` scenario after a converge. Runs the Ray step the way
``molecule/ray/tests/test_ray.py`` does (Molecule's environment: Mitogen's strategy, pipelining),
alternating the variants so that a busy machine slows them alike, and reports per variant the
median wall time, the controller's CPU (``ansible-playbook`` and its workers, from
``getrusage(RUSAGE_CHILDREN)``) and the nodes' CPU (their cgroups' ``cpuacct.usage``):

- ``all collections``: ``ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=True``, Mitogen lists the ``ansible``
  package's hundred collections in every worker that runs a collection module;
- ``linked only``: ``False``, the collections ``make collection`` links (Molecule's setting).

Then, on each node, the CPU of what the role's install step would run on a converged node: pip
with the role's arguments (resolves against the wheelhouse, installs nothing) against reading the
versions from the venv's metadata (the nodes' idle Ray is counted in both). Last, how long
stopping a worker's unit takes while its head runs and while it is stopped (then the Ray step
brings the cluster back). Prints tables and writes JSON::

    molecule converge -s ray
    python3 tests/bench/bench_ray_step.py --runs 3 --json .cache/timing/bench-ray-step.json
    molecule destroy -s ray
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import resource
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODES = ["ray-master1", "ray-worker1", "ray-worker2"]
VENV = "/opt/llm_cluster/ray"
VARIANTS = {"all collections": {"ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "True"},
            "linked only": {"ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "False"}}
READ_VERSIONS = ("import glob\nfor name in ('ray', 'grpcio'):\n"
                 "    print(name, glob.glob('%s/lib/python*/site-packages/%%s-*.dist-info' %% name))" % VENV)


def ephemeral_dir():
    """The ray scenario's Molecule directory (inventory, ansible.cfg) whose inventory is newest."""
    found = glob.glob(os.path.expanduser("~/.ansible/tmp/molecule.*.ray/inventory/ansible_inventory.yml"))
    if not found:
        raise SystemExit("no converged ray scenario: run `molecule converge -s ray` first")
    return os.path.dirname(os.path.dirname(max(found, key=os.path.getmtime)))


def molecule_env(ephemeral):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": os.path.join(ephemeral, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".cache", "collections"),
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_STRATEGY_PLUGINS": os.path.join(ROOT, ".cache", "ansible_mitogen", "plugins", "strategy"),
        "ANSIBLE_STRATEGY": "mitogen_linear",
        "LLM_CLUSTER_ARTIFACTS": os.path.join(ephemeral, "artifacts"),
        "LLM_CLUSTER_FAKES": os.path.join(ROOT, "tests", "fakes"),
        "PY_COLORS": "0", "ANSIBLE_FORCE_COLOR": "0",
    })
    return env


def container_ids():
    """{node name: container id}, in the order of NODES."""
    out = subprocess.run(["docker", "inspect", "--format", "{{.Id}}"] + NODES, check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    return dict(zip(NODES, out.split()))


def nodes_cpu(ids):
    """Seconds of CPU the nodes' containers used so far (cgroup v1 cpuacct, or v2 cpu.stat)."""
    total = 0.0
    for cid in ids:
        v1 = glob.glob("/sys/fs/cgroup/cpu*/docker/%s/cpuacct.usage" % cid)
        if v1:
            with open(v1[0]) as handle:
                total += int(handle.read()) / 1e9
            continue
        v2 = glob.glob("/sys/fs/cgroup/**/docker-%s.scope/cpu.stat" % cid, recursive=True)
        if not v2:
            raise SystemExit("no cgroup CPU counter for container %s" % cid[:12])
        with open(v2[0]) as handle:
            total += int(re.search(r"^usage_usec (\d+)", handle.read(), re.M).group(1)) / 1e6
    return total


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ray_step(env, ids, clean=True):
    before_ctl, before_nodes, start = children_cpu(), nodes_cpu(ids.values()), time.monotonic()
    result = subprocess.run(["ansible-playbook", "-i", os.path.join(os.path.dirname(env["ANSIBLE_CONFIG"]), "inventory"),
                             os.path.join(ROOT, "molecule", "ray", "ray.yml")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    wall = time.monotonic() - start
    changed = [int(n) for n in re.findall(r"^\S+\s+: ok=\d+\s+changed=(\d+)", result.stdout, re.M)]
    if result.returncode != 0 or len(changed) != len(NODES) or (clean and any(changed)):
        raise SystemExit("the Ray step did not run clean (rc %d, changed %s):\n%s" % (result.returncode, changed, result.stdout[-3000:]))
    return {"wall_s": round(wall, 2), "controller_cpu_s": round(children_cpu() - before_ctl, 2),
            "nodes_cpu_s": round(nodes_cpu(ids.values()) - before_nodes, 2)}


def node_cpu_of(node, argv, ids):
    before = nodes_cpu([ids[node]])
    subprocess.run(["docker", "exec", node] + argv, check=True, stdout=subprocess.DEVNULL)
    return round(nodes_cpu([ids[node]]) - before, 3)


def stop_time(node):
    """Seconds `systemctl stop` of a worker's unit takes (its raylet's shutdown)."""
    start = time.monotonic()
    subprocess.run(["docker", "exec", node, "systemctl", "stop", "llm-cluster-ray-worker"], check=True)
    return round(time.monotonic() - start, 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="Ray steps per variant (alternated)")
    parser.add_argument("--ray-version", default=None, help="default: the role's pin")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    ephemeral = ephemeral_dir()
    env = molecule_env(ephemeral)
    ids = container_ids()
    version = args.ray_version
    if not version:
        with open(os.path.join(ROOT, "roles", "ray_cluster", "defaults", "main.yml")) as handle:
            version = re.search(r'^ray_cluster_version: "([^"]+)"', handle.read(), re.M).group(1)

    ray_step(env, ids, clean=False)  # warm the page cache and settle the cluster; not counted
    runs = {name: [] for name in VARIANTS}
    for dummy in range(args.runs):
        for name, extra in VARIANTS.items():
            runs[name].append(ray_step(dict(env, **extra), ids))
    summary = {name: {key: statistics.median(run[key] for run in items) for key in items[0]} for name, items in runs.items()}

    pip = ["%s/bin/pip" % VENV, "install", "--no-index", "--find-links", "/wheelhouse", "--no-compile", "--quiet",
           "ray[client]==%s" % version, "grpcio"]
    install = {"pip, nothing to install": [], "venv metadata read": []}
    for node in NODES:
        install["pip, nothing to install"].append(node_cpu_of(node, pip, ids))
        install["venv metadata read"].append(node_cpu_of(node, ["python3", "-c", READ_VERSIONS], ids))

    stops = {"head running": stop_time("ray-worker1"), "head stopped": None}
    subprocess.run(["docker", "exec", "ray-master1", "systemctl", "stop", "llm-cluster-ray-head"], check=True)
    try:
        stops["head stopped"] = stop_time("ray-worker2")
    finally:
        subprocess.run(["docker", "exec", "ray-master1", "systemctl", "start", "llm-cluster-ray-head"], check=True)
        ray_step(env, ids, clean=False)  # the role brings the workers back

    print("| variant | wall (s) | controller CPU (s) | nodes' CPU (s) |")
    print("|---|---:|---:|---:|")
    for name, values in summary.items():
        print("| %s | %.1f | %.1f | %.1f |" % (name, values["wall_s"], values["controller_cpu_s"], values["nodes_cpu_s"]))
    base, new = summary["all collections"]["controller_cpu_s"], summary["linked only"]["controller_cpu_s"]
    print("controller CPU, linked only / all collections: %.2f" % (new / base))
    print("| per node, on a converged node | CPU (s), median of %d nodes |" % len(NODES))
    print("|---|---:|")
    for name, values in install.items():
        print("| %s | %.2f |" % (name, statistics.median(values)))
    print("| `systemctl stop llm-cluster-ray-worker` | seconds |")
    print("|---|---:|")
    for name, value in stops.items():
        print("| %s | %.1f |" % (name, value))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"runs": runs, "median": summary, "install_per_node": install, "worker_stop_s": stops,
                       "ray_version": version}, handle, indent=2)


if __name__ == "__main__":
    main()
