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
        rounds that found nothing to bind. V(0) disables the re-scan.
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
  description: Number of re-scan rounds made after the first binding pass.
  returned: always
  type: int
  sample: 2
state_file:
  description: Path of the state file.
  returned: always
  type: str
  sample: /var/lib/llm_cluster/affinity_apply.json
"""

import json
import os
import re
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.aihost.llm_cluster.plugins.module_utils._cpuset import format_cpulist, parse_cpulist
from ansible_collections.aihost.llm_cluster.plugins.module_utils._statefile import (
    StateFileError,
    drop_entry,
    drop_other_boots,
    identity_mismatch,
    load_state,
    parse_stat,
    read_boot_id,
    record_original,
    save_state,
    state_path,
)

KIND = "affinity_apply"
SETTLE_DELAY = 0.05
BANNED_KEY = "IRQBALANCE_BANNED_CPULIST"
BANNED_LINE_RE = re.compile(r"^\s*(?:export\s+)?%s=(.*)$" % BANNED_KEY)
TRUE_WORDS = ("1", "true", "yes", "on")
CPU_BINDING_JSON_RE = re.compile(r"""["']?enable_cpu_binding["']?\s*:\s*(?:true|["']true["']|1)\b""", re.IGNORECASE)
MAX_LISTED = 20


class ModuleError(Exception):
    """A problem that makes the module fail; carries the message."""


# ---------------------------------------------------------------------------
# procfs access
# ---------------------------------------------------------------------------

def read_bytes(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def read_text(path):
    data = read_bytes(path)
    return None if data is None else data.decode("utf-8", "replace")


class ProcTable:
    """Cached reads of ``<proc_root>/<pid>/...`` for one scan."""

    def __init__(self, proc_root):
        self.root = proc_root
        self._stat = {}
        self._comm = {}

    def path(self, *parts):
        return os.path.join(self.root, *[str(part) for part in parts])

    def pids(self):
        try:
            names = os.listdir(self.root)
        except OSError as exc:
            raise ModuleError("cannot list %s: %s" % (self.root, to_native(exc)))
        return sorted(int(name) for name in names if name.isdigit())

    def stat(self, pid):
        if pid not in self._stat:
            text = read_text(self.path(pid, "stat"))
            try:
                self._stat[pid] = parse_stat(text) if text else None
            except ValueError:
                self._stat[pid] = None
        return self._stat[pid]

    def comm(self, pid):
        if pid not in self._comm:
            text = read_text(self.path(pid, "comm"))
            if text is None:
                stat = self.stat(pid)
                text = stat["comm"] if stat else ""
            self._comm[pid] = text.rstrip("\n")
        return self._comm[pid]

    def cmdline(self, pid):
        data = read_bytes(self.path(pid, "cmdline")) or b""
        return data.rstrip(b"\0").decode("utf-8", "replace")

    def environ(self, pid):
        data = read_bytes(self.path(pid, "environ"))
        if data is None:
            return None
        env = {}
        for item in data.split(b"\0"):
            key, sep, value = item.partition(b"=")
            if sep:
                env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        return env

    def cgroup_parts(self, pid):
        text = read_text(self.path(pid, "cgroup")) or ""
        parts = set()
        for line in text.splitlines():
            fields = line.split(":", 2)
            if len(fields) == 3:
                parts.update(part for part in fields[2].split("/") if part)
        return parts

    def tids(self, pid):
        try:
            return sorted(int(name) for name in os.listdir(self.path(pid, "task")) if name.isdigit())
        except OSError:
            return []

    def thread_comm(self, pid, tid):
        text = read_text(self.path(pid, "task", tid, "comm"))
        return None if text is None else text.rstrip("\n")

    def thread_start(self, pid, tid):
        text = read_text(self.path(pid, "task", tid, "stat"))
        try:
            return parse_stat(text)["start_time"] if text else None
        except ValueError:
            return None

    def allowed_list(self, pid, tid):
        """``Cpus_allowed_list`` of a thread, as a sorted list; None when the thread is gone."""
        text = read_text(self.path(pid, "task", tid, "status"))
        if text is None:
            return None
        for line in text.splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return parse_cpulist(line.split(":", 1)[1])
        return None

    def ancestors(self, pid):
        chain = []
        seen = set()
        stat = self.stat(pid)
        while stat and stat["ppid"] > 0 and stat["ppid"] not in seen:
            seen.add(stat["ppid"])
            chain.append(stat["ppid"])
            stat = self.stat(stat["ppid"])
        return chain


def get_affinity(tid):
    """Current affinity of a thread as a sorted list; None when it is gone."""
    try:
        return sorted(os.sched_getaffinity(tid))
    except (ProcessLookupError, PermissionError):
        return None
    except OSError:
        return None


def set_affinity(tid, cpus):
    """Set the affinity of a thread; returns None, "gone" or an error text."""
    try:
        os.sched_setaffinity(tid, cpus)
    except ProcessLookupError:
        return "gone"
    except OSError as exc:
        return to_native(exc)
    return None


# ---------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------

def normalize_cpus(value, what):
    """CPU list from a list of ints, an int or a cpulist string; raises ModuleError."""
    try:
        if isinstance(value, bool):
            raise ValueError("expected CPU numbers")
        if isinstance(value, int):
            cpus = [value]
        elif isinstance(value, str):
            cpus = parse_cpulist(value)
        elif isinstance(value, (list, tuple)):
            cpus = []
            for item in value:
                if isinstance(item, bool):
                    raise ValueError("invalid CPU number %r" % (item,))
                if isinstance(item, str):
                    cpus.extend(parse_cpulist(item))
                else:
                    cpus.append(int(item))
        else:
            raise ValueError("expected a list of CPU numbers or a cpulist string, got %r" % (value,))
    except (TypeError, ValueError) as exc:
        raise ModuleError("%s: %s" % (what, to_native(exc)))
    cpus = sorted(set(cpus))
    if not cpus:
        raise ModuleError("%s: the CPU set is empty" % what)
    if cpus[0] < 0:
        raise ModuleError("%s: CPU %d is negative" % (what, cpus[0]))
    return cpus


def compile_regex(pattern, what):
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ModuleError("%s: invalid regular expression %r: %s" % (what, pattern, to_native(exc)))


def compile_rules(rules):
    compiled = []
    for index, rule in enumerate(rules):
        what = "rules[%d]" % index
        if all(rule.get(key) is None for key in ("comm", "cmdline", "parent_comm", "pid", "unit")):
            raise ModuleError("%s needs a selector: one of comm, cmdline, parent_comm, pid or unit" % what)
        unit = rule.get("unit")
        if unit and "." not in unit:
            unit += ".service"
        compiled.append(dict(
            index=index,
            comm=compile_regex(rule["comm"], what + ".comm") if rule.get("comm") is not None else None,
            cmdline=compile_regex(rule["cmdline"], what + ".cmdline") if rule.get("cmdline") is not None else None,
            parent_comm=compile_regex(rule["parent_comm"], what + ".parent_comm") if rule.get("parent_comm") is not None else None,
            pid=rule.get("pid"),
            unit=unit,
            threads=compile_regex(rule["threads"], what + ".threads") if rule.get("threads") is not None else None,
            cpus=normalize_cpus(rule["cpus"], what + ".cpus"),
            optional=rule.get("optional", False),
        ))
    return compiled


# ---------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------

def rule_matches(table, rule, pid):
    if table.stat(pid) is None:
        return False
    if rule["comm"] is not None and not rule["comm"].search(table.comm(pid)):
        return False
    if rule["parent_comm"] is not None:
        ppid = table.stat(pid)["ppid"]
        if not ppid or not rule["parent_comm"].search(table.comm(ppid)):
            return False
    if rule["unit"] is not None and rule["unit"] not in table.cgroup_parts(pid):
        return False
    if rule["cmdline"] is not None and not rule["cmdline"].search(table.cmdline(pid)):
        return False
    return True


def match_processes(table, rules, excluded):
    """{pid: {"comm", "start_time", "rules": [rule, ...]}} and the unmatched optional rule indices."""
    matched = {}
    unmatched = []
    all_pids = None
    for rule in rules:
        if rule["pid"] is not None:
            candidates = [rule["pid"]]
        else:
            if all_pids is None:
                all_pids = table.pids()
            candidates = all_pids
        hits = [pid for pid in candidates if pid not in excluded and rule_matches(table, rule, pid)]
        if not hits:
            if rule["optional"]:
                unmatched.append(rule["index"])
                continue
            raise ModuleError("rules[%d] matches no running process%s" % (rule["index"], describe_rule(rule)))
        for pid in hits:
            entry = matched.setdefault(pid, dict(comm=table.comm(pid), start_time=table.stat(pid)["start_time"], rules=[]))
            entry["rules"].append(rule)
    return matched, unmatched


def describe_rule(rule):
    parts = []
    for key in ("comm", "cmdline", "parent_comm"):
        if rule[key] is not None:
            parts.append("%s=%r" % (key, rule[key].pattern))
    if rule["pid"] is not None:
        parts.append("pid=%d" % rule["pid"])
    if rule["unit"] is not None:
        parts.append("unit=%s" % rule["unit"])
    return " (%s)" % ", ".join(parts) if parts else ""


def desired_rule(proc, thread_comm_reader):
    """Return a function tid -> rule (the last matching rule) or None."""
    rules = proc["rules"]
    needs_comm = any(rule["threads"] is not None for rule in rules)

    def decide(tid):
        name = thread_comm_reader(tid) if needs_comm else None
        chosen = None
        for rule in rules:
            if rule["threads"] is None or (name is not None and rule["threads"].search(name)):
                chosen = rule
        return chosen
    return decide


def engine_binding(table, pid):
    """Text naming where vllm-ascend's own CPU binding was found for ``pid``, or None."""
    for owner in [pid] + table.ancestors(pid):
        args = table.cmdline(owner).split("\0")
        for position, arg in enumerate(args):
            if arg == "--numa-bind" or arg.startswith("--numa-bind="):
                if arg == "--numa-bind" or arg.split("=", 1)[1].lower() in TRUE_WORDS:
                    return "--numa-bind in the command line of PID %d" % owner
            value = None
            for flag in ("--additional-config", "--additional_config"):
                if arg == flag and position + 1 < len(args):
                    value = args[position + 1]
                elif arg.startswith(flag + "="):
                    value = arg.split("=", 1)[1]
            if value is not None and config_enables_binding(value):
                return "%s %s in the command line of PID %d" % ("--additional-config", value, owner)
    env = table.environ(pid)
    for key, value in sorted((env or {}).items()):
        if key.upper().endswith("ENABLE_CPU_BINDING") and value.strip().lower() in TRUE_WORDS:
            return "%s=%s in the environment of PID %d" % (key, value, pid)
        if "enable_cpu_binding" in value and CPU_BINDING_JSON_RE.search(value):
            return "%s in the environment of PID %d" % (key, pid)
    return None


def config_enables_binding(text):
    try:
        config = json.loads(text)
    except ValueError:
        return bool(CPU_BINDING_JSON_RE.search(text))
    if not isinstance(config, dict):
        return False
    value = config.get("enable_cpu_binding")
    if isinstance(value, str):
        return value.strip().lower() in TRUE_WORDS
    return value is True or value == 1


# ---------------------------------------------------------------------------
# Diff helpers
# ---------------------------------------------------------------------------

def thread_lines(pid, comm, pairs):
    """Diff lines for the (tid, cpus) pairs of one process, grouped by CPU set."""
    groups = {}
    for tid, cpus in pairs:
        groups.setdefault(format_cpulist(cpus) if cpus is not None else "(gone)", []).append(tid)
    return ["pid %d (%s) threads %s: %s" % (pid, comm, format_cpulist(tids), cpus)
            for cpus, tids in sorted(groups.items(), key=lambda item: min(item[1]))]


# ---------------------------------------------------------------------------
# IRQs, sysctl, irqbalance file
# ---------------------------------------------------------------------------

def parse_interrupts(text):
    """[(irq, description)] for the numbered lines of /proc/interrupts."""
    lines = text.splitlines()
    if not lines:
        return []
    ncpu = len(lines[0].split())
    result = []
    for line in lines[1:]:
        head, sep, rest = line.partition(":")
        if not sep or not head.strip().isdigit():
            continue
        fields = rest.split()
        counters = 0
        while counters < min(ncpu, len(fields)) and fields[counters].isdigit():
            counters += 1
        result.append((int(head.strip()), " ".join(fields[counters:])))
    return result


def plan_irqs(proc_root, irqs):
    interrupts = None
    desired = {}
    for index, spec in enumerate(irqs or []):
        what = "irqs[%d]" % index
        cpus = normalize_cpus(spec["cpus"], what + ".cpus")
        selector = spec["irq"]
        if isinstance(selector, bool) or not isinstance(selector, (int, str)):
            raise ModuleError("%s.irq: expected an IRQ number or a regular expression, got %r" % (what, selector))
        if interrupts is None:
            text = read_text(os.path.join(proc_root, "interrupts"))
            if text is None:
                raise ModuleError("cannot read %s" % os.path.join(proc_root, "interrupts"))
            interrupts = parse_interrupts(text)
        names = dict(interrupts)
        if isinstance(selector, int) or selector.strip().isdigit():
            number = int(selector)
            if not os.path.exists(os.path.join(proc_root, "irq", str(number), "smp_affinity_list")):
                raise ModuleError("%s: IRQ %d does not exist (no %s)" % (
                    what, number, os.path.join(proc_root, "irq", str(number), "smp_affinity_list")))
            desired[number] = (cpus, names.get(number, ""))
            continue
        pattern = compile_regex(selector, what + ".irq")
        hits = [(number, name) for number, name in interrupts if pattern.search(name)]
        if not hits:
            raise ModuleError("%s: no IRQ in %s matches %r" % (what, os.path.join(proc_root, "interrupts"), selector))
        for number, name in hits:
            desired[number] = (cpus, name)
    rows = []
    for number in sorted(desired):
        cpus, name = desired[number]
        path = os.path.join(proc_root, "irq", str(number), "smp_affinity_list")
        text = read_text(path)
        if text is None:
            raise ModuleError("cannot read %s" % path)
        before = parse_cpulist(text)
        rows.append(dict(irq=number, name=name, path=path, before=before, after=cpus, changed=before != cpus))
    return rows


def irqbalance_default(config_root="/etc"):
    if os.path.isdir(os.path.join(config_root, "sysconfig")):
        return os.path.join(config_root, "sysconfig", "irqbalance")
    return os.path.join(config_root, "default", "irqbalance")


def read_banned(path):
    """(file exists, value of the last IRQBALANCE_BANNED_CPULIST line or None, text)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return False, None, ""
    except OSError as exc:
        raise ModuleError("cannot read %s: %s" % (path, to_native(exc)))
    value = None
    for line in text.splitlines():
        match = BANNED_LINE_RE.match(line)
        if match:
            value = match.group(1).strip().strip("\"'")
    return True, value, text


def banned_text(text, value):
    """``text`` with the IRQBALANCE_BANNED_CPULIST line set to ``value`` (removed when None)."""
    out = []
    placed = False
    for line in text.splitlines():
        if BANNED_LINE_RE.match(line):
            if value is not None and not placed:
                out.append("%s=%s" % (BANNED_KEY, value))
                placed = True
            continue
        out.append(line)
    if value is not None and not placed:
        out.append("%s=%s" % (BANNED_KEY, value))
    return "\n".join(out) + ("\n" if out else "")


def write_file(module, path, text):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise ModuleError("cannot write %s: %s does not exist (is irqbalance installed?)" % (path, directory))
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        if not os.path.exists(path):
            os.chmod(tmp, 0o644)
        module.atomic_move(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def same_cpulist(left, right):
    if left is None or right is None:
        return left == right
    try:
        return parse_cpulist(left) == parse_cpulist(right)
    except ValueError:
        return left == right


def write_proc(path, value):
    with open(path, "w", encoding="ascii") as handle:
        handle.write(value)


# ---------------------------------------------------------------------------
# present
# ---------------------------------------------------------------------------

class Binder:
    """Applies the rules to the matched processes and keeps what it saw."""

    def __init__(self, module, table, matched, boot_id):
        self.module = module
        self.table = table
        self.matched = matched
        self.boot_id = boot_id
        self.deciders = dict((pid, desired_rule(proc, self._comm_reader(pid))) for pid, proc in matched.items())
        self.threads = {}      # (pid, tid) -> {"rule", "before", "after"}
        self.changed = set()   # (pid, tid) changed
        self.errors = []

    def _comm_reader(self, pid):
        return lambda tid: self.table.thread_comm(pid, tid)

    def scan(self):
        """Return the list of (pid, tid, rule, current) that need a change, updating self.threads."""
        todo = []
        for pid in sorted(self.matched):
            for tid in self.table.tids(pid):
                rule = self.deciders[pid](tid)
                if rule is None:
                    continue
                current = get_affinity(tid)
                if current is None:
                    continue
                key = (pid, tid)
                seen = self.threads.get(key)
                if seen is None:
                    seen = self.threads[key] = dict(rule=rule, before=current, after=current)
                seen["rule"] = rule
                if current != rule["cpus"]:
                    todo.append((pid, tid, rule, current))
        return todo

    def record(self, doc, todo):
        for pid, tid, rule, current in todo:
            proc = self.matched[pid]
            identity = dict(pid=pid, start_time=proc["start_time"], boot_id=self.boot_id, comm=proc["comm"])
            proc_key = "proc:%d" % pid
            if proc_key not in doc["entries"]:
                main = get_affinity(pid)
                record_original(doc, proc_key, dict(identity, cpus=main if main is not None else current, applied=[]))
            applied = doc["entries"][proc_key].setdefault("applied", [])
            if rule["cpus"] not in applied:
                applied.append(rule["cpus"])
            entry = dict(identity, tid=tid, tid_start_time=self.table.thread_start(pid, tid), cpus=current)
            record_original(doc, "task:%d:%d" % (pid, tid), entry)
            doc["entries"]["task:%d:%d" % (pid, tid)]["applied"] = rule["cpus"]

    def bind(self, todo):
        for pid, tid, rule, current in todo:
            error = set_affinity(tid, rule["cpus"])
            if error == "gone":
                self.threads.pop((pid, tid), None)
                continue
            if error:
                self.errors.append("pid %d tid %d -> %s: %s" % (pid, tid, format_cpulist(rule["cpus"]), error))
                continue
            self.changed.add((pid, tid))

    def verify(self):
        """Re-read Cpus_allowed_list; returns the (pid, tid, rule, current) that did not converge."""
        wrong = []
        for pid in sorted(self.matched):
            for tid in self.table.tids(pid):
                rule = self.deciders[pid](tid)
                if rule is None:
                    continue
                allowed = self.table.allowed_list(pid, tid)
                if allowed is None:
                    continue
                key = (pid, tid)
                seen = self.threads.setdefault(key, dict(rule=rule, before=allowed, after=allowed))
                seen["rule"] = rule
                seen["after"] = allowed
                if allowed != rule["cpus"]:
                    wrong.append((pid, tid, rule, allowed))
            # Threads that exited since they were seen are no longer reported.
            live = set(self.table.tids(pid))
            for key in [key for key in self.threads if key[0] == pid and key[1] not in live]:
                del self.threads[key]
        return wrong

    def results(self):
        grouped = {}
        for (pid, tid), seen in sorted(self.threads.items()):
            rule = seen["rule"]
            entry = grouped.setdefault((pid, rule["index"]), dict(
                pid=pid, comm=self.matched[pid]["comm"], rule=rule["index"], cpus=format_cpulist(rule["cpus"]),
                tids=[], changed_tids=[]))
            entry["tids"].append(tid)
            if (pid, tid) in self.changed:
                entry["changed_tids"].append(tid)
        return [grouped[key] for key in sorted(grouped)]

    def diff_lines(self, which):
        lines = []
        for pid in sorted(self.matched):
            pairs = [(tid, seen[which]) for (owner, tid), seen in sorted(self.threads.items()) if owner == pid]
            lines.extend(thread_lines(pid, self.matched[pid]["comm"], pairs))
        return lines


def excluded_pids(table):
    """This module's own process and its ancestors, which rules must never bind."""
    own = os.getpid()
    excluded = set([own])
    try:
        excluded.update(table.ancestors(own))
    except ModuleError:
        pass
    return excluded


def plan_numa(proc_root, wanted):
    if wanted is None:
        return None
    path = os.path.join(proc_root, "sys/kernel/numa_balancing")
    text = read_text(path)
    if text is None:
        if not wanted:
            # A kernel without NUMA balancing has it off already.
            return dict(path=path, before=None, after=None, changed=False, value=None)
        raise ModuleError("cannot read %s: the kernel has no automatic NUMA balancing" % path)
    before = text.strip()
    if wanted:
        after = before if before not in ("0", "") else "1"
    else:
        after = "0"
    return dict(path=path, before=before, after=after, changed=before != after, value=after)


def plan_banned(params):
    value = params["irqbalance_banned_cpus"]
    if value is None:
        return None
    cpus = normalize_cpus(value, "irqbalance_banned_cpus")
    path = params["irqbalance_config"] or irqbalance_default()
    existed, before, text = read_banned(path)
    after = format_cpulist(cpus)
    return dict(path=path, before=before, after=after, changed=not same_cpulist(before, after), existed=existed, text=text)


def apply_present(module, params, table, boot_id):
    rules = compile_rules(params["rules"] or [])
    matched, unmatched = match_processes(table, rules, excluded_pids(table)) if rules else ({}, [])
    if not params["force"]:
        found = []
        for pid in sorted(matched):
            where = engine_binding(table, pid)
            if where:
                found.append("PID %d (%s): %s" % (pid, matched[pid]["comm"], where))
        if found:
            raise ModuleError(
                "refusing to bind: vllm-ascend binds CPUs itself (enable_cpu_binding) in %s. Start the engine with "
                "--additional-config '{\"enable_cpu_binding\": false}' or set force=true" % "; ".join(found[:MAX_LISTED]))

    irq_rows = plan_irqs(params["proc_root"], params["irqs"])
    numa = plan_numa(params["proc_root"], params["numa_balancing"])
    banned = plan_banned(params)

    binder = Binder(module, table, matched, boot_id)
    todo = binder.scan()
    before_lines = binder.diff_lines("before")
    before_lines += ["irq %d (%s): %s" % (row["irq"], row["name"], format_cpulist(row["before"])) for row in irq_rows]
    if numa:
        before_lines.append("kernel.numa_balancing: %s" % numa["before"])
    if banned:
        before_lines.append("%s %s: %s" % (banned["path"], BANNED_KEY, banned["before"] if banned["before"] is not None else "(unset)"))

    something = bool(todo) or any(row["changed"] for row in irq_rows) or bool(numa and numa["changed"]) or bool(banned and banned["changed"])
    result = dict(changed=something, unmatched_rules=unmatched, skipped=[], settle_rounds=0,
                  state_file=state_path(params["state_dir"], KIND))

    if module.check_mode or not something:
        for pid, tid, rule, current in todo:
            binder.threads[(pid, tid)]["after"] = rule["cpus"]
            binder.changed.add((pid, tid))
        after_lines = binder.diff_lines("after")
    else:
        try:
            doc = load_state(params["state_dir"], KIND, boot_id)
            drop_other_boots(doc, boot_id)
            binder.record(doc, todo)
            for row in irq_rows:
                if row["changed"]:
                    record_original(doc, "irq:%d" % row["irq"], dict(
                        irq=row["irq"], name=row["name"], cpus=row["before"], boot_id=boot_id))
            if numa and numa["changed"]:
                record_original(doc, "sysctl:kernel.numa_balancing", dict(value=numa["before"], boot_id=boot_id))
            if banned and banned["changed"]:
                record_original(doc, "irqbalance:%s" % banned["path"], dict(
                    path=banned["path"], existed=banned["existed"], value=banned["before"]))
            save_state(params["state_dir"], KIND, doc, boot_id)
        except StateFileError as exc:
            raise ModuleError("nothing was changed: %s" % to_native(exc))

        binder.bind(todo)
        rounds = 0
        quiet = 0
        while matched and rounds < params["settle"] and quiet < 2:
            time.sleep(SETTLE_DELAY)
            rounds += 1
            todo = binder.scan()
            if todo:
                quiet = 0
                binder.record(doc, todo)
                save_state(params["state_dir"], KIND, doc, boot_id)
                binder.bind(todo)
            else:
                quiet += 1
        result["settle_rounds"] = rounds

        problems = list(binder.errors)
        apply_irqs(irq_rows, problems)
        apply_numa(numa, problems)
        if banned and banned["changed"]:
            try:
                write_file(module, banned["path"], banned_text(banned["text"], banned["after"]))
            except (OSError, ModuleError) as exc:
                problems.append("%s: %s" % (banned["path"], to_native(exc)))

        wrong = binder.verify()
        if wrong:
            # A thread started between the last scan and the check: one more pass.
            binder.record(doc, wrong)
            save_state(params["state_dir"], KIND, doc, boot_id)
            binder.bind(wrong)
            wrong = binder.verify()
        for pid, tid, rule, allowed in wrong[:MAX_LISTED]:
            problems.append("pid %d tid %d has Cpus_allowed_list %s, expected %s (a cgroup cpuset may exclude those CPUs)"
                            % (pid, tid, format_cpulist(allowed), format_cpulist(rule["cpus"])))
        if len(wrong) > MAX_LISTED:
            problems.append("and %d more threads" % (len(wrong) - MAX_LISTED))
        verify_others(irq_rows, numa, banned, problems)
        after_lines = binder.diff_lines("after")
        result["changed"] = bool(binder.changed) or any(row["changed"] for row in irq_rows) \
            or bool(numa and numa["changed"]) or bool(banned and banned["changed"])
        if problems:
            result.update(public_parts(binder, irq_rows, numa, banned))
            raise ModuleError("the binding did not converge (recorded originals can be put back with state=restored): "
                              + "; ".join(problems), result)

    after_lines += ["irq %d (%s): %s" % (row["irq"], row["name"], format_cpulist(row["after"])) for row in irq_rows]
    if numa:
        after_lines.append("kernel.numa_balancing: %s" % numa["after"])
    if banned:
        after_lines.append("%s %s: %s" % (banned["path"], BANNED_KEY, banned["after"]))
    result.update(public_parts(binder, irq_rows, numa, banned))
    if module._diff:
        result["diff"] = dict(before="".join(line + "\n" for line in before_lines),
                              after="".join(line + "\n" for line in after_lines),
                              before_header="affinity (before)",
                              after_header="affinity (%s)" % ("planned" if module.check_mode else "after"))
    return result


def apply_irqs(irq_rows, problems):
    for row in irq_rows:
        if not row["changed"]:
            continue
        try:
            write_proc(row["path"], format_cpulist(row["after"]))
        except OSError as exc:
            problems.append("IRQ %d: writing %s to %s failed: %s" % (row["irq"], format_cpulist(row["after"]), row["path"], to_native(exc)))


def apply_numa(numa, problems):
    if not numa or not numa["changed"]:
        return
    try:
        write_proc(numa["path"], numa["value"])
    except OSError as exc:
        problems.append("writing %s to %s failed: %s" % (numa["value"], numa["path"], to_native(exc)))


def verify_others(irq_rows, numa, banned, problems):
    for row in irq_rows:
        text = read_text(row["path"])
        now = parse_cpulist(text) if text is not None else None
        if now != row["after"]:
            problems.append("IRQ %d reads %s, expected %s" % (row["irq"], format_cpulist(now or []), format_cpulist(row["after"])))
            row["after"] = now
    if numa and numa["before"] is not None:
        text = read_text(numa["path"])
        now = text.strip() if text is not None else None
        if now != numa["after"]:
            problems.append("%s reads %s, expected %s" % (numa["path"], now, numa["after"]))
            numa["after"] = now
    if banned:
        now = read_banned(banned["path"])[1]
        if not same_cpulist(now, banned["after"]):
            problems.append("%s has %s=%s, expected %s" % (banned["path"], BANNED_KEY, now, banned["after"]))
            banned["after"] = now


def public_parts(binder, irq_rows, numa, banned):
    return dict(
        processes=binder.results() if binder else [],
        irqs=[dict(irq=row["irq"], name=row["name"], before=format_cpulist(row["before"]),
                   after=format_cpulist(row["after"] or []), changed=row["changed"]) for row in irq_rows],
        numa_balancing=None if numa is None else dict(before=numa["before"], after=numa["after"], changed=numa["changed"]),
        irqbalance_banned=None if banned is None else dict(
            path=banned["path"], before=banned["before"], after=banned["after"], changed=banned["changed"]),
    )


# ---------------------------------------------------------------------------
# restored
# ---------------------------------------------------------------------------

def apply_restored(module, params, table, boot_id):
    try:
        doc = load_state(params["state_dir"], KIND, boot_id)
    except StateFileError as exc:
        raise ModuleError(to_native(exc))
    entries = doc["entries"]
    result = dict(changed=False, processes=[], unmatched_rules=[], skipped=[], irqs=[], numa_balancing=None,
                  irqbalance_banned=None, settle_rounds=0, state_file=state_path(params["state_dir"], KIND))
    before_lines = []
    after_lines = []
    dirty = False

    # Processes and threads.
    by_pid = {}
    for key, entry in entries.items():
        if key.startswith(("proc:", "task:")) and isinstance(entry, dict):
            by_pid.setdefault(entry["pid"], {}).setdefault("tasks" if key.startswith("task:") else "proc", {})[key] = entry
    writes = []   # (pid, tid, target, keys to drop on success)
    for pid in sorted(by_pid):
        group = by_pid[pid]
        proc_entry = next(iter(group.get("proc", {}).values()), None)
        tasks = group.get("tasks", {})
        recorded = proc_entry or next(iter(tasks.values()))
        comm = recorded.get("comm", "")
        all_keys = list(group.get("proc", {})) + list(tasks)
        reason = identity_mismatch(recorded, params["proc_root"], boot_id)
        if reason:
            result["skipped"].append(dict(pid=pid, comm=comm, tids=sorted(entry["tid"] for entry in tasks.values()), reason=reason))
            for key in all_keys:
                drop_entry(doc, key)
            dirty = True
            continue
        applied = [entry.get("applied") for entry in tasks.values()]
        if proc_entry:
            applied.extend(proc_entry.get("applied") or [])
        applied = [sorted(cpus) for cpus in applied if cpus]
        live = table.tids(pid)
        gone = []
        pairs_before = []
        pairs_after = []
        plan = []
        for key, entry in tasks.items():
            if entry["tid"] not in live:
                gone.append(entry["tid"])
                continue
            why = identity_mismatch(entry, params["proc_root"], boot_id, tid=entry["tid"])
            if why:
                result["skipped"].append(dict(pid=pid, comm=comm, tids=[entry["tid"]], reason=why))
                drop_entry(doc, key)
                dirty = True
                continue
            plan.append((entry["tid"], sorted(entry["cpus"]), [key]))
        if gone:
            result["skipped"].append(dict(pid=pid, comm=comm, tids=sorted(gone), reason="threads have exited"))
            for tid in gone:
                drop_entry(doc, "task:%d:%d" % (pid, tid))
            dirty = True
        planned_tids = set(tid for tid, cpus, keys in plan)
        if proc_entry:
            for tid in live:
                if tid in planned_tids:
                    continue
                current = get_affinity(tid)
                if current is not None and current in applied:
                    plan.append((tid, sorted(proc_entry["cpus"]), []))
        proc_keys = list(group.get("proc", {}))
        entry_result = dict(pid=pid, comm=comm, cpus=format_cpulist(proc_entry["cpus"]) if proc_entry else "",
                            tids=[], changed_tids=[])
        for tid, target, keys in sorted(plan):
            current = get_affinity(tid)
            if current is None:
                continue
            entry_result["tids"].append(tid)
            pairs_before.append((tid, current))
            pairs_after.append((tid, target))
            if current != target:
                entry_result["changed_tids"].append(tid)
                writes.append((pid, tid, target, keys))
            else:
                for key in keys:
                    drop_entry(doc, key)
                dirty = True
        if not entry_result["cpus"] and plan:
            entry_result["cpus"] = format_cpulist(plan[0][1])
        result["processes"].append(entry_result)
        before_lines.extend(thread_lines(pid, comm, pairs_before))
        after_lines.extend(thread_lines(pid, comm, pairs_after))
        # The process record goes once every thread record of the process is gone.
        group["proc_keys"] = proc_keys

    # IRQs.
    irq_writes = []
    for key in sorted(key for key in entries if key.startswith("irq:")):
        entry = entries[key]
        path = os.path.join(params["proc_root"], "irq", str(entry["irq"]), "smp_affinity_list")
        if entry.get("boot_id") != boot_id:
            result["skipped"].append(dict(irq=entry["irq"], reason="recorded in an earlier boot (%s)" % entry.get("boot_id")))
            drop_entry(doc, key)
            dirty = True
            continue
        text = read_text(path)
        if text is None:
            result["skipped"].append(dict(irq=entry["irq"], reason="%s cannot be read (IRQ freed?)" % path))
            continue
        names = dict(parse_interrupts(read_text(os.path.join(params["proc_root"], "interrupts")) or ""))
        if entry.get("name") and names.get(entry["irq"]) not in (None, entry["name"]):
            result["skipped"].append(dict(irq=entry["irq"], reason="IRQ %d now belongs to %r, recorded %r" % (
                entry["irq"], names.get(entry["irq"]), entry["name"])))
            drop_entry(doc, key)
            dirty = True
            continue
        before = parse_cpulist(text)
        target = sorted(entry["cpus"])
        row = dict(irq=entry["irq"], name=entry.get("name", ""), path=path, before=before, after=target, changed=before != target)
        result["irqs"].append(row)
        before_lines.append("irq %d (%s): %s" % (row["irq"], row["name"], format_cpulist(before)))
        after_lines.append("irq %d (%s): %s" % (row["irq"], row["name"], format_cpulist(target)))
        if row["changed"]:
            irq_writes.append((key, row))
        else:
            drop_entry(doc, key)
            dirty = True

    # numa_balancing.
    numa = None
    entry = entries.get("sysctl:kernel.numa_balancing")
    if entry is not None:
        path = os.path.join(params["proc_root"], "sys/kernel/numa_balancing")
        if entry.get("boot_id") != boot_id:
            result["skipped"].append(dict(sysctl="kernel.numa_balancing", reason="recorded in an earlier boot"))
            drop_entry(doc, "sysctl:kernel.numa_balancing")
            dirty = True
        else:
            text = read_text(path)
            before = text.strip() if text is not None else None
            numa = dict(path=path, before=before, after=entry["value"], value=entry["value"], changed=before != entry["value"])
            before_lines.append("kernel.numa_balancing: %s" % before)
            after_lines.append("kernel.numa_balancing: %s" % entry["value"])
            if not numa["changed"]:
                drop_entry(doc, "sysctl:kernel.numa_balancing")
                dirty = True

    # irqbalance file.
    banned = None
    for key in sorted(key for key in entries if key.startswith("irqbalance:")):
        entry = entries[key]
        existed, before, text = read_banned(entry["path"])
        banned = dict(path=entry["path"], before=before, after=entry["value"], changed=not same_cpulist(before, entry["value"]),
                      text=text, existed=existed, key=key, remove=not entry.get("existed", True))
        before_lines.append("%s %s: %s" % (entry["path"], BANNED_KEY, before if before is not None else "(unset)"))
        after_lines.append("%s %s: %s" % (entry["path"], BANNED_KEY, entry["value"] if entry["value"] is not None else "(unset)"))
        if not banned["changed"]:
            drop_entry(doc, key)
            dirty = True

    result["changed"] = bool(writes) or bool(irq_writes) or bool(numa and numa["changed"]) or bool(banned and banned["changed"])
    if not module.check_mode:
        for pid, tid, target, keys in writes:
            error = set_affinity(tid, target)
            if error == "gone":
                for key in keys:
                    drop_entry(doc, key)
                dirty = True
                continue
            allowed = table.allowed_list(pid, tid) if not error else None
            if error or allowed != target:
                result["skipped"].append(dict(pid=pid, tids=[tid], reason=error or "reads %s after restoring %s" % (
                    format_cpulist(allowed or []), format_cpulist(target))))
                continue
            for key in keys:
                drop_entry(doc, key)
            dirty = True
        for key, row in irq_writes:
            try:
                write_proc(row["path"], format_cpulist(row["after"]))
                now = parse_cpulist(read_text(row["path"]) or "")
            except (OSError, ValueError) as exc:
                result["skipped"].append(dict(irq=row["irq"], reason="write failed: %s" % to_native(exc)))
                continue
            if now != row["after"]:
                result["skipped"].append(dict(irq=row["irq"], reason="reads %s after restoring" % format_cpulist(now)))
                continue
            drop_entry(doc, key)
            dirty = True
        if numa and numa["changed"]:
            problems = []
            apply_numa(numa, problems)
            if problems:
                result["skipped"].append(dict(sysctl="kernel.numa_balancing", reason=problems[0]))
            else:
                drop_entry(doc, "sysctl:kernel.numa_balancing")
                dirty = True
        if banned and banned["changed"]:
            try:
                new_text = banned_text(banned["text"], banned["after"])
                if banned["remove"] and not new_text.strip():
                    os.unlink(banned["path"])
                else:
                    write_file(module, banned["path"], new_text)
                drop_entry(doc, banned["key"])
                dirty = True
            except (OSError, ModuleError) as exc:
                result["skipped"].append(dict(path=banned["path"], reason=to_native(exc)))
        # Drop process records whose thread records are all gone.
        for pid, group in by_pid.items():
            if not any(key.startswith("task:%d:" % pid) for key in doc["entries"]):
                for key in group.get("proc_keys", []):
                    if drop_entry(doc, key) is not None:
                        dirty = True
        if dirty:
            try:
                save_state(params["state_dir"], KIND, doc, boot_id)
            except StateFileError as exc:
                raise ModuleError("restored, but the state file was not updated: %s" % to_native(exc), result)

    result["irqs"] = [dict(irq=row["irq"], name=row["name"], before=format_cpulist(row["before"]),
                           after=format_cpulist(row["after"]), changed=row["changed"]) for row in result["irqs"]]
    if numa:
        result["numa_balancing"] = dict(before=numa["before"], after=numa["after"], changed=numa["changed"])
    if banned:
        result["irqbalance_banned"] = dict(path=banned["path"], before=banned["before"], after=banned["after"],
                                           changed=banned["changed"])
    if module._diff:
        result["diff"] = dict(before="".join(line + "\n" for line in before_lines),
                              after="".join(line + "\n" for line in after_lines),
                              before_header="affinity (before)",
                              after_header="affinity (%s)" % ("planned" if module.check_mode else "after"))
    return result


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
                    pid=dict(type="int"),
                    unit=dict(type="str"),
                    cpus=dict(type="raw", required=True),
                    threads=dict(type="str"),
                    optional=dict(type="bool", default=False),
                ),
                required_one_of=[("comm", "cmdline", "parent_comm", "pid", "unit")],
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
    try:
        if params["state"] == "present":
            result = apply_present(module, params, table, boot_id)
        else:
            result = apply_restored(module, params, table, boot_id)
    except ModuleError as exc:
        extra = exc.args[1] if len(exc.args) > 1 else {}
        extra = dict((key, value) for key, value in extra.items() if key != "changed")
        module.fail_json(msg=exc.args[0], **extra)
    except StateFileError as exc:
        module.fail_json(msg=to_native(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
