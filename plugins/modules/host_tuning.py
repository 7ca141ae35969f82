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
module: host_tuning
short_description: Apply kernel settings for inference (sysctl, transparent hugepages, CPU governor) and put them back
version_added: 0.1.0
description:
  - Sets kernel parameters under C(/proc/sys) (O(sysctl)), the transparent hugepage mode
    (C(/sys/kernel/mm/transparent_hugepage/enabled), O(transparent_hugepage)) and the CPU frequency governor of every
    CPU that has one (C(/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor), O(cpu_governor)).
  - Reads every value first and changes only what differs; a second run reports no change. Every value is checked
    before the first write (the parameter exists on this kernel, the mode or governor is one the kernel offers), so a
    bad value changes nothing.
  - Before its first change to a file the original value is recorded in the state file C(host_tuning.json) under
    O(state_dir), and never overwritten by a later run. The record is kept across reboots (the values it holds are the
    host's own, not a boot's).
  - After writing, reads every value back and fails naming the setting when the kernel did not take it.
  - With O(state=restored), writes every recorded original back and drops its record once it reads back.
  - In check mode reports what would change (the drift from the profile) and writes nothing.
  - Does not persist anything across reboots itself; the prepare role writes a C(sysctl.d) file and a boot unit.
options:
  state:
    description: Apply the settings (V(present)) or put back the recorded originals (V(restored)).
    type: str
    choices: [present, restored]
    default: present
  sysctl:
    description:
      - Kernel parameters and their values, by their C(sysctl) names (V(vm.swappiness)). Values are compared with their
        whitespace collapsed, as the kernel prints vectors with tabs.
    type: dict
    default: {}
  optional:
    description:
      - Names of O(sysctl) that may be missing on this kernel, for example V(kernel.sched_migration_cost_ns), which Linux
        5.13 moved to debugfs. They are reported in RV(unavailable) and skipped. Any other missing parameter fails.
    type: list
    elements: str
    default: []
  transparent_hugepage:
    description: The transparent hugepage mode; nothing is changed when omitted. A host without the file reports it in RV(unavailable).
    type: str
    choices: [always, madvise, never]
  cpu_governor:
    description:
      - The frequency governor every CPU with cpufreq gets; nothing is changed when omitted.
      - A host without cpufreq (a virtual machine, a container, a driver not loaded) reports it in RV(unavailable).
      - A governor that one CPU does not offer (C(scaling_available_governors)) fails, naming the CPU and what it offers.
    type: str
  root:
    description: Root of the file system that holds C(proc/sys) and C(sys). Only useful for tests.
    type: path
    default: /
  state_dir:
    description: Directory of the state file C(host_tuning.json).
    type: path
    default: /var/lib/llm_cluster
attributes:
  check_mode:
    description: Reports the values it would write (the drift from the settings) and writes nothing, neither values nor state file.
    support: full
  diff_mode:
    description: Shows each setting that differs, with its value before and planned or after.
    support: full
  platform:
    description: Linux hosts.
    support: full
    platforms: posix
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Apply the Ascend inference profile
  aihost.llm_cluster.host_tuning:
    sysctl:
      vm.swappiness: 0
      kernel.sched_migration_cost_ns: 50000
    optional: [kernel.sched_migration_cost_ns]
    transparent_hugepage: always
    cpu_governor: performance

- name: Put the host's own values back
  aihost.llm_cluster.host_tuning:
    state: restored
"""

RETURN = r"""
settings:
  description: One row per setting and file, in order; C(status) is V(set), V(unchanged) or V(restored).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "vm.swappiness", "path": "/proc/sys/vm/swappiness", "before": "60", "after": "0", "status": "set"}]
unavailable:
  description: Settings this host does not have, with the reason; nothing was changed for them.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "cpu_governor", "reason": "no CPU has cpufreq (a virtual machine, a container, or no driver)"}]
not_restored:
  description: With O(state=restored), recorded files that could not be written back, with the reason (records kept).
  returned: always
  type: list
  elements: dict
state_file:
  description: The state file that holds the originals.
  returned: always
  type: str
"""

import glob
import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError, StateRecord, diff_of, lines_text, run_change
from ansible_collections.aihost.llm_cluster.plugins.module_utils._fileio import read_text
from ansible_collections.aihost.llm_cluster.plugins.module_utils._statefile import state_path

KIND = "host_tuning"
THP_PATH = "sys/kernel/mm/transparent_hugepage/enabled"
GOVERNOR_GLOB = "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"
SYSCTL_NAME = re.compile(r"^[a-z0-9_]+(\.[A-Za-z0-9_-]+)+$")
# The kernel's own explanation of parameters that moved out of /proc/sys.
MOVED = {
    "kernel.sched_migration_cost_ns": "moved to debugfs (sched/migration_cost_ns) in Linux 5.13, not a sysctl on this kernel",
}


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "restored"], default="present"),
            sysctl=dict(type="dict", default={}),
            optional=dict(type="list", elements="str", default=[]),
            transparent_hugepage=dict(type="str", choices=["always", "madvise", "never"]),
            cpu_governor=dict(type="str"),
            root=dict(type="path", default="/"),
            state_dir=dict(type="path", default="/var/lib/llm_cluster"),
        ),
        supports_check_mode=True,
    )


def collapse(value):
    """A value as the kernel would compare it: whitespace runs as one space, no trailing newline."""
    return " ".join(str(value).split())


def sysctl_path(name):
    return "proc/sys/" + name.replace(".", "/")


def selected(text):
    """The bracketed choice of a sysfs multiple-choice file (``always [madvise] never`` reads ``madvise``).

    A file of one word (a tree that is not the kernel's) reads as that word; anything else as None.
    """
    found = re.search(r"\[([^\]]+)\]", text or "")
    if found:
        return found.group(1)
    words = (text or "").split()
    return words[0] if len(words) == 1 else None


def read_setting(root, row):
    """The current value of ``row``'s file, as compared: None when it cannot be read."""
    text = read_text(os.path.join(root, row["path"]))
    if text is None:
        return None
    return selected(text) if row["kind"] == "choice" else collapse(text)


def plan_rows(params):
    """(rows, unavailable): one row per file to set, each {name, path, kind, value}; errors raise ChangeError."""
    root = params["root"]
    rows, unavailable, errors = [], [], []
    for name, value in sorted((params["sysctl"] or {}).items()):
        if not isinstance(name, str) or not SYSCTL_NAME.match(name):
            errors.append("sysctl %r is not a kernel parameter name (dotted, such as vm.swappiness)" % (name,))
            continue
        if value is None or isinstance(value, (dict, list)) or "\n" in str(value) or collapse(value) == "":
            errors.append("sysctl %s = %r is not one value: give a number or a word, such as %s: 0" % (name, value, name))
            continue
        path = sysctl_path(name)
        if not os.path.isfile(os.path.join(root, path)):
            reason = MOVED.get(name, "/%s does not exist on this kernel" % path)
            if name in params["optional"]:
                unavailable.append(dict(name=name, reason=reason))
            else:
                errors.append("sysctl %s: %s; check its spelling, or drop it from the settings for this host" % (name, reason))
            continue
        rows.append(dict(name=name, path=path, kind="value", value=collapse(value)))
    if params["transparent_hugepage"]:
        text = read_text(os.path.join(root, THP_PATH))
        if text is None:
            unavailable.append(dict(name="transparent_hugepage", reason="/%s does not exist (a kernel without THP)" % THP_PATH))
        elif params["transparent_hugepage"] not in text.replace("[", " ").replace("]", " ").split():
            errors.append("transparent_hugepage %s: this kernel offers %s" % (params["transparent_hugepage"], collapse(text)))
        else:
            rows.append(dict(name="transparent_hugepage", path=THP_PATH, kind="choice", value=params["transparent_hugepage"]))
    if params["cpu_governor"]:
        governor = params["cpu_governor"]
        paths = sorted(glob.glob(os.path.join(root, GOVERNOR_GLOB)), key=_cpu_order)
        if not paths:
            unavailable.append(dict(name="cpu_governor", reason="no CPU has cpufreq (a virtual machine, a container, or no driver)"))
        for full in paths:
            path = os.path.relpath(full, root)
            offered = collapse(read_text(os.path.join(os.path.dirname(full), "scaling_available_governors")) or "")
            if offered and governor not in offered.split():
                errors.append("cpu_governor %s: %s offers %s" % (governor, path.split("/")[4], offered))
                continue
            rows.append(dict(name="cpu_governor", path=path, kind="value", value=governor))
    if errors:
        raise ChangeError("nothing was changed: " + "; ".join(errors), dict(settings=[], unavailable=unavailable))
    return rows, unavailable


def _cpu_order(path):
    found = re.search(r"/cpu(\d+)/", path)
    return int(found.group(1)) if found else -1


def write_value(root, path, value):
    with open(os.path.join(root, path), "w", encoding="utf-8") as handle:
        handle.write(value + "\n")


def show(rows, key):
    return ["%s = %s%s" % (row["name"], row.get(key), _where(row)) for row in rows]


def diff_rows(todo, check_mode):
    """The diff of the rows to write: each one's value now against the one it gets."""
    return diff_of(lines_text(show(todo, "before")), lines_text(show(todo, "value")), "host tuning", check_mode)


def write_rows(root, todo):
    """Write each row's value and read it back into ``after``.

    Returns [(row, why, written)] for the rows the kernel did not take: ``written`` is False when the
    write itself failed, True when it went through but the value read back differs.
    """
    failed = []
    for row in todo:
        try:
            write_value(root, row["path"], row["value"])
        except OSError as exc:
            failed.append((row, str(exc.strerror or exc), False))
            continue
        row["after"] = read_setting(root, row)
        if row["after"] != row["value"]:
            failed.append((row, "reads %s after writing %s" % (row["after"], row["value"]), True))
    return failed


def _where(row):
    return " (%s)" % row["path"].split("/")[4] if row["name"] == "cpu_governor" else ""


def apply_present(params, check_mode, diff):
    root = params["root"]
    rows, unavailable = plan_rows(params)
    result = dict(changed=False, settings=[], unavailable=unavailable, not_restored=[],
                  state_file=state_path(params["state_dir"], KIND))
    for row in rows:
        row["before"] = read_setting(root, row)
        if row["before"] is None:
            raise ChangeError("nothing was changed: /%s could not be read" % row["path"], result)
    todo = [row for row in rows if row["before"] != row["value"]]
    for row in rows:
        row["status"] = "set" if row in todo else "unchanged"
        row["after"] = row["value"]
    result["settings"] = [public(row) for row in rows]
    if diff:
        result["diff"] = diff_rows(todo, check_mode)
    if not todo:
        return result
    result["changed"] = True
    if check_mode:
        return result
    state = StateRecord(params["state_dir"], KIND)
    state.record_originals([(row["path"], dict(name=row["name"], kind=row["kind"], value=row["before"])) for row in todo], result)
    failed = ["%s (/%s)%s %s" % (row["name"], row["path"], "" if written else ":", why)
              for row, why, written in write_rows(root, todo)]
    result["settings"] = [public(row) for row in rows]
    if failed:
        raise ChangeError("the kernel did not take every setting (the originals are recorded in %s; restore puts them back): %s"
                          % (result["state_file"], "; ".join(failed)), result, changed=True)
    return result


def public(row):
    shown = dict((key, row.get(key)) for key in ("name", "before", "after", "status"))
    shown["path"] = "/" + row["path"]
    return shown


def apply_restored(params, check_mode, diff):
    root = params["root"]
    result = dict(changed=False, settings=[], unavailable=[], not_restored=[],
                  state_file=state_path(params["state_dir"], KIND))
    state = StateRecord(params["state_dir"], KIND)
    state.load("nothing was restored: ", result)
    rows = []
    for path, entry in sorted(state.entries.items()):
        row = dict(name=entry.get("name", path), path=path, kind=entry.get("kind", "value"), value=entry.get("value"))
        row["before"] = read_setting(root, row)
        if row["before"] is None:
            result["not_restored"].append(dict(name=row["name"], path="/" + path, reason="the file is gone"))
            continue
        rows.append(row)
    todo = [row for row in rows if row["before"] != row["value"]]
    if diff:
        result["diff"] = diff_rows(todo, check_mode)
    if rows:
        result["changed"] = True
    for row in rows:
        row["status"] = "restored" if row in todo else "unchanged"
        row["after"] = row["value"]
    if check_mode or not rows:
        result["settings"] = [public(row) for row in rows]
        return result
    result["not_restored"] += [dict(name=row["name"], path="/" + row["path"], reason=why) for row, why, _written in write_rows(root, todo)]
    failed = set(item["path"] for item in result["not_restored"])
    for row in rows:
        if "/" + row["path"] not in failed:
            state.drop(row["path"])
    state.save("the values were restored but ", result)
    result["settings"] = [public(row) for row in rows if "/" + row["path"] not in failed]
    return result


def main():
    module = build_module()
    apply = apply_present if module.params["state"] == "present" else apply_restored
    run_change(module, apply, module.params, check_mode=module.check_mode, diff=module._diff)


if __name__ == "__main__":
    main()
