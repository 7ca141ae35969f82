# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""IRQ affinities, ``kernel.numa_balancing`` and irqbalance's banned CPU list.

* ``parse_interrupts`` reads the numbered lines of ``/proc/interrupts``
  (number and the description after the per-CPU counters);
* ``plan_irqs``, ``plan_numa`` and ``plan_banned`` read the current value and
  return a row ``{path, before, after, changed, ...}``;
* ``apply_irqs``, ``apply_numa`` and ``write_banned`` write the planned values;
  ``verify_others`` re-reads them and lists what did not converge.

Problems of the input raise ``ChangeError``; write failures are appended to a
``problems`` list so that every one of them is reported.
"""

from __future__ import annotations

import os
import re

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.aihost.llm_cluster.plugins.module_utils._affinity_rules import compile_regex, normalize_cpus
from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError
from ansible_collections.aihost.llm_cluster.plugins.module_utils._cpuset import format_cpulist, parse_cpulist
from ansible_collections.aihost.llm_cluster.plugins.module_utils._fileio import atomic_write, read_text

BANNED_KEY = "IRQBALANCE_BANNED_CPULIST"
BANNED_LINE_RE = re.compile(r"^\s*(?:export\s+)?%s=(.*)$" % BANNED_KEY)


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
            raise ChangeError("%s.irq: expected an IRQ number or a regular expression, got %r" % (what, selector))
        if interrupts is None:
            text = read_text(os.path.join(proc_root, "interrupts"))
            if text is None:
                raise ChangeError("cannot read %s" % os.path.join(proc_root, "interrupts"))
            interrupts = parse_interrupts(text)
        names = dict(interrupts)
        if isinstance(selector, int) or selector.strip().isdigit():
            number = int(selector)
            if not os.path.exists(os.path.join(proc_root, "irq", str(number), "smp_affinity_list")):
                raise ChangeError("%s: IRQ %d does not exist (no %s)" % (
                    what, number, os.path.join(proc_root, "irq", str(number), "smp_affinity_list")))
            desired[number] = (cpus, names.get(number, ""))
            continue
        pattern = compile_regex(selector, what + ".irq")
        hits = [(number, name) for number, name in interrupts if pattern.search(name)]
        if not hits:
            raise ChangeError("%s: no IRQ in %s matches %r" % (what, os.path.join(proc_root, "interrupts"), selector))
        for number, name in hits:
            desired[number] = (cpus, name)
    rows = []
    for number in sorted(desired):
        cpus, name = desired[number]
        path = os.path.join(proc_root, "irq", str(number), "smp_affinity_list")
        text = read_text(path)
        if text is None:
            raise ChangeError("cannot read %s" % path)
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
        raise ChangeError("cannot read %s: %s" % (path, to_native(exc)))
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


def write_banned(path, text, move=None):
    """Replace the irqbalance file ``path`` with ``text`` atomically (``move``: e.g. AnsibleModule.atomic_move)."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise ChangeError("cannot write %s: %s does not exist (is irqbalance installed?)" % (path, directory))
    atomic_write(path, text, move=move)


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


def plan_numa(proc_root, wanted):
    if wanted is None:
        return None
    path = os.path.join(proc_root, "sys/kernel/numa_balancing")
    text = read_text(path)
    if text is None:
        if not wanted:
            # A kernel without NUMA balancing has it off already.
            return dict(path=path, before=None, after=None, changed=False, value=None)
        raise ChangeError("cannot read %s: the kernel has no automatic NUMA balancing" % path)
    before = text.strip()
    if wanted:
        after = before if before not in ("0", "") else "1"
    else:
        after = "0"
    return dict(path=path, before=before, after=after, changed=before != after, value=after)


def plan_banned(value, config):
    """Row of the IRQBALANCE_BANNED_CPULIST line: ``value`` (O(irqbalance_banned_cpus)) in ``config``."""
    if value is None:
        return None
    cpus = normalize_cpus(value, "irqbalance_banned_cpus")
    path = config or irqbalance_default()
    existed, before, text = read_banned(path)
    after = format_cpulist(cpus)
    return dict(path=path, before=before, after=after, changed=not same_cpulist(before, after), existed=existed, text=text)


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
