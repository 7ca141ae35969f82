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
module: affinity_apply
short_description: Pin the threads of running processes, IRQs and related kernel knobs to CPU sets
version_added: 0.1.0
description:
  - Binds every thread of every process matched by O(rules) to a CPU set with C(sched_setaffinity), optionally
    only the threads whose name matches O(rules[].threads). All matching processes are bound, not only the first.
  - Optionally points IRQs at CPU sets (O(irqs)), turns automatic NUMA balancing off or on (O(numa_balancing)) and
    writes C(IRQBALANCE_BANNED_CPULIST) into the irqbalance configuration (O(irqbalance_banned_cpus)).
  - Reads the current state first, computes the plan and changes only what differs; a second run reports no
    change. Before its first change to an object the original value is recorded in the versioned state file
    C(affinity_apply.json) under O(state_dir) (threads with PID, TID, start times and boot id), and never overwritten
    by a later run. After applying, it re-reads C(Cpus_allowed_list) of every thread and the other values and fails
    when they did not converge.
  - Threads that a bound process starts while the module runs inherit the affinity of the thread that starts them;
    threads started by a thread that was not bound yet are caught by a bounded re-scan (O(settle)).
  - With O(state=restored), puts back every recorded original whose owner is still the same. A process is restored
    only when its PID, start time (field 22 of C(/proc/<pid>/stat)) and boot id all match the record; others are
    reported in RV(skipped). Threads started after the binding, which inherited the bound set, get the original
    affinity of their process back.
options:
  rules:
    description:
      - Which processes to bind, and to which CPUs. Applied in order; when two rules match the same thread,
        the later one wins, so a broad rule can be followed by narrower ones for single threads.
      - Every selector given must match (they are combined with AND); at least one is required.
      - Ignored with O(state=restored).
    type: list
    elements: dict
    default: []
    suboptions:
      comm:
        description:
          - Python regular expression searched in the process name, C(/proc/<pid>/comm).
          - The kernel truncates that name to 15 characters, so C(VLLM::EngineCore_DP0) reads
            C(VLLM::EngineCor) and C(VLLM::Worker_DP1_TP3) reads C(VLLM::Worker_DP); match the truncated name
            (for example V(^VLLM::EngineCor)), and tell ranks apart with O(rules[].cmdline).
        type: str
      cmdline:
        description:
          - Python regular expression searched in the command line, C(/proc/<pid>/cmdline), whose arguments are
            joined by NUL characters (write V(\\x00) in the expression to match an argument boundary, for example
            V(--port\\x008000)).
          - Programs that rename themselves with C(setproctitle), as vLLM does, show their full title here
            (V(^VLLM::EngineCore_DP0\\b)).
        type: str
      parent_comm:
        description: Python regular expression searched in the name (C(comm)) of the parent process.
        type: str
      parent_cmdline:
        description:
          - Python regular expression searched in the command line of the parent process, as O(rules[].cmdline).
          - Tells apart workers whose own titles are alike, by the engine that started them (vLLM's
            C(VLLM::Worker) under C(VLLM::EngineCore_DP1)).
        type: str
      pid:
        description: Process ID.
        type: int
      unit:
        description:
          - systemd unit the process belongs to, as found in C(/proc/<pid>/cgroup) (any level of the cgroup path).
          - A name without a suffix gets C(.service) appended.
        type: str
      cpus:
        description: CPUs to bind to, as a list of CPU numbers or a cpulist string such as V(0-3,8).
        type: raw
        required: true
      threads:
        description:
          - Python regular expression searched in the thread name, C(/proc/<pid>/task/<tid>/comm) (also truncated
            to 15 characters). Only matching threads are bound; by default all threads are.
        type: str
      optional:
        description: When V(true), a rule that matches no process is reported in RV(unmatched_rules) instead of failing.
        type: bool
        default: false
  state:
    description: Apply the bindings (V(present)) or put back the recorded originals (V(restored)).
    type: str
    choices: [present, restored]
    default: present
  settle:
    description:
      - Most re-scan rounds after the first binding pass. Each round waits a short moment, lists the threads of
        every matched process again and binds those that are not bound yet; it stops after two consecutive
        rounds that found nothing to bind. V(0) disables the re-scan. With O(state=restored), the same rounds look
        for threads started with a bound set while the restore ran, and give them their process's original.
    type: int
    default: 5
  irqs:
    description:
      - IRQs to point at CPU sets through C(/proc/irq/<n>/smp_affinity_list). Later entries win for an IRQ
        matched twice.
    type: list
    elements: dict
    suboptions:
      irq:
        description:
          - An IRQ number, or a Python regular expression searched in the description that C(/proc/interrupts)
            prints after the per-CPU counters (chip, hardware IRQ, type and action names, separated by single spaces),
            for example V(sq_send_trigger_irq). Every matching IRQ is bound; it is an error when none matches.
        type: raw
        required: true
      cpus:
        description: CPUs as a list of CPU numbers or a cpulist string.
        type: raw
        required: true
  numa_balancing:
    description:
      - When V(false), sets C(/proc/sys/kernel/numa_balancing) to C(0); when V(true), to C(1) unless it is already on.
        Not touched when omitted. The setting lasts until reboot.
    type: bool
  irqbalance_banned_cpus:
    description:
      - CPUs irqbalance must not move IRQs to, written as C(IRQBALANCE_BANNED_CPULIST=<cpulist>) into
        O(irqbalance_config). A list of CPU numbers or a cpulist string; must not be empty.
      - irqbalance reads the file when it starts; restart it when RV(irqbalance_banned.changed) is true.
        C(IRQBALANCE_BANNED_CPULIST) needs irqbalance 1.8 or newer.
    type: raw
  irqbalance_config:
    description:
      - The irqbalance environment file.
      - Defaults to V(/etc/sysconfig/irqbalance) when the host has a C(/etc/sysconfig) directory (RHEL family, openEuler),
        else V(/etc/default/irqbalance) (Debian, Ubuntu).
    type: path
  force:
    description:
      - Bind even when a matched process runs vllm-ascend with its own CPU binding on. By default the module refuses,
        because both would fight over the same threads.
      - Detected are C(--additional-config) JSON with C("enable_cpu_binding" true) and C(--numa-bind) in the command line
        of the process or one of its ancestors, and, when C(/proc/<pid>/environ) is readable, an environment value holding
        such JSON or a variable named C(*ENABLE_CPU_BINDING) set to a true value.
    type: bool
    default: false
  proc_root:
    description:
      - Mount point of procfs. Only useful for tests; affinities are always set through the real kernel.
    type: path
    default: /proc
  state_dir:
    description: Directory of the state file C(affinity_apply.json).
    type: path
    default: /var/lib/llm_cluster
attributes:
  check_mode:
    description: Reports the bindings it would make and changes nothing, neither affinities nor files.
    support: full
  diff_mode:
    description: Shows the CPU lists of every bound thread (grouped per process and CPU set), IRQ and knob before and after.
    support: full
  platform:
    description: Linux hosts.
    support: full
    platforms: posix
notes:
  - >-
    vllm-ascend 0.18.0rc1 and later bind their worker threads by default on ARM hosts, without any flag in the
    command line. Start them with C(--additional-config '{"enable_cpu_binding": false}') when this module does the binding.
  - A thread is bound to the intersection of O(rules[].cpus) and its cgroup C(cpuset); when that differs from the
    requested set, the module reports the threads as not converged.
  - Affinities, IRQ affinities and C(numa_balancing) do not survive a reboot, and records of an earlier boot are dropped.
    The irqbalance file does, and its record is kept until restored.
  - Run with privileges that allow changing the affinity of the matched processes (root, or the owner of all of them).
seealso:
  - module: aihost.llm_cluster.npu_bind
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Bind each DP engine and its workers to the cores of its group
  aihost.llm_cluster.affinity_apply:
    rules:
      - cmdline: '^VLLM::EngineCore_DP0\b'
        cpus: 0-23
      - cmdline: '^VLLM::Worker_DP0_TP0\b'
        cpus: 24-31
      - cmdline: '^VLLM::Worker_DP0_TP0\b'
        threads: '^(acl_thread|release_thread)$'
        cpus: [31]

- name: Bind every engine process of a unit, keep NPU IRQs off the workers
  aihost.llm_cluster.affinity_apply:
    rules:
      - unit: llm-cluster-serve
        comm: '^VLLM::'
        cpus: 0-47
    irqs:
      - irq: 'sq_send_trigger_irq|cq_update_irq'
        cpus: [46, 47]
    numa_balancing: false
    irqbalance_banned_cpus: 0-47
  notify: Restart irqbalance

- name: Put every recorded affinity back
  aihost.llm_cluster.affinity_apply:
    state: restored
"""

RETURN = r"""
processes:
  description:
    - With O(state=present), one entry per matched process and rule whose threads were bound.
    - With O(state=restored), one entry per restored process.
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: Process ID.
      type: int
      sample: 4242
    comm:
      description: Process name (truncated to 15 characters by the kernel).
      type: str
      sample: VLLM::EngineCor
    rule:
      description: Index of the rule in O(rules) that bound these threads.
      type: int
      returned: with O(state=present)
      sample: 0
    cpus:
      description: The CPU list the threads are bound to (restored, the original affinity of the process).
      type: str
      sample: 0-23
    tids:
      description: Thread IDs bound to RV(processes[].cpus) (restored, the threads that were checked).
      type: list
      elements: int
      sample: [4242, 4250, 4251]
    changed_tids:
      description: Thread IDs whose affinity was (or in check mode would be) changed.
      type: list
      elements: int
      sample: [4242, 4250]
  sample:
    - pid: 4242
      comm: VLLM::EngineCor
      rule: 0
      cpus: 0-23
      tids: [4242, 4250, 4251]
      changed_tids: [4242, 4250, 4251]
unmatched_rules:
  description: Indices of O(rules) with O(rules[].optional=true) that matched no process.
  returned: always
  type: list
  elements: int
  sample: [2]
skipped:
  description:
    - Records that were not restored, with the reason (process or threads exited, PID reused, recorded in an earlier
      boot, write refused). Always empty with O(state=present).
    - Entries for processes have C(pid), C(comm) and C(tids); for IRQs C(irq); for the sysctl C(sysctl); for the
      irqbalance file C(path); all have C(reason).
  returned: always
  type: list
  elements: dict
  sample:
    - pid: 4242
      comm: VLLM::EngineCor
      tids: [4242, 4250]
      reason: PID 4242 was reused by another process (start time 99120, recorded 81234)
irqs:
  description: The IRQs handled, with their affinity before and after (in check mode, the planned one).
  returned: always
  type: list
  elements: dict
  contains:
    irq:
      description: IRQ number.
      type: int
      sample: 120
    name:
      description: Its description in C(/proc/interrupts), fields separated by single spaces.
      type: str
      sample: ITS-MSI 524288 Edge sq_send_trigger_irq
    before:
      description: CPU list of C(smp_affinity_list) before the run.
      type: str
      sample: 0-191
    after:
      description: CPU list after the run (in check mode, the planned one).
      type: str
      sample: 46-47
    changed:
      description: Whether the affinity was (or would be) changed.
      type: bool
      sample: true
  sample:
    - irq: 120
      name: ITS-MSI 524288 Edge sq_send_trigger_irq
      before: 0-191
      after: 46-47
      changed: true
numa_balancing:
  description: C(kernel.numa_balancing) before and after, V(null) when not handled.
  returned: always
  type: dict
  contains:
    before:
      description: Value before the run; V(null) when the kernel has no NUMA balancing.
      type: str
      sample: "1"
    after:
      description: Value after the run (in check mode, the planned one).
      type: str
      sample: "0"
    changed:
      description: Whether the value was (or would be) changed.
      type: bool
      sample: true
  sample: {before: "1", after: "0", changed: true}
irqbalance_banned:
  description:
    - The C(IRQBALANCE_BANNED_CPULIST) value in the irqbalance file before and after (V(null) for an absent line),
      V(null) when not handled.
  returned: always
  type: dict
  contains:
    path:
      description: The irqbalance environment file.
      type: str
      sample: /etc/sysconfig/irqbalance
    before:
      description: CPU list of the line before the run, V(null) when there was none.
      type: str
      sample: 0-23
    after:
      description: CPU list after the run (in check mode, the planned one); V(null) when the line was removed.
      type: str
      sample: 0-47
    changed:
      description: Whether the file was (or would be) changed; restart irqbalance when true.
      type: bool
      sample: true
  sample: {path: /etc/sysconfig/irqbalance, before: null, after: 0-47, changed: true}
settle_rounds:
  description: Number of re-scan rounds made after the first binding (or restoring) pass.
  returned: always
  type: int
  sample: 2
state_file:
  description: Path of the state file.
  returned: always
  type: str
  sample: /var/lib/llm_cluster/affinity_apply.json
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aihost.llm_cluster.plugins.module_utils._affinity_present import apply_present
from ansible_collections.aihost.llm_cluster.plugins.module_utils._affinity_restore import apply_restored
from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import run_change
from ansible_collections.aihost.llm_cluster.plugins.module_utils._procfs import ProcTable
from ansible_collections.aihost.llm_cluster.plugins.module_utils._statefile import read_boot_id


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            rules=dict(
                type="list",
                elements="dict",
                default=[],
                options=dict(
                    comm=dict(type="str"),
                    cmdline=dict(type="str"),
                    parent_comm=dict(type="str"),
                    parent_cmdline=dict(type="str"),
                    pid=dict(type="int"),
                    unit=dict(type="str"),
                    cpus=dict(type="raw", required=True),
                    threads=dict(type="str"),
                    optional=dict(type="bool", default=False),
                ),
                required_one_of=[("comm", "cmdline", "parent_comm", "parent_cmdline", "pid", "unit")],
            ),
            state=dict(type="str", choices=["present", "restored"], default="present"),
            settle=dict(type="int", default=5),
            irqs=dict(
                type="list",
                elements="dict",
                options=dict(
                    irq=dict(type="raw", required=True),
                    cpus=dict(type="raw", required=True),
                ),
            ),
            numa_balancing=dict(type="bool"),
            irqbalance_banned_cpus=dict(type="raw"),
            irqbalance_config=dict(type="path"),
            force=dict(type="bool", default=False),
            proc_root=dict(type="path", default="/proc"),
            state_dir=dict(type="path", default="/var/lib/llm_cluster"),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    params = module.params
    if params["settle"] < 0:
        module.fail_json(msg="settle must be 0 or more")
    table = ProcTable(params["proc_root"])
    boot_id = read_boot_id(params["proc_root"])
    apply = apply_present if params["state"] == "present" else apply_restored
    run_change(module, apply, params, table, boot_id, check_mode=module.check_mode, diff=module._diff,
               move=module.atomic_move)


if __name__ == "__main__":
    main()
