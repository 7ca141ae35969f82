# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""affinity_apply with state=restored: put back what the state file recorded.

``Restorer`` plans each kind of record (threads of a process, IRQs,
``kernel.numa_balancing``, the irqbalance file) against what the host reads
now, then writes the originals and drops each record once it reads back.

* A process is restored only when its PID, start time and boot id match the
  record; threads started after the binding that carry one of the bound sets
  get the original affinity of their process. Threads that a still-bound
  thread starts while the restore runs inherit a bound set too: a bounded
  re-scan (the settle loop, as in the binding) gives them the original.
* Records of an earlier boot, of exited processes and threads, of reused PIDs
  and of IRQs that now belong to another device are reported in ``skipped``
  and dropped; a failed write is reported and kept for a later run.
"""

from __future__ import annotations

import os

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.aihost.llm_cluster.plugins.module_utils._affinity_present import KIND, settle
from ansible_collections.aihost.llm_cluster.plugins.module_utils._affinity_rules import thread_lines
from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError, StateRecord, diff_of, lines_text
from ansible_collections.aihost.llm_cluster.plugins.module_utils._cpuset import format_cpulist, parse_cpulist
from ansible_collections.aihost.llm_cluster.plugins.module_utils._fileio import read_text
from ansible_collections.aihost.llm_cluster.plugins.module_utils._irq import (
    BANNED_KEY,
    apply_numa,
    banned_text,
    parse_interrupts,
    read_banned,
    same_cpulist,
    write_banned,
    write_proc,
)
from ansible_collections.aihost.llm_cluster.plugins.module_utils._procfs import get_affinity, set_affinity
from ansible_collections.aihost.llm_cluster.plugins.module_utils._statefile import identity_mismatch


class Restorer:
    """Plans and applies the restore of every record of one state file."""

    def __init__(self, state, table, proc_root, boot_id):
        self.state = state
        self.table = table
        self.proc_root = proc_root
        self.boot_id = boot_id
        self.skipped = []
        self.processes = []
        self.irqs = []
        self.numa = None
        self.banned = None
        self.before_lines = []
        self.after_lines = []
        self.by_pid = {}
        self.writes = []       # (pid, tid, target, keys to drop on success)
        self.irq_writes = []   # (key, row)
        self.inherited = {}    # pid -> (the process's original, the bound sets), for the settle loop
        self.handled = set()   # (pid, tid) planned or caught by the settle loop
        self.settle_rounds = 0

    @property
    def entries(self):
        return self.state.entries

    def forget(self, key):
        """Drop a record that needs no (or can get no) restore."""
        self.state.drop(key)

    # -- planning ------------------------------------------------------------

    def plan(self):
        self.plan_processes()
        self.plan_irqs()
        self.plan_numa()
        self.plan_banned()

    @property
    def changed(self):
        return bool(self.writes) or bool(self.irq_writes) or bool(self.numa and self.numa["changed"]) \
            or bool(self.banned and self.banned["changed"])

    def plan_processes(self):
        for key, entry in self.entries.items():
            if key.startswith(("proc:", "task:")) and isinstance(entry, dict):
                kind = "tasks" if key.startswith("task:") else "proc"
                self.by_pid.setdefault(entry["pid"], {}).setdefault(kind, {})[key] = entry
        for pid in sorted(self.by_pid):
            self.plan_process(pid, self.by_pid[pid])

    def plan_process(self, pid, group):
        proc_entry = next(iter(group.get("proc", {}).values()), None)
        tasks = group.get("tasks", {})
        recorded = proc_entry or next(iter(tasks.values()))
        comm = recorded.get("comm", "")
        all_keys = list(group.get("proc", {})) + list(tasks)
        reason = identity_mismatch(recorded, self.proc_root, self.boot_id)
        if reason:
            self.skipped.append(dict(pid=pid, comm=comm, tids=sorted(entry["tid"] for entry in tasks.values()), reason=reason))
            for key in all_keys:
                self.forget(key)
            return
        applied = [entry.get("applied") for entry in tasks.values()]
        if proc_entry:
            applied.extend(proc_entry.get("applied") or [])
        applied = [sorted(cpus) for cpus in applied if cpus]
        live = self.table.tids(pid)
        gone = []
        plan = []
        for key, entry in tasks.items():
            if entry["tid"] not in live:
                gone.append(entry["tid"])
                continue
            why = identity_mismatch(entry, self.proc_root, self.boot_id, tid=entry["tid"])
            if why:
                self.skipped.append(dict(pid=pid, comm=comm, tids=[entry["tid"]], reason=why))
                self.forget(key)
                continue
            plan.append((entry["tid"], sorted(entry["cpus"]), [key]))
        if gone:
            self.skipped.append(dict(pid=pid, comm=comm, tids=sorted(gone), reason="threads have exited"))
            for tid in gone:
                self.forget("task:%d:%d" % (pid, tid))
        planned_tids = set(tid for tid, cpus, keys in plan)
        self.handled.update((pid, tid) for tid in planned_tids)
        if proc_entry:
            self.inherited[pid] = (sorted(proc_entry["cpus"]), applied)
            # Threads started after the binding inherited a bound set: they get the process's original.
            for tid in live:
                if tid in planned_tids:
                    continue
                current = get_affinity(tid)
                if current is not None and current in applied:
                    plan.append((tid, sorted(proc_entry["cpus"]), []))
                    self.handled.add((pid, tid))
        entry_result = dict(pid=pid, comm=comm, cpus=format_cpulist(proc_entry["cpus"]) if proc_entry else "",
                            tids=[], changed_tids=[])
        pairs_before = []
        pairs_after = []
        for tid, target, keys in sorted(plan):
            current = get_affinity(tid)
            if current is None:
                continue
            entry_result["tids"].append(tid)
            pairs_before.append((tid, current))
            pairs_after.append((tid, target))
            if current != target:
                entry_result["changed_tids"].append(tid)
                self.writes.append((pid, tid, target, keys))
            else:
                for key in keys:
                    self.forget(key)
                self.state.dirty = True
        if not entry_result["cpus"] and plan:
            entry_result["cpus"] = format_cpulist(plan[0][1])
        self.processes.append(entry_result)
        self.before_lines.extend(thread_lines(pid, comm, pairs_before))
        self.after_lines.extend(thread_lines(pid, comm, pairs_after))
        # The process record goes once every thread record of the process is gone.
        group["proc_keys"] = list(group.get("proc", {}))

    def plan_irqs(self):
        for key in sorted(key for key in self.entries if key.startswith("irq:")):
            entry = self.entries[key]
            path = os.path.join(self.proc_root, "irq", str(entry["irq"]), "smp_affinity_list")
            if entry.get("boot_id") != self.boot_id:
                self.skipped.append(dict(irq=entry["irq"], reason="recorded in an earlier boot (%s)" % entry.get("boot_id")))
                self.forget(key)
                continue
            text = read_text(path)
            if text is None:
                self.skipped.append(dict(irq=entry["irq"], reason="%s cannot be read (IRQ freed?)" % path))
                continue
            names = dict(parse_interrupts(read_text(os.path.join(self.proc_root, "interrupts")) or ""))
            if entry.get("name") and names.get(entry["irq"]) not in (None, entry["name"]):
                self.skipped.append(dict(irq=entry["irq"], reason="IRQ %d now belongs to %r, recorded %r" % (
                    entry["irq"], names.get(entry["irq"]), entry["name"])))
                self.forget(key)
                continue
            before = parse_cpulist(text)
            target = sorted(entry["cpus"])
            row = dict(irq=entry["irq"], name=entry.get("name", ""), path=path, before=before, after=target,
                       changed=before != target)
            self.irqs.append(row)
            self.before_lines.append("irq %d (%s): %s" % (row["irq"], row["name"], format_cpulist(before)))
            self.after_lines.append("irq %d (%s): %s" % (row["irq"], row["name"], format_cpulist(target)))
            if row["changed"]:
                self.irq_writes.append((key, row))
            else:
                self.forget(key)

    def plan_numa(self):
        key = "sysctl:kernel.numa_balancing"
        entry = self.entries.get(key)
        if entry is None:
            return
        if entry.get("boot_id") != self.boot_id:
            self.skipped.append(dict(sysctl="kernel.numa_balancing", reason="recorded in an earlier boot"))
            self.forget(key)
            return
        path = os.path.join(self.proc_root, "sys/kernel/numa_balancing")
        text = read_text(path)
        before = text.strip() if text is not None else None
        self.numa = dict(path=path, before=before, after=entry["value"], value=entry["value"],
                         changed=before != entry["value"])
        self.before_lines.append("kernel.numa_balancing: %s" % before)
        self.after_lines.append("kernel.numa_balancing: %s" % entry["value"])
        if not self.numa["changed"]:
            self.forget(key)

    def plan_banned(self):
        for key in sorted(key for key in self.entries if key.startswith("irqbalance:")):
            entry = self.entries[key]
            existed, before, text = read_banned(entry["path"])
            self.banned = dict(path=entry["path"], before=before, after=entry["value"],
                               changed=not same_cpulist(before, entry["value"]), text=text, existed=existed, key=key,
                               remove=not entry.get("existed", True))
            self.before_lines.append("%s %s: %s" % (entry["path"], BANNED_KEY, before if before is not None else "(unset)"))
            self.after_lines.append("%s %s: %s" % (entry["path"], BANNED_KEY,
                                                   entry["value"] if entry["value"] is not None else "(unset)"))
            if not self.banned["changed"]:
                self.forget(key)

    # -- applying ------------------------------------------------------------

    def apply(self, move=None, settle=0):
        self.apply_threads()
        self.settle_rounds = self.settle(settle)
        self.apply_irqs()
        self.apply_numa()
        self.apply_banned(move)
        self.drop_finished_processes()

    def apply_threads(self):
        for pid, tid, target, keys in self.writes:
            error = set_affinity(tid, target)
            if error == "gone":
                for key in keys:
                    self.forget(key)
                self.state.dirty = True
                continue
            allowed = self.table.allowed_list(pid, tid) if not error else None
            if error or allowed != target:
                self.skipped.append(dict(pid=pid, tids=[tid], reason=error or "reads %s after restoring %s" % (
                    format_cpulist(allowed or []), format_cpulist(target))))
                continue
            for key in keys:
                self.forget(key)
            self.state.dirty = True

    def settle(self, limit):
        """Re-scan the restored processes for threads started with a bound set; returns the rounds."""
        return settle(self.catch, limit) if self.inherited else 0

    def catch(self):
        """Put back each new thread of a restored process that started with the applied set; True when one did."""
        caught = False
        for pid, (original, applied) in sorted(self.inherited.items()):
            for tid in self.table.tids(pid):
                if (pid, tid) in self.handled:
                    continue
                current = get_affinity(tid)
                if current is None or current not in applied:
                    continue
                self.handled.add((pid, tid))
                caught = True
                error = set_affinity(tid, original)
                if error and error != "gone":
                    self.skipped.append(dict(pid=pid, tids=[tid], reason=error))
        return caught

    def apply_irqs(self):
        for key, row in self.irq_writes:
            try:
                write_proc(row["path"], format_cpulist(row["after"]))
                now = parse_cpulist(read_text(row["path"]) or "")
            except (OSError, ValueError) as exc:
                self.skipped.append(dict(irq=row["irq"], reason="write failed: %s" % to_native(exc)))
                continue
            if now != row["after"]:
                self.skipped.append(dict(irq=row["irq"], reason="reads %s after restoring" % format_cpulist(now)))
                continue
            self.forget(key)

    def apply_numa(self):
        if not (self.numa and self.numa["changed"]):
            return
        problems = []
        apply_numa(self.numa, problems)
        if problems:
            self.skipped.append(dict(sysctl="kernel.numa_balancing", reason=problems[0]))
        else:
            self.forget("sysctl:kernel.numa_balancing")

    def apply_banned(self, move=None):
        banned = self.banned
        if not (banned and banned["changed"]):
            return
        try:
            new_text = banned_text(banned["text"], banned["after"])
            if banned["remove"] and not new_text.strip():
                os.unlink(banned["path"])
            else:
                write_banned(banned["path"], new_text, move)
            self.forget(banned["key"])
        except (OSError, ChangeError) as exc:
            self.skipped.append(dict(path=banned["path"], reason=to_native(exc)))

    def drop_finished_processes(self):
        """Drop process records whose thread records are all gone."""
        for pid, group in self.by_pid.items():
            if not any(key.startswith("task:%d:" % pid) for key in self.entries):
                for key in group.get("proc_keys", []):
                    if key in self.entries:
                        self.forget(key)

    # -- result --------------------------------------------------------------

    def public_result(self):
        return dict(
            processes=self.processes,
            skipped=self.skipped,
            irqs=[dict(irq=row["irq"], name=row["name"], before=format_cpulist(row["before"]),
                       after=format_cpulist(row["after"]), changed=row["changed"]) for row in self.irqs],
            numa_balancing=None if self.numa is None else dict(
                before=self.numa["before"], after=self.numa["after"], changed=self.numa["changed"]),
            irqbalance_banned=None if self.banned is None else dict(
                path=self.banned["path"], before=self.banned["before"], after=self.banned["after"],
                changed=self.banned["changed"]),
        )


def apply_restored(params, table, boot_id, check_mode=False, diff=False, move=None):
    """Put back every recorded original whose owner is still the same; returns the result dict."""
    state = StateRecord(params["state_dir"], KIND, boot_id)
    state.load()
    restorer = Restorer(state, table, params["proc_root"], boot_id)
    result = dict(changed=False, processes=restorer.processes, unmatched_rules=[], skipped=restorer.skipped, irqs=[],
                  numa_balancing=None, irqbalance_banned=None, settle_rounds=0, state_file=state.path)
    restorer.plan()
    result["changed"] = restorer.changed
    if not check_mode:
        restorer.apply(move, params.get("settle", 5))
        result["settle_rounds"] = restorer.settle_rounds
    result.update(restorer.public_result())
    if not check_mode and state.dirty:
        state.save("restored, but the state file was not updated: ", result)
    if diff:
        result["diff"] = diff_of(lines_text(restorer.before_lines), lines_text(restorer.after_lines), "affinity",
                                 check_mode)
    return result
