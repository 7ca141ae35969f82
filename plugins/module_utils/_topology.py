# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""CPU and accelerator topology of a host, read from sysfs.

Every reader takes ``root`` (default ``/``): the directory that holds
``sys/`` (and ``proc/``), so unit tests point the readers at fake trees such as
``tests/fixtures/topologies/<name>/``. No AnsibleModule dependency; commands
are run through a ``run(argv) -> (rc, stdout, stderr)`` callable.

``read_topology()`` returns one JSON-serialisable dict (the ``topology``
returned by ``accelerator_facts``); CPU sets are sorted lists of ints and
mapping keys are strings, so the dict survives a JSON round trip unchanged::

    {
      "cpus": [0, 1, ...],            # online CPUs (/sys/devices/system/cpu/online)
      "nr_cpus": 192,                 # nr_cpu_ids: 1 + highest *possible* CPU; the width
                                      # of kernel cpumasks (/sys/devices/system/cpu/possible)
      "allowed": [...],               # online CPUs the caller may run on, see below
      "allowed_source": "sched_getaffinity",
      "isolated": [...],              # isolcpus= (/sys/devices/system/cpu/isolated)
      "siblings": [[0, 96], ...],     # online SMT threads of each core (thread_siblings_list),
                                      # every online CPU in exactly one group, by first CPU
      "numa_nodes": {"0": [...]},     # online CPUs of each NUMA node (node*/cpulist); a node
                                      # without CPUs (memory only) has []; a kernel without
                                      # NUMA gives {"0": all online CPUs}
      "numa_distances": {"0": {"0": 10, "1": 20}},   # node*/distance, {} if absent
      "l3_groups": [[...], ...],      # online CPUs sharing an L3 cache (cache/index*/ with
                                      # level 3, shared_cpu_list); [] when not exposed
      "packages": {"0": [...]},       # physical_package_id -> online CPUs
      "clusters": [[...], ...],       # online CPUs with the same (package, die_id, cluster_id);
                                      # [] when cluster_id is not exposed
      "devices": [                    # one per accelerator of the inventory, by index
        {"index": 0, "kind": "npu", "bus_id": "0000:c1:00.0",
         "numa_node": 6,              # None when unknown
         "local_cpus": [144, ...],    # CPUs close to the device, [] when unknown
         "source": "sysfs"}           # where local_cpus came from: sysfs, npu-smi,
      ],                              # nvidia-smi or none
      "errors": ["..."]               # problems that did not stop the reading
    }

Sources and precedence:

* Per-CPU data is read for online CPUs only (offline CPUs have no
  ``topology/`` directory): ``thread_siblings_list``, ``physical_package_id``,
  ``die_id``, ``cluster_id`` and ``core_id`` under
  ``/sys/devices/system/cpu/cpuN/topology/``. Missing files are tolerated:
  without ``thread_siblings_list`` siblings are the CPUs with the same
  (package, die, core_id); without ``core_id`` either, each CPU is its own core.
* ``allowed``: on the live host (``root`` is ``/``) it is
  ``os.sched_getaffinity(0)``, which already reflects cgroup cpusets and
  ``taskset``. Under any other root it is the cgroup v2
  ``sys/fs/cgroup/cpuset.cpus.effective``, else the cgroup v1
  ``sys/fs/cgroup/cpuset/cpuset.effective_cpus``, else all online CPUs
  (``allowed_source`` says which). Either way it is intersected with the online CPUs.
* Device locality: PCI sysfs (``/sys/bus/pci/devices/<bdf>/numa_node`` and
  ``local_cpulist``) wins; the vendor tool (the last field of each ``NPUn``
  row of ``npu-smi info -t topo``, the ``CPU Affinity``/``NUMA Affinity``
  columns of ``nvidia-smi topo -m``) fills what sysfs lacks. ``numa_node``
  ``-1`` means unknown; it is then taken from ``nvidia-smi`` or derived as
  the one node that holds all the device's online local CPUs. A known node
  without a ``local_cpulist`` gives the node's CPUs.
"""

from __future__ import annotations

import os
import re

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _cpuset as cpuset
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _npu_smi as npu_smi
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _nvidia_smi as nvidia_smi

CPU_DIR = "sys/devices/system/cpu"
NODE_DIR = "sys/devices/system/node"
PCI_DIR = "sys/bus/pci/devices"
CGROUP2_CPUS = "sys/fs/cgroup/cpuset.cpus.effective"
CGROUP1_CPUS = "sys/fs/cgroup/cpuset/cpuset.effective_cpus"
_NODE_RE = re.compile(r"^node(\d+)$")
_CACHE_INDEX_RE = re.compile(r"^index(\d+)$")
_SUMMARY_LIMIT = 300


class TopologyError(ValueError):
    """The CPU topology cannot be read at all (no online CPU list)."""


def _path(root, relative):
    return os.path.join(root or "/", relative)


def _read(root, relative):
    """Return the stripped content of ``root/relative``, None if it cannot be read."""
    try:
        with open(_path(root, relative), encoding="utf-8") as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(root, relative):
    text = _read(root, relative)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _read_cpulist(root, relative, errors=None):
    """Parse a cpulist file; None if absent, None plus an error if malformed."""
    text = _read(root, relative)
    if text is None:
        return None
    try:
        return cpuset.parse_cpulist(text)
    except ValueError as exc:
        if errors is not None:
            errors.append("%s: %s" % (_path(root, relative), exc))
        return None


def _partition(groups, universe):
    """Merge overlapping groups (restricted to ``universe``) into a partition.

    Returns sorted groups, ordered by their first CPU; CPUs of ``universe``
    missing from every group are left out.
    """
    parent = {}

    def find(cpu):
        while parent[cpu] != cpu:
            parent[cpu] = parent[parent[cpu]]
            cpu = parent[cpu]
        return cpu

    allowed = set(universe)
    for group in groups:
        members = [cpu for cpu in group if cpu in allowed]
        for cpu in members:
            parent.setdefault(cpu, cpu)
        for cpu in members[1:]:
            first, other = find(members[0]), find(cpu)
            if first != other:
                parent[max(first, other)] = min(first, other)
    merged = {}
    for cpu in parent:
        merged.setdefault(find(cpu), []).append(cpu)
    return sorted((sorted(group) for group in merged.values()), key=lambda group: group[0])


# ---------------------------------------------------------------------------
# CPUs
# ---------------------------------------------------------------------------

def read_online_cpus(root="/"):
    """Online CPUs from ``/sys/devices/system/cpu/online``; ``TopologyError`` if unreadable."""
    relative = CPU_DIR + "/online"
    text = _read(root, relative)
    if text is None:
        raise TopologyError("cannot read %s" % _path(root, relative))
    try:
        cpus = cpuset.parse_cpulist(text)
    except ValueError as exc:
        raise TopologyError("%s: %s" % (_path(root, relative), exc)) from None
    if not cpus:
        raise TopologyError("%s lists no CPU" % _path(root, relative))
    return cpus


def read_nr_cpus(root="/", online=None):
    """``nr_cpu_ids``: 1 + the highest CPU of ``/sys/devices/system/cpu/possible``.

    Falls back to 1 + the highest online CPU.
    """
    possible = _read_cpulist(root, CPU_DIR + "/possible")
    if possible:
        return possible[-1] + 1
    online = online if online is not None else read_online_cpus(root)
    return max(online) + 1


def read_isolated(root="/"):
    """CPUs isolated with ``isolcpus=`` (``/sys/devices/system/cpu/isolated``), [] if absent."""
    return _read_cpulist(root, CPU_DIR + "/isolated") or []


def read_allowed(root="/", online=None):
    """Return ``(cpus, source)``: the online CPUs the caller may run on.

    See the module docstring for the sources; ``source`` is
    ``sched_getaffinity``, ``cgroup2 <path>``, ``cgroup1 <path>`` or ``online``.
    """
    online = online if online is not None else read_online_cpus(root)
    online_set = set(online)
    if os.path.abspath(root or "/") == "/" and hasattr(os, "sched_getaffinity"):
        return sorted(online_set & set(os.sched_getaffinity(0))), "sched_getaffinity"
    for label, relative in (("cgroup2", CGROUP2_CPUS), ("cgroup1", CGROUP1_CPUS)):
        cpus = _read_cpulist(root, relative)
        if cpus is not None:
            return sorted(online_set & set(cpus)), "%s %s" % (label, "/" + relative)
    return list(online), "online"


def read_cpu_topology(root="/", cpus=None):
    """Per-CPU ``topology/`` data: ``{cpu: {"package", "die", "cluster", "core", "siblings"}}``.

    Values are ints (``siblings`` a list) or None when the file is missing.
    """
    cpus = cpus if cpus is not None else read_online_cpus(root)
    result = {}
    for cpu in cpus:
        base = "%s/cpu%d/topology/" % (CPU_DIR, cpu)
        result[cpu] = {
            "package": _read_int(root, base + "physical_package_id"),
            "die": _read_int(root, base + "die_id"),
            "cluster": _read_int(root, base + "cluster_id"),
            "core": _read_int(root, base + "core_id"),
            "siblings": _read_cpulist(root, base + "thread_siblings_list"),
        }
    return result


def sibling_groups(cpu_topology, online):
    """SMT sibling groups of the online CPUs (a partition of ``online``)."""
    groups = []
    by_core = {}
    for cpu in online:
        info = cpu_topology.get(cpu) or {}
        if info.get("siblings"):
            groups.append(sorted(set(info["siblings"]) | {cpu}))
        elif info.get("core") is not None:
            key = (info.get("package"), info.get("die"), info["core"])
            by_core.setdefault(key, []).append(cpu)
        else:
            groups.append([cpu])
    groups.extend(by_core.values())
    found = _partition(groups, online)
    covered = set(cpu for group in found for cpu in group)
    found.extend([cpu] for cpu in online if cpu not in covered)
    return sorted(found, key=lambda group: group[0])


def read_l3_groups(root="/", cpus=None):
    """Groups of online CPUs sharing an L3 cache; [] when sysfs exposes no L3.

    The cache of level 3 is found through ``cache/index*/level``; without
    ``level`` files ``cache/index3`` is taken to be the L3.
    """
    cpus = cpus if cpus is not None else read_online_cpus(root)
    groups = []
    for cpu in cpus:
        cache_dir = "%s/cpu%d/cache" % (CPU_DIR, cpu)
        try:
            names = os.listdir(_path(root, cache_dir))
        except OSError:
            continue
        indexes = sorted(int(match.group(1)) for match in map(_CACHE_INDEX_RE.match, names) if match)
        chosen = None
        levels = {index: _read_int(root, "%s/index%d/level" % (cache_dir, index)) for index in indexes}
        for index in indexes:
            if levels[index] == 3:
                chosen = index
                break
        if chosen is None and 3 in levels and levels[3] is None:
            chosen = 3
        if chosen is None:
            continue
        shared = _read_cpulist(root, "%s/index%d/shared_cpu_list" % (cache_dir, chosen))
        if shared:
            groups.append(sorted(set(shared) | {cpu}))
    return _partition(groups, cpus)


def read_numa_nodes(root="/", errors=None):
    """``{node: [cpus]}`` from ``/sys/devices/system/node/node*/cpulist`` (CPUs as listed).

    None when the kernel exposes no node directory (built without NUMA).
    """
    try:
        names = os.listdir(_path(root, NODE_DIR))
    except OSError:
        return None
    nodes = {}
    for name in names:
        match = _NODE_RE.match(name)
        if not match:
            continue
        cpus = _read_cpulist(root, "%s/%s/cpulist" % (NODE_DIR, name), errors)
        nodes[int(match.group(1))] = cpus or []
    return nodes or None


def read_numa_distances(root="/", nodes=None):
    """``{node: {node: distance}}`` from ``node*/distance``; {} when absent or inconsistent.

    The kernel prints one distance per online node, in node order.
    """
    nodes = sorted(nodes if nodes is not None else (read_numa_nodes(root) or {}))
    result = {}
    for node in nodes:
        text = _read(root, "%s/node%d/distance" % (NODE_DIR, node))
        if text is None:
            return {}
        try:
            values = [int(value) for value in text.split()]
        except ValueError:
            return {}
        if len(values) != len(nodes):
            return {}
        result[node] = dict(zip(nodes, values))
    return result


# ---------------------------------------------------------------------------
# Accelerators
# ---------------------------------------------------------------------------

def _pci_address(device):
    address = device.get("pci_address")
    if address:
        return address
    bus_id = device.get("bus_id")
    if not bus_id:
        return None
    try:
        return nvidia_smi.pci_address(bus_id)
    except ValueError:
        return None


def read_pci_locality(root, address, errors=None):
    """Return ``(numa_node, local_cpus)`` of a PCI device from sysfs.

    ``numa_node`` is None when absent or ``-1``; ``local_cpus`` None when absent.
    """
    base = "%s/%s/" % (PCI_DIR, address)
    node = _read_int(root, base + "numa_node")
    if node is not None and node < 0:
        node = None
    return node, _read_cpulist(root, base + "local_cpulist", errors)


def npu_tool_affinity(text, errors):
    """Parse ``npu-smi info -t topo``: ``({row number: cpus}, "NPU" or "Phy-ID")``."""
    try:
        topo = npu_smi.parse_topo(text)
    except ValueError as exc:
        errors.append("unparseable output: %s" % exc)
        return {}, None
    kind = "Phy-ID" if any(label.startswith("Phy-ID") for label in topo["labels"]) else "NPU"
    affinity = {}
    for number, cpus in topo["cpu_affinity"].items():
        if cpus:
            affinity[number] = cpuset.parse_cpulist(cpus)
    return affinity, kind


def gpu_tool_affinity(text, errors):
    """Parse ``nvidia-smi topo -m``: ``{gpu index: (cpus or None, numa node or None)}``."""
    try:
        topo = nvidia_smi.parse_topo_matrix(text)
    except ValueError as exc:
        errors.append("unparseable output: %s" % exc)
        return {}
    result = {}
    for index, cpus in topo["cpu_affinity"].items():
        numa = topo["numa_affinity"].get(index)
        result[index] = (cpuset.parse_cpulist(cpus) if cpus else None, numa if isinstance(numa, int) else None)
    return result


def _owning_node(cpus, numa_nodes):
    """The one NUMA node holding all of ``cpus`` (online ones), else None."""
    wanted = set(cpus)
    if not wanted:
        return None
    online = set(cpu for members in numa_nodes.values() for cpu in members)
    wanted &= online
    if not wanted:
        return None
    for node in sorted(numa_nodes):
        if wanted <= set(numa_nodes[node]):
            return node
    return None


def read_devices(root, accelerators, numa_nodes, tool_output=None, errors=None):
    """Locality of each accelerator of the ``accelerator_facts`` inventory.

    ``accelerators`` is that inventory (``type`` and ``devices`` with
    ``index``, ``pci_address``/``bus_id`` and, for NPUs, ``npu_id``/``phy_id``).
    ``tool_output`` is the stdout of ``npu-smi info -t topo`` (NPU) or
    ``nvidia-smi topo -m`` (GPU), or None. ``numa_nodes`` maps int node ids to
    online CPUs. Returns the ``devices`` list of the topology dict.
    """
    errors = errors if errors is not None else []
    accelerators = accelerators or {}
    kind = accelerators.get("type")
    devices = sorted(accelerators.get("devices") or [], key=lambda device: device.get("index", 0))
    npu_affinity, npu_label = {}, None
    gpu_affinity = {}
    if tool_output is not None and kind == "npu":
        npu_affinity, npu_label = npu_tool_affinity(tool_output, errors)
    elif tool_output is not None and kind == "gpu":
        gpu_affinity = gpu_tool_affinity(tool_output, errors)

    result = []
    for device in devices:
        address = _pci_address(device)
        node, local, source = None, None, "none"
        if address:
            node, local = read_pci_locality(root, address, errors)
            if local is not None:
                source = "sysfs"
        tool_cpus, tool_node = None, None
        if kind == "npu":
            key = device.get("phy_id") if npu_label == "Phy-ID" else device.get("npu_id", device.get("index"))
            tool_cpus = npu_affinity.get(key)
        elif kind == "gpu":
            tool_cpus, tool_node = gpu_affinity.get(device.get("index"), (None, None))
        if local is None and tool_cpus is not None:
            local, source = tool_cpus, "npu-smi" if kind == "npu" else "nvidia-smi"
        if node is None and tool_node is not None:
            node = tool_node
        if node is None and local:
            node = _owning_node(local, numa_nodes)
        if node is not None and local is None and node in numa_nodes and numa_nodes[node]:
            local, source = list(numa_nodes[node]), "sysfs"
        result.append({
            "index": device.get("index"),
            "kind": kind,
            "bus_id": address,
            "numa_node": node,
            "local_cpus": local or [],
            "source": source if local else "none",
        })
    return result


def devices_missing_locality(root, accelerators):
    """True when some device of the inventory has no ``local_cpulist`` in sysfs."""
    for device in (accelerators or {}).get("devices") or []:
        address = _pci_address(device)
        if not address or _read(root, "%s/%s/local_cpulist" % (PCI_DIR, address)) is None:
            return True
    return False


def topology_command(accelerators):
    """The vendor command printing device CPU affinity, or None."""
    accelerators = accelerators or {}
    tool = accelerators.get("tool")
    if not tool:
        return None
    if accelerators.get("type") == "npu":
        return [tool, "info", "-t", "topo"]
    if accelerators.get("type") == "gpu":
        return [tool, "topo", "-m"]
    return None


# ---------------------------------------------------------------------------
# Whole topology
# ---------------------------------------------------------------------------

def _str_keys(mapping):
    return dict((str(key), value) for key, value in sorted(mapping.items()))


def read_topology(root="/", accelerators=None, tool_output=None, errors=None):
    """Read the whole topology dict (schema in the module docstring).

    Raises ``TopologyError`` only when the online CPU list cannot be read;
    other problems are appended to ``errors`` (returned as ``errors``).
    """
    errors = list(errors or [])
    online = read_online_cpus(root)
    online_set = set(online)
    allowed, allowed_source = read_allowed(root, online)
    cpu_topology = read_cpu_topology(root, online)

    raw_nodes = read_numa_nodes(root, errors)
    if raw_nodes is None:
        numa_nodes = {0: list(online)}
        distances = {}
    else:
        numa_nodes = dict((node, [cpu for cpu in cpus if cpu in online_set]) for node, cpus in raw_nodes.items())
        distances = read_numa_distances(root, sorted(raw_nodes))

    packages = {}
    clusters = {}
    for cpu in online:
        info = cpu_topology[cpu]
        package = info["package"] if info["package"] is not None else 0
        packages.setdefault(package, []).append(cpu)
        if info["cluster"] is not None:
            clusters.setdefault((package, info["die"], info["cluster"]), []).append(cpu)

    return {
        "cpus": online,
        "nr_cpus": read_nr_cpus(root, online),
        "allowed": allowed,
        "allowed_source": allowed_source,
        "isolated": [cpu for cpu in read_isolated(root) if cpu in online_set],
        "siblings": sibling_groups(cpu_topology, online),
        "numa_nodes": _str_keys(numa_nodes),
        "numa_distances": dict((str(node), _str_keys(row)) for node, row in sorted(distances.items())),
        "l3_groups": read_l3_groups(root, online),
        "packages": _str_keys(packages),
        "clusters": sorted(clusters.values(), key=lambda group: group[0]),
        "devices": read_devices(root, accelerators, numa_nodes, tool_output, errors),
        "errors": errors,
    }


def _summary(stdout, stderr):
    text = " / ".join(line.strip() for line in (stderr or stdout or "").splitlines() if line.strip())
    text = text or "no output"
    if len(text) > _SUMMARY_LIMIT:
        text = text[: _SUMMARY_LIMIT - 3] + "..."
    return text


def gather_topology(run, accelerators=None, root="/"):
    """Read the topology, running the vendor tool only when sysfs lacks a device's locality.

    ``run(argv) -> (rc, stdout, stderr)`` runs ``npu-smi info -t topo`` or
    ``nvidia-smi topo -m`` (the ``tool`` of the inventory). A failing tool is
    reported in ``errors``.
    """
    errors = []
    tool_output = None
    argv = topology_command(accelerators)
    if argv and devices_missing_locality(root, accelerators):
        shown = " ".join([os.path.basename(argv[0])] + argv[1:])
        try:
            rc, stdout, stderr = run(argv)
        except OSError as exc:
            errors.append("%s could not be run: %s" % (shown, exc))
        else:
            if rc == 0:
                tool_output = stdout
            else:
                errors.append("%s failed (rc=%s): %s" % (shown, rc, _summary(stdout, stderr)))
    return read_topology(root, accelerators, tool_output, errors)
