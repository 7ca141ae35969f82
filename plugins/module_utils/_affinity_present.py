# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""affinity_apply with state=present: bind the matched threads, IRQs and knobs, then verify.

``Binder`` keeps, per (pid, tid) of the matched processes, the rule that
applies, the affinity before and after, and which threads it changed; it
records each original in the state file before the first change to it, binds,
re-scans for threads started meanwhile (the settle loop) and re-reads
``Cpus_allowed_list`` to verify. ``apply_present`` runs the whole contract
(plan, check mode, record, apply, verify, diff) and returns the result dict;
failures raise ``ChangeError``.
"""

from __future__ import annotations

import time

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.aihost.llm_cluster.plugins.module_utils._affinity_rules import compile_rules, desired_rule, match_processes, thread_lines
from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError, StateRecord, diff_of, lines_text
from ansible_collections.aihost.llm_cluster.plugins.module_utils._cpuset import format_cpulist
from ansible_collections.aihost.llm_cluster.plugins.module_utils._engine_binding import MAX_LISTED, refuse_engine_binding
from ansible_collections.aihost.llm_cluster.plugins.module_utils._irq import (
    BANNED_KEY,
    apply_irqs,
    apply_numa,
    banned_text,
    plan_banned,
    plan_irqs,
    plan_numa,
    verify_others,
    write_banned,
)
from ansible_collections.aihost.llm_cluster.plugins.module_utils._procfs import excluded_pids, get_affinity, set_affinity
from ansible_collections.aihost.llm_cluster.plugins.module_utils._statefile import record_original

KIND = "affinity_apply"
SETTLE_DELAY = 0.05


def settle(catch, limit):
    """Call ``catch`` (a re-scan that returns whether it caught a thread) every SETTLE_DELAY seconds until two
    calls in a row catch nothing or ``limit`` calls were made; returns the calls made. The binding and the
    restore both use it for the threads a process starts while it is being handled."""
    rounds = 0
    quiet = 0
    while rounds < limit and quiet < 2:
        time.sleep(SETTLE_DELAY)
        rounds += 1
        quiet = 0 if catch() else quiet + 1
    return rounds


class Binder:
    """Applies the rules to the matched processes and keeps what it saw."""

    def __init__(self, table, matched, boot_id):
        self.table = table
        self.matched = matched
        self.boot_id = boot_id
        self.deciders = dict((pid, desired_rule(proc, self._comm_reader(pid))) for pid, proc in matched.items())
        self.threads = {}      # (pid, tid) -> {"rule", "before", "after"}
        self.changed = set()   # (pid, tid) changed
        self.errors = []

    def _comm_reader(self, pid):
        return lambda tid: self.table.thread_comm(pid, tid)

    def ruled_threads(self, pid):
        """(tid, rule) of every thread of ``pid`` that a rule applies to."""
        for tid in self.table.tids(pid):
            rule = self.deciders[pid](tid)
            if rule is not None:
                yield tid, rule

    def scan(self):
        """Return the list of (pid, tid, rule, current) that need a change, updating self.threads."""
        todo = []
        for pid in sorted(self.matched):
            for tid, rule in self.ruled_threads(pid):
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
            for tid, rule in self.ruled_threads(pid):
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


def apply_present(params, table, boot_id, check_mode=False, diff=False, move=None):
    """Bind what O(rules), O(irqs), O(numa_balancing) and O(irqbalance_banned_cpus) ask for; returns the result.

    ``params`` are the module's options, ``table`` a ProcTable, ``move`` replaces the
    irqbalance file (AnsibleModule.atomic_move; os.replace when None).
    """
    rules = compile_rules(params["rules"] or [])
    matched, unmatched = match_processes(table, rules, excluded_pids(table)) if rules else ({}, [])
    if not params["force"]:
        refuse_engine_binding(table, matched)

    irq_rows = plan_irqs(params["proc_root"], params["irqs"])
    numa = plan_numa(params["proc_root"], params["numa_balancing"])
    banned = plan_banned(params["irqbalance_banned_cpus"], params["irqbalance_config"])

    binder = Binder(table, matched, boot_id)
    todo = binder.scan()
    before_lines = binder.diff_lines("before")
    before_lines += ["irq %d (%s): %s" % (row["irq"], row["name"], format_cpulist(row["before"])) for row in irq_rows]
    if numa:
        before_lines.append("kernel.numa_balancing: %s" % numa["before"])
    if banned:
        before_lines.append("%s %s: %s" % (banned["path"], BANNED_KEY, banned["before"] if banned["before"] is not None else "(unset)"))

    something = bool(todo) or any(row["changed"] for row in irq_rows) or bool(numa and numa["changed"]) or bool(banned and banned["changed"])
    state = StateRecord(params["state_dir"], KIND, boot_id)
    result = dict(changed=something, unmatched_rules=unmatched, skipped=[], settle_rounds=0, state_file=state.path)

    if check_mode or not something:
        for pid, tid, rule, current in todo:
            binder.threads[(pid, tid)]["after"] = rule["cpus"]
            binder.changed.add((pid, tid))
        after_lines = binder.diff_lines("after")
    else:
        originals = []
        for row in irq_rows:
            if row["changed"]:
                originals.append(("irq:%d" % row["irq"], dict(
                    irq=row["irq"], name=row["name"], cpus=row["before"], boot_id=boot_id)))
        if numa and numa["changed"]:
            originals.append(("sysctl:kernel.numa_balancing", dict(value=numa["before"], boot_id=boot_id)))
        if banned and banned["changed"]:
            originals.append(("irqbalance:%s" % banned["path"], dict(
                path=banned["path"], existed=banned["existed"], value=banned["before"])))
        state.record_originals(originals, record_more=lambda doc: binder.record(doc, todo))
        doc = state.doc

        binder.bind(todo)

        def catch():
            found = binder.scan()
            if found:
                binder.record(doc, found)
                state.save()
                binder.bind(found)
            return bool(found)

        result["settle_rounds"] = settle(catch, params["settle"]) if matched else 0

        problems = list(binder.errors)
        apply_irqs(irq_rows, problems)
        apply_numa(numa, problems)
        if banned and banned["changed"]:
            try:
                write_banned(banned["path"], banned_text(banned["text"], banned["after"]), move)
            except (OSError, ChangeError) as exc:
                problems.append("%s: %s" % (banned["path"], to_native(exc)))

        wrong = binder.verify()
        if wrong:
            # A thread started between the last scan and the check: one more pass.
            binder.record(doc, wrong)
            state.save()
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
            raise ChangeError("the binding did not converge (recorded originals can be put back with state=restored): "
                              + "; ".join(problems), result)

    after_lines += ["irq %d (%s): %s" % (row["irq"], row["name"], format_cpulist(row["after"])) for row in irq_rows]
    if numa:
        after_lines.append("kernel.numa_balancing: %s" % numa["after"])
    if banned:
        after_lines.append("%s %s: %s" % (banned["path"], BANNED_KEY, banned["after"]))
    result.update(public_parts(binder, irq_rows, numa, banned))
    if diff:
        result["diff"] = diff_of(lines_text(before_lines), lines_text(after_lines), "affinity", check_mode)
    return result


def public_parts(binder, irq_rows, numa, banned):
    return dict(
        processes=binder.results() if binder else [],
        irqs=[dict(irq=row["irq"], name=row["name"], before=format_cpulist(row["before"]),
                   after=format_cpulist(row["after"] or []), changed=row["changed"]) for row in irq_rows],
        numa_balancing=None if numa is None else dict(before=numa["before"], after=numa["after"], changed=numa["changed"]),
        irqbalance_banned=None if banned is None else dict(
            path=banned["path"], before=banned["before"], after=banned["after"], changed=banned["changed"]),
    )
