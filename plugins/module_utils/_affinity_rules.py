# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""affinity_apply's rules: checking and compiling them, matching processes and threads.

A compiled rule is a dict with the regular expressions compiled (``comm``,
``cmdline``, ``parent_comm``, ``parent_cmdline``, ``threads``), ``pid``, ``unit`` (with
``.service`` added to a bare name), ``cpus`` (a sorted list) and its
``index`` in the module's ``rules``. Every selector given must match; when
several rules match a thread, the last one wins. Bad input raises
``ChangeError`` naming ``rules[<n>].<option>``.
"""

from __future__ import annotations

import re

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError
from ansible_collections.aihost.llm_cluster.plugins.module_utils._cpuset import format_cpulist, parse_cpulist


def normalize_cpus(value, what):
    """CPU list from a list of ints, an int or a cpulist string; raises ChangeError."""
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
        raise ChangeError("%s: %s" % (what, to_native(exc)))
    cpus = sorted(set(cpus))
    if not cpus:
        raise ChangeError("%s: the CPU set is empty" % what)
    if cpus[0] < 0:
        raise ChangeError("%s: CPU %d is negative" % (what, cpus[0]))
    return cpus


def compile_regex(pattern, what):
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ChangeError("%s: invalid regular expression %r: %s" % (what, pattern, to_native(exc)))


SELECTORS = ("comm", "cmdline", "parent_comm", "parent_cmdline", "pid", "unit")


def compile_rules(rules):
    compiled = []
    for index, rule in enumerate(rules):
        what = "rules[%d]" % index
        if all(rule.get(key) is None for key in SELECTORS):
            raise ChangeError("%s needs a selector: one of comm, cmdline, parent_comm, parent_cmdline, pid or unit" % what)
        unit = rule.get("unit")
        if unit and "." not in unit:
            unit += ".service"
        compiled.append(dict(
            index=index,
            comm=compile_regex(rule["comm"], what + ".comm") if rule.get("comm") is not None else None,
            cmdline=compile_regex(rule["cmdline"], what + ".cmdline") if rule.get("cmdline") is not None else None,
            parent_comm=compile_regex(rule["parent_comm"], what + ".parent_comm") if rule.get("parent_comm") is not None else None,
            parent_cmdline=(compile_regex(rule["parent_cmdline"], what + ".parent_cmdline")
                            if rule.get("parent_cmdline") is not None else None),
            pid=rule.get("pid"),
            unit=unit,
            threads=compile_regex(rule["threads"], what + ".threads") if rule.get("threads") is not None else None,
            cpus=normalize_cpus(rule["cpus"], what + ".cpus"),
            optional=rule.get("optional", False),
        ))
    return compiled


def rule_matches(table, rule, pid):
    if table.stat(pid) is None:
        return False
    if rule["comm"] is not None and not rule["comm"].search(table.comm(pid)):
        return False
    if rule["parent_comm"] is not None or rule.get("parent_cmdline") is not None:
        ppid = table.stat(pid)["ppid"]
        if not ppid:
            return False
        if rule["parent_comm"] is not None and not rule["parent_comm"].search(table.comm(ppid)):
            return False
        if rule.get("parent_cmdline") is not None and not rule["parent_cmdline"].search(table.cmdline(ppid)):
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
            raise ChangeError("rules[%d] matches no running process%s" % (rule["index"], describe_rule(rule)))
        for pid in hits:
            entry = matched.setdefault(pid, dict(comm=table.comm(pid), start_time=table.stat(pid)["start_time"], rules=[]))
            entry["rules"].append(rule)
    return matched, unmatched


def describe_rule(rule):
    parts = []
    for key in ("comm", "cmdline", "parent_comm", "parent_cmdline"):
        if rule.get(key) is not None:
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


def thread_lines(pid, comm, pairs):
    """Diff lines for the (tid, cpus) pairs of one process, grouped by CPU set."""
    groups = {}
    for tid, cpus in pairs:
        groups.setdefault(format_cpulist(cpus) if cpus is not None else "(gone)", []).append(tid)
    return ["pid %d (%s) threads %s: %s" % (pid, comm, format_cpulist(tids), cpus)
            for cpus, tids in sorted(groups.items(), key=lambda item: min(item[1]))]
