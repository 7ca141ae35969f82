#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: accelerator_facts
short_description: Gather the Ascend NPU or NVIDIA GPU inventory of a host
version_added: 0.1.0
description:
  - Detects the accelerators of a host and returns them as the C(llm_cluster_accelerators) fact.
  - If C(npu-smi) is found the host is an Ascend NPU host; otherwise, if C(nvidia-smi) is found, an NVIDIA GPU host;
    otherwise the type is V(none).
  - For NPUs it runs C(npu-smi info), C(npu-smi info -m) and C(npu-smi info -t board -i <first NPU> -c 0), reads the
    driver and firmware C(version.info) files as fallbacks and finds the CANN toolkit version under O(ascend_root).
  - For GPUs it runs C(nvidia-smi --query-gpu=... --format=csv,noheader,nounits).
  - It lists the C(davinciN) or C(nvidiaN) device nodes under O(dev_root) and checks them against the devices the tool reports.
  - The module never changes the host. Problems found while probing (a tool that fails, output that cannot be parsed,
    device nodes without a device) are reported in RV(accelerators.errors) instead of failing the task.
  - With O(topology=true) it also reads the CPU topology from sysfs (online, allowed and isolated CPUs, SMT siblings,
    NUMA nodes, L3 groups, packages) and the CPU locality of each accelerator (PCI sysfs C(numa_node) and
    C(local_cpulist), else the affinity printed by C(npu-smi info -t topo) or C(nvidia-smi topo -m), which are run
    only when sysfs lacks it).
  - With O(layout) it also computes a CPU binding plan for the vLLM processes and the devices' kernel work
    (workqueues, IRQs) from that topology; a layout that does not fit the host fails the task with a message saying
    what to change.
author:
  - aihost.llm_cluster contributors (@aihost)
attributes:
  check_mode:
    support: full
    description: Can run in check mode and return the same facts as without it; the module never changes the host.
  diff_mode:
    support: none
    description: The module changes nothing, so there is no diff.
  facts:
    support: full
    description: Returns an C(ansible_facts) dictionary that updates the host facts.
  platform:
    support: full
    platforms: posix
    description: Target OS/families that can be operated against.
options:
  npu_smi_path:
    description:
      - Path of the C(npu-smi) binary.
      - When not set, C(npu-smi) is searched in E(PATH) and in V(/usr/local/bin), V(/usr/local/sbin) and V(/usr/bin).
      - When set to a path that is not an executable file, this is reported in RV(accelerators.errors)
        and the host is probed as if C(npu-smi) was absent.
    type: str
  nvidia_smi_path:
    description:
      - Path of the C(nvidia-smi) binary, used only when no C(npu-smi) was found.
      - When not set, C(nvidia-smi) is searched in E(PATH) and in V(/usr/local/bin), V(/usr/local/sbin) and V(/usr/bin).
      - When set to a path that is not an executable file, this is reported in RV(accelerators.errors).
    type: str
  ascend_root:
    description:
      - Installation root of the Ascend driver, firmware and CANN toolkit
        (C(driver/version.info), C(firmware/version.info), C(ascend-toolkit/latest)).
    type: path
    default: /usr/local/Ascend
  dev_root:
    description:
      - Directory holding the device nodes. Only useful for tests.
    type: path
    default: /dev
  topology:
    description:
      - Also return the CPU topology of the host and the CPU locality of each accelerator in RV(topology).
    type: bool
    default: false
  layout:
    description:
      - When set, also return in RV(plan) the CPUs each vLLM engine and worker process, each device's workqueue and
        IRQs, and the housekeeping tasks should use. The topology is read as for O(topology=true).
      - "Keys, all optional: C(devices) (device indices, default all), C(tp_size) (default the number of devices),
        C(dp_ranks_per_node) (default devices / tp_size), C(dp_start_rank) (0), C(dp_size) (dp_start_rank +
        dp_ranks_per_node), C(expert_parallel) (false), C(workqueue_cores) (4 on NPU hosts, 0 otherwise),
        C(workqueue_mode) (V(separate) or V(shared)), C(housekeeping_cores) (0), C(engine_cores) (1),
        C(worker_cores) (null, an equal share of the device's NUMA node), C(llm_solution_compat) (true on NPU hosts:
        the workqueue cores of llm_solution's C(fine-grained-bind-cann.py)), C(strict_locality) (false) and
        C(isolated_for_workers) (false)."
      - An empty dictionary plans with every default.
      - Unknown keys, and layouts the host cannot hold, make the module fail with a message saying what to change.
    type: dict
  sysfs_root:
    description:
      - Directory holding C(sys/) for reading the topology. Only useful for tests.
      - When it is not V(/), the CPUs the module may use are read from C(sys/fs/cgroup/cpuset.cpus.effective)
        (cgroup v2) or C(sys/fs/cgroup/cpuset/cpuset.effective_cpus) (cgroup v1) under it instead of from the
        CPU affinity of the module process.
    type: path
    default: /
notes:
  - The NPU C(index) is the chip logic id from C(npu-smi info -m), the number that E(ASCEND_RT_VISIBLE_DEVICES) refers to.
    When the mapping cannot be read the position in C(npu-smi info) is used instead.
  - C(npu-smi) prints its Bus-Id in upper case and C(nvidia-smi) with an 8-digit domain; RV(accelerators.devices[].pci_address)
    is the lower-case sysfs form of both.
  - RV(topology.allowed) is the CPU affinity of the module process, which reflects the cpuset of the user Ansible
    connects as, not necessarily that of the inference container.
"""

EXAMPLES = r"""
- name: Gather the accelerator inventory
  aihost.llm_cluster.accelerator_facts:

- name: Require eight healthy NPUs
  ansible.builtin.assert:
    that:
      - ansible_facts['llm_cluster_accelerators']['type'] == 'npu'
      - ansible_facts['llm_cluster_accelerators']['count'] == 8
      - ansible_facts['llm_cluster_accelerators']['devices'] | rejectattr('health', 'equalto', 'OK') | list | length == 0
    fail_msg: "Expected 8 healthy NPUs, found: {{ ansible_facts['llm_cluster_accelerators'] }}"

- name: Use an npu-smi outside the search path
  aihost.llm_cluster.accelerator_facts:
    npu_smi_path: /usr/local/sbin/npu-smi
  register: accelerator_inventory

- name: Show problems found while probing
  ansible.builtin.debug:
    var: accelerator_inventory.accelerators.errors
  when: accelerator_inventory.accelerators.errors | length > 0

- name: Read the CPU topology and plan the binding of two DP ranks of TP 4
  aihost.llm_cluster.accelerator_facts:
    topology: true
    layout:
      tp_size: 4
      dp_ranks_per_node: 2
      dp_size: 4
      dp_start_rank: 0
      expert_parallel: true
  register: accelerator_plan

- name: Show the workqueue cores of each device
  ansible.builtin.debug:
    msg: "{{ accelerator_plan.plan.devices | items2dict(key_name='index', value_name='workqueue_cores') }}"
"""

RETURN = r"""
accelerators:
  description:
    - The accelerator inventory of the host. The same dictionary is returned as the
      C(llm_cluster_accelerators) fact.
  returned: always
  type: dict
  contains:
    type:
      description: Kind of accelerator found.
      returned: always
      type: str
      choices: [npu, gpu, none]
      sample: npu
    tool:
      description: Path of the C(npu-smi) or C(nvidia-smi) binary used, V(null) when none was found.
      returned: always
      type: str
      sample: /usr/local/bin/npu-smi
    count:
      description: Number of devices reported by the tool (chips for multi-chip NPUs).
      returned: always
      type: int
      sample: 8
    devices:
      description: One entry per device, sorted by RV(accelerators.devices[].index).
      returned: always
      type: list
      elements: dict
      contains:
        index:
          description: Device number used by the runtime (NPU chip logic id, GPU C(nvidia-smi) index).
          returned: always
          type: int
          sample: 0
        name:
          description: Device model as printed by the tool.
          returned: always
          type: str
          sample: 910B4
        health:
          description:
            - V(OK), or the word the tool reports (V(Warning), V(Alarm), V(Critical), V(UNKNOWN) for NPUs).
            - For GPUs V(OK) unless C(nvidia-smi) prints an error value for one of the queried fields, which is then given here.
          returned: always
          type: str
          sample: OK
        bus_id:
          description: PCI address as printed by the tool.
          returned: always
          type: str
          sample: "0000:C1:00.0"
        pci_address:
          description: PCI address in the lower-case sysfs form, V(null) if the tool printed none.
          returned: always
          type: str
          sample: "0000:c1:00.0"
        memory_total_mb:
          description: Device memory in MiB (HBM for NPUs, DDR on NPUs without HBM).
          returned: always
          type: int
          sample: 32768
        memory_used_mb:
          description: Device memory in use in MiB.
          returned: always
          type: int
          sample: 2654
        memory_kind:
          description: V(HBM), or V(DDR) on NPUs without HBM (Ascend 310P, Atlas 300I Duo).
          returned: when RV(accelerators.type) is V(npu)
          type: str
          sample: HBM
        temp_c:
          description: Temperature in degrees Celsius, V(null) if not reported.
          returned: always
          type: int
          sample: 33
        power_w:
          description: Power draw in watts, V(null) if not reported (second die of an A3 NPU).
          returned: always
          type: float
          sample: 87.2
        npu_id:
          description: NPU id (the C(-i) argument of C(npu-smi)).
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: 0
        chip_id:
          description: Chip id within the NPU (the C(-c) argument of C(npu-smi)).
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: 0
        logic_id:
          description: Chip logic id from C(npu-smi info -m), V(null) when the mapping could not be read.
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: 0
        phy_id:
          description: Chip physical id, printed by C(npu-smi info) only on multi-chip NPUs (Atlas A3); otherwise V(null).
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: null
        hbm_total_mb:
          description: HBM size in MiB.
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: 32768
        hbm_used_mb:
          description: HBM in use in MiB.
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: 2654
        aicore_pct:
          description: AI Core utilisation in percent.
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: 0
        device_node:
          description: The C(davinciN) device node of the chip, V(null) when it does not exist.
          returned: when RV(accelerators.type) is V(npu)
          type: str
          sample: /dev/davinci0
        uuid:
          description: GPU UUID.
          returned: when RV(accelerators.type) is V(gpu)
          type: str
          sample: GPU-3b8a6c1e-1c2d-4f5a-9e8b-0a1b2c3d4e5f
    product:
      description:
        - NPU product told from the chip family and the chips per card (V(Atlas A2), V(Atlas A3), V(Atlas 300I Duo)).
        - V(null) for GPUs and when not known.
      returned: always
      type: str
      sample: Atlas 300I Duo
    family:
      description:
        - NPU chip family from the board's PCI device id (C(npu-smi info -t board)), else from the chip name.
        - V(null) for GPUs and when not known.
      returned: always
      type: str
      sample: Ascend 310P
    chip_name:
      description: NPU chip name as printed by C(npu-smi info) (several are joined with commas); V(null) for GPUs.
      returned: always
      type: str
      sample: 310P3
    chips_per_card:
      description: Most chips one NPU card (C(npu-smi) NPU id) holds; 2 on Atlas A3 and 300I Duo. V(null) for GPUs.
      returned: always
      type: int
      sample: 2
    memory_kind:
      description: V(HBM) or V(DDR), the device memory of the NPUs; V(null) for GPUs.
      returned: always
      type: str
      sample: DDR
    driver_version:
      description:
        - Driver version, V(null) when unknown.
        - For NPUs from the C(npu-smi info) header, falling back to C(driver/version.info); for GPUs from C(nvidia-smi).
      returned: always
      type: str
      sample: 25.0.rc1.1
    firmware_version:
      description:
        - NPU firmware version from C(npu-smi info -t board -i <first NPU> -c 0), falling back to C(firmware/version.info).
        - V(null) for GPUs and when unknown.
      returned: always
      type: str
      sample: 7.7.0.1.231
    cann_version:
      description: Version of the CANN toolkit found under O(ascend_root); V(null) for GPUs and when not installed.
      returned: always
      type: str
      sample: 8.3.RC2
    device_nodes:
      description:
        - Existing C(davinciN) (NPU) or C(nvidiaN) (GPU) device nodes under O(dev_root), in numeric order.
        - When no tool is found, any node of either kind that exists.
      returned: always
      type: list
      elements: str
      sample: [/dev/davinci0, /dev/davinci1]
    errors:
      description: Human-readable problems found while probing. They never make the module fail.
      returned: always
      type: list
      elements: str
      sample:
        - "npu-smi info failed (rc=187): DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3) / dcmi module initialize failed. ret is -8005"
topology:
  description:
    - CPU topology of the host and CPU locality of the accelerators. CPU sets are sorted lists of CPU numbers.
  returned: when O(topology=true)
  type: dict
  contains:
    cpus:
      description: Online CPUs.
      returned: always
      type: list
      elements: int
      sample: [0, 1, 2, 3]
    nr_cpus:
      description: Number of CPU ids of the kernel (1 + the highest possible CPU), the width of kernel CPU masks.
      returned: always
      type: int
      sample: 192
    allowed:
      description: Online CPUs the module process may run on.
      returned: always
      type: list
      elements: int
      sample: [0, 1, 2, 3]
    allowed_source:
      description: Where RV(topology.allowed) comes from.
      returned: always
      type: str
      sample: sched_getaffinity
    isolated:
      description: Online CPUs isolated with C(isolcpus=).
      returned: always
      type: list
      elements: int
      sample: []
    siblings:
      description: SMT threads of each core (every online CPU in exactly one list).
      returned: always
      type: list
      elements: list
      sample: [[0, 112], [1, 113]]
    numa_nodes:
      description: Online CPUs of each NUMA node, keyed by node number as a string.
      returned: always
      type: dict
      sample: {"0": [0, 1], "1": [2, 3]}
    numa_distances:
      description: NUMA distances between nodes, keyed by node numbers as strings; empty when not exposed.
      returned: always
      type: dict
      sample: {"0": {"0": 10, "1": 21}, "1": {"0": 21, "1": 10}}
    l3_groups:
      description: Online CPUs sharing an L3 cache; empty when not exposed.
      returned: always
      type: list
      elements: list
      sample: [[0, 1, 2, 3]]
    packages:
      description: Online CPUs of each physical package, keyed by package id as a string.
      returned: always
      type: dict
      sample: {"0": [0, 1, 2, 3]}
    clusters:
      description: Online CPUs sharing a package, die and cluster id; empty when not exposed.
      returned: always
      type: list
      elements: list
      sample: [[0, 1, 2, 3]]
    devices:
      description: CPU locality of each accelerator of RV(accelerators.devices).
      returned: always
      type: list
      elements: dict
      sample:
        - {index: 0, kind: npu, bus_id: "0000:c1:00.0", numa_node: 6, local_cpus: [144, 145], source: sysfs}
    errors:
      description: Problems found while reading the topology (a failing or unparseable vendor tool).
      returned: always
      type: list
      elements: str
      sample: []
plan:
  description:
    - CPU binding plan computed from RV(topology) and O(layout). Housekeeping, each device's worker cores, each
      device's workqueue cores (each NUMA node's when O(layout) sets C(workqueue_mode) to V(shared)) and each engine's cores
      never overlap.
  returned: when O(layout) is set
  type: dict
  contains:
    layout:
      description: The layout with every key filled in.
      returned: always
      type: dict
      sample: {devices: [0, 1], tp_size: 2, dp_ranks_per_node: 1, workqueue_cores: 4, workqueue_mode: separate}
    housekeeping:
      description: CPUs reserved for the OS and background tasks.
      returned: always
      type: list
      elements: int
      sample: []
    devices:
      description:
        - Per device its NUMA node, local CPUs, worker cores, workqueue cores, IRQ cores and the workqueue mask to
          write to C(/sys/devices/virtual/workqueue/dev<N>_sq_send_wq/cpumask) (V(null) without workqueue cores).
      returned: always
      type: list
      elements: dict
      sample:
        - {index: 0, numa_node: 6, local_cpus: [144, 145], worker_cores: [145, 146], workqueue_cores: [164, 165, 166, 167],
           irq_cores: [164, 165, 166, 167], workqueue_mask: "000000f0,00000000,00000000,00000000,00000000,00000000"}
    groups:
      description:
        - Per DP rank the engine process name, the regular expression its title matches and its cores, and per TP
          rank the worker process name, device and cores.
        - A worker's C(match) is the regular expression its title matches (vLLM leaves out the parts of groups of
          one rank, so a dense model's DP ranks all have workers titled C(VLLM::Worker)); C(parent_match) is its
          engine's, since the engine starts its workers.
      returned: always
      type: list
      elements: dict
      sample:
        - {dp_rank: 0, engine: "VLLM::EngineCore", engine_match: "^VLLM::EngineCore(?![A-Za-z0-9_])", engine_cores: [144],
           workers: [{tp_rank: 0, name: "VLLM::Worker_TP0", device: 0, cores: [145, 146],
                      match: "^VLLM::Worker(?:_DP\\d+)?(?:_PP\\d+)?(?:_PCP\\d+)?_TP0(?:_DCP\\d+)?(?:_EP\\d+)?(?![A-Za-z0-9_])",
                      parent_match: "^VLLM::EngineCore(?![A-Za-z0-9_])"}]}
    nr_cpus:
      description: Width of the kernel CPU masks, as RV(topology.nr_cpus).
      returned: always
      type: int
      sample: 192
    warnings:
      description: Compromises made by the plan (cores taken from another NUMA node, unused isolated CPUs...).
      returned: always
      type: list
      elements: str
      sample: []
ansible_facts:
  description: Facts set by the module.
  returned: always
  type: dict
  contains:
    llm_cluster_accelerators:
      description: Same dictionary as RV(accelerators).
      returned: always
      type: dict
      sample: {type: none, tool: null, count: 0, devices: [], driver_version: null, firmware_version: null,
               cann_version: null, device_nodes: [], errors: []}
    llm_cluster_cpu_topology:
      description: Same dictionary as RV(topology).
      returned: when O(topology=true)
      type: dict
      sample: {}
    llm_cluster_cpu_plan:
      description: Same dictionary as RV(plan).
      returned: when O(layout) is set
      type: dict
      sample: {}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aihost.llm_cluster.plugins.module_utils._accelerators import (
    TOOL_SEARCH_DIRS,
    gather_accelerators,
)
from ansible_collections.aihost.llm_cluster.plugins.module_utils._planner import PlanError, plan
from ansible_collections.aihost.llm_cluster.plugins.module_utils._topology import TopologyError, gather_topology


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            npu_smi_path=dict(type="str"),
            nvidia_smi_path=dict(type="str"),
            ascend_root=dict(type="path", default="/usr/local/Ascend"),
            dev_root=dict(type="path", default="/dev"),
            topology=dict(type="bool", default=False),
            layout=dict(type="dict"),
            sysfs_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )


def find_tool(module, option, name, errors):
    """Return the tool given by ``option`` or found on the host, else None."""
    path = module.params[option]
    if path:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        errors.append("%s=%s is not an executable file" % (option, path))
        return None
    return module.get_bin_path(name, required=False, opt_dirs=TOOL_SEARCH_DIRS)


def main():
    module = build_module()
    module.run_command_environ_update = dict(LANG="C", LC_ALL="C", LC_MESSAGES="C", LC_CTYPE="C", LANGUAGE="C")

    errors = []
    npu_smi = find_tool(module, "npu_smi_path", "npu-smi", errors)
    nvidia_smi = None if npu_smi else find_tool(module, "nvidia_smi_path", "nvidia-smi", errors)

    def run(argv):
        return module.run_command(argv)

    inventory = gather_accelerators(
        run,
        npu_smi_path=npu_smi,
        nvidia_smi_path=nvidia_smi,
        ascend_root=module.params["ascend_root"],
        dev_root=module.params["dev_root"],
        errors=errors,
    )
    result = dict(changed=False, accelerators=inventory, ansible_facts=dict(llm_cluster_accelerators=inventory))
    if module.params["topology"] or module.params["layout"] is not None:
        try:
            topology = gather_topology(run, inventory, root=module.params["sysfs_root"])
        except TopologyError as exc:
            module.fail_json(msg="cannot read the CPU topology: %s" % exc, accelerators=inventory)
        if module.params["topology"]:
            result["topology"] = topology
            result["ansible_facts"]["llm_cluster_cpu_topology"] = topology
        if module.params["layout"] is not None:
            try:
                cpu_plan = plan(topology, module.params["layout"])
            except PlanError as exc:
                module.fail_json(msg=str(exc), accelerators=inventory, topology=topology)
            result["plan"] = cpu_plan
            result["ansible_facts"]["llm_cluster_cpu_plan"] = cpu_plan
    module.exit_json(**result)


if __name__ == "__main__":
    main()
