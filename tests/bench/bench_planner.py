# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Time the CPU binding planner on a large synthetic host (a script, not a test).

The host has 1024 CPUs: 8 NUMA nodes of 64 cores with 2 SMT threads each
(siblings are CPU pairs 2c, 2c+1), an L3 per NUMA node, 2 packages and 16
NPUs, two per node. Each run plans the default layout (llm_solution
workqueue placement, 4 workqueue cores per device) and a generic layout of
2 DP ranks x TP 8 with shared workqueues and housekeeping cores.

Run it from the collection root, i.e. from
``.../ansible_collections/aihost/llm_cluster``::

    python3 tests/bench/bench_planner.py            # 51 runs
    python3 tests/bench/bench_planner.py --runs 201

It prints one line with the median time of one ``plan()`` call in milliseconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time

_SUFFIX = os.path.join("ansible_collections", "aihost", "llm_cluster")


def _make_importable():
    """Put the directory above ``ansible_collections`` on sys.path (as tests/unit/conftest.py does)."""
    try:
        if importlib.util.find_spec("ansible_collections.aihost.llm_cluster") is not None:
            return
    except ImportError:
        pass
    for start in (os.environ.get("PWD"), os.getcwd(), os.path.dirname(os.path.abspath(__file__))):
        path = os.path.abspath(start or "/")
        while True:
            if path.endswith(os.sep + _SUFFIX):
                sys.path.insert(0, path[: -len(_SUFFIX) - 1] or os.sep)
                importlib.invalidate_caches()
                return
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    raise SystemExit("run this script from the collection root (.../ansible_collections/aihost/llm_cluster)")


def synthetic_topology(nodes=8, cores_per_node=64, devices_per_node=2):
    """The topology dict of the benchmark host."""
    cpus_per_node = cores_per_node * 2
    total = nodes * cpus_per_node
    numa_nodes = dict((str(node), list(range(node * cpus_per_node, (node + 1) * cpus_per_node))) for node in range(nodes))
    distances = {}
    for node in range(nodes):
        distances[str(node)] = dict(
            (str(other), 10 if other == node else (12 if other // (nodes // 2) == node // (nodes // 2) else 20))
            for other in range(nodes))
    devices = []
    for node in range(nodes):
        for slot in range(devices_per_node):
            devices.append({
                "index": node * devices_per_node + slot,
                "kind": "npu",
                "bus_id": "0000:%02x:00.0" % (node * 16 + slot + 1),
                "numa_node": node,
                "local_cpus": numa_nodes[str(node)],
                "source": "sysfs",
            })
    half = total // 2
    return {
        "cpus": list(range(total)),
        "nr_cpus": total,
        "allowed": list(range(total)),
        "allowed_source": "online",
        "isolated": [],
        "siblings": [[cpu, cpu + 1] for cpu in range(0, total, 2)],
        "numa_nodes": numa_nodes,
        "numa_distances": distances,
        "l3_groups": [numa_nodes[str(node)] for node in range(nodes)],
        "packages": {"0": list(range(half)), "1": list(range(half, total))},
        "clusters": [list(range(cpu, cpu + 8)) for cpu in range(0, total, 8)],
        "devices": devices,
        "errors": [],
    }


LAYOUTS = [
    {},
    {"tp_size": 8, "dp_ranks_per_node": 2, "dp_size": 4, "workqueue_mode": "shared", "housekeeping_cores": 4,
     "engine_cores": 2, "expert_parallel": True},
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=51, help="number of timed plan() calls per layout (default 51)")
    options = parser.parse_args(argv)
    _make_importable()
    from ansible_collections.aihost.llm_cluster.plugins.module_utils import _planner as planner

    topology = synthetic_topology()
    samples = []
    for layout in LAYOUTS:
        planner.plan(topology, layout)  # warm-up, and fail early on a broken layout
        for dummy in range(max(1, options.runs)):
            started = time.perf_counter()
            planner.plan(topology, layout)
            samples.append((time.perf_counter() - started) * 1000.0)
    print("planner: %d CPUs, %d devices, %d NUMA nodes: median %.2f ms per plan() over %d layouts x %d runs "
          "(min %.2f, max %.2f)"
          % (len(topology["cpus"]), len(topology["devices"]), len(topology["numa_nodes"]),
             statistics.median(samples), len(LAYOUTS), max(1, options.runs), min(samples), max(samples)))


if __name__ == "__main__":
    main()
