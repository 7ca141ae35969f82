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
module: npu_bind
short_description: Bind the CANN send workqueue of each Ascend NPU to chosen CPU cores
version_added: 0.1.0
description:
  - Sets the CPU mask of the per-device CANN workqueue C(dev<N>_sq_send_wq), the kernel worker that pushes
    submission queues to NPU N, through C(/sys/devices/virtual/workqueue/dev<N>_sq_send_wq/cpumask).
    Keeping it on a few cores next to the NPU (the plan's C(workqueue_cores)) avoids cross-NUMA wake-ups.
  - Reads every current mask first, computes the desired masks and writes only those that differ. The first
    time a mask is changed its original value is recorded in a versioned state file under O(state_dir), so
    O(state=restored) can put it back; a second apply never overwrites that record.
  - After writing it reads the masks back and fails when they did not converge. When a write fails, the masks
    already written in the same run are put back before the module fails.
  - With O(state=restored), writes back the recorded originals (all of them, or those of O(devices)), drops
    them from the state file and reports in RV(not_restored) what could not be restored.
options:
  devices:
    description:
      - The devices to bind. Required with O(state=present).
      - With O(state=restored), limits the restore to these device indices (their O(devices[].cores) are ignored);
        when omitted every recorded device is restored.
    type: list
    elements: dict
    suboptions:
      index:
        description: Device index N (the logic id, as in C(ASCEND_RT_VISIBLE_DEVICES) and C(dev<N>_sq_send_wq)).
        type: int
        required: true
      cores:
        description:
          - CPUs the workqueue may run on, typically the plan's C(workqueue_cores) of the device.
          - Required with O(state=present); must not be empty.
        type: list
        elements: int
  state:
    description: Bind the workqueues (V(present)) or put back the recorded originals (V(restored)).
    type: str
    choices: [present, restored]
    default: present
  sysfs_root:
    description:
      - Root of the file system that holds C(sys/devices/virtual/workqueue/) and C(proc/sys/kernel/random/boot_id).
        Only useful for tests.
    type: path
    default: /
  nr_cpus:
    description:
      - Width of the mask written, in CPUs (the kernel's C(nr_cpu_ids)).
      - When omitted, the width of the mask the kernel prints now is used (every hexadecimal digit is 4 CPUs).
      - Every core in O(devices[].cores) must be lower than this.
    type: int
  driver_version:
    description:
      - Version of the Ascend driver on the host, for example the C(driver_version) reported by
        M(aihost.llm_cluster.accelerator_facts).
      - When set and older than O(min_driver_version), the module refuses to run. When omitted the version is not checked.
    type: str
  min_driver_version:
    description: Oldest driver version whose send workqueue is expected to be unbound and to expose C(cpumask).
    type: str
    default: 24.1.0
  state_dir:
    description: Directory of the state file C(npu_bind.json) that records the original masks.
    type: path
    default: /var/lib/llm_cluster
  boot_record:
    description:
      - 'The masks the kernel had at this boot, as the prepare role''s boot unit (C(llm-cluster-npu-bind.service)) read
        them before it wrote the planned ones: C({"version": 1, "boot_id": ..., "devices": {"<index>": {"path",
        "mask"}}}). Used only when its C(boot_id) is this boot''s.'
      - With O(state=present), a mask changed for the first time takes its original from here when listed (after a
        reboot the mask read now is the boot unit's, not the kernel's).
      - With O(state=restored), the devices listed here are put back to these masks, also those whose record in the
        state file is of an earlier boot, and those with no record.
      - A missing file is no record.
    type: path
    default: /run/llm_cluster/npu_bind-boot.json
attributes:
  check_mode:
    description: Reports the masks it would write and writes nothing, neither masks nor state file.
    support: full
  diff_mode:
    description: Shows the CPU list of every handled workqueue before and after.
    support: full
  platform:
    description: Linux hosts with the Ascend NPU driver.
    support: full
    platforms: posix
notes:
  - The kernel creates the C(cpumask) attribute only for unbound workqueues. Drivers built without an unbound send
    workqueue create the directory without C(cpumask); the module then fails and names the file.
  - Masks do not survive a reboot (or a driver reload). Records made in an earlier boot are dropped, since the
    kernel has already reset those masks; the prepare role's boot unit writes the planned masks again at boot and
    records the kernel's in O(boot_record), from which a restore in that boot puts them back.
  - The state file is written atomically with mode C(0600).
seealso:
  - module: aihost.llm_cluster.affinity_apply
  - module: aihost.llm_cluster.accelerator_facts
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Bind the send workqueues of NPU 0 and 1 next to their NUMA node
  aihost.llm_cluster.npu_bind:
    devices:
      - index: 0
        cores: [22, 23]
      - index: 1
        cores: [46, 47]
    driver_version: "{{ llm_cluster_accelerators.driver_version }}"

- name: Bind every device of a CPU plan (plan.devices[].workqueue_cores)
  aihost.llm_cluster.npu_bind:
    devices: "{{ cpu_plan.devices | community.general.json_query('[].{index: index, cores: workqueue_cores}') }}"
    nr_cpus: "{{ cpu_plan.nr_cpus }}"

- name: Put the original masks back
  aihost.llm_cluster.npu_bind:
    state: restored
"""

RETURN = r"""
devices:
  description: One entry per handled workqueue, in O(devices) order (or in device order for a full restore).
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: Device index.
      type: int
      sample: 0
    path:
      description: The C(cpumask) file.
      type: str
      sample: /sys/devices/virtual/workqueue/dev0_sq_send_wq/cpumask
    before:
      description: CPU list of the mask before the run.
      type: str
      sample: 0-191
    after:
      description: CPU list after the run (in check mode, the planned one).
      type: str
      sample: 22-23
    mask_before:
      description: The mask as the kernel printed it before the run.
      type: str
      sample: ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff
    mask_after:
      description: The mask after the run (in check mode, the planned one).
      type: str
      sample: 00000000,00000000,00000000,00000000,00000000,00c00000
    changed:
      description: Whether this mask was (or in check mode would be) changed.
      type: bool
      sample: true
  sample:
    - index: 0
      path: /sys/devices/virtual/workqueue/dev0_sq_send_wq/cpumask
      before: 0-191
      after: 22-23
      mask_before: ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff
      mask_after: 00000000,00000000,00000000,00000000,00000000,00c00000
      changed: true
not_restored:
  description:
    - Recorded devices that were not restored, with the reason. Always empty with O(state=present).
    - Records of an earlier boot are listed here and dropped; records whose file is missing or whose write failed are kept
      for a later restore.
  returned: always
  type: list
  elements: dict
  sample:
    - index: 3
      path: /sys/devices/virtual/workqueue/dev3_sq_send_wq/cpumask
      reason: the cpumask file does not exist (device absent or driver not loaded)
state_file:
  description: Path of the state file.
  returned: always
  type: str
  sample: /var/lib/llm_cluster/npu_bind.json
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.aihost.llm_cluster.plugins.module_utils._ascend_versions import compare_ascend_versions
from ansible_collections.aihost.llm_cluster.plugins.module_utils._cpuset import (
    format_cpulist,
    format_cpumask,
    parse_cpumask,
)
from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError, StateRecord, diff_of, run_change
from ansible_collections.aihost.llm_cluster.plugins.module_utils._statefile import read_boot_id

KIND = "npu_bind"
WORKQUEUE_DIR = "sys/devices/virtual/workqueue"


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            devices=dict(
                type="list",
                elements="dict",
                options=dict(
                    index=dict(type="int", required=True),
                    cores=dict(type="list", elements="int"),
                ),
            ),
            state=dict(type="str", choices=["present", "restored"], default="present"),
            sysfs_root=dict(type="path", default="/"),
            nr_cpus=dict(type="int"),
            driver_version=dict(type="str"),
            min_driver_version=dict(type="str", default="24.1.0"),
            state_dir=dict(type="path", default="/var/lib/llm_cluster"),
            boot_record=dict(type="path", default="/run/llm_cluster/npu_bind-boot.json"),
        ),
        required_if=[("state", "present", ["devices"])],
        supports_check_mode=True,
    )


def workqueue_name(index):
    return "dev%d_sq_send_wq" % index


def cpumask_path(root, index):
    return os.path.join(root, WORKQUEUE_DIR, workqueue_name(index), "cpumask")


def read_boot_record(path, boot_id):
    """{index: mask} that the boot unit read from the kernel in this boot; {} without a record of this boot."""
    try:
        with open(path) as handle:
            doc = json.load(handle)
        if doc.get("version") != 1 or boot_id is None or doc.get("boot_id") != boot_id:
            return {}
        return dict((int(index), str(entry["mask"])) for index, entry in doc["devices"].items())
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def missing_reason(root, index, min_version):
    """Explain why the cpumask file of device ``index`` is missing."""
    wq_dir = os.path.dirname(cpumask_path(root, index))
    if os.path.isdir(wq_dir):
        return ("the workqueue %s exists but has no cpumask: the driver created it as a bound (per-CPU) workqueue, "
                "which cannot be given a CPU mask; install an Ascend driver %s or newer" % (workqueue_name(index), min_version))
    if not os.path.isdir(os.path.join(root, WORKQUEUE_DIR)):
        return "%s does not exist (sysfs not mounted?)" % os.path.join(root, WORKQUEUE_DIR)
    return ("the workqueue %s does not exist: NPU %d is absent or its driver is not loaded, or the driver is older than %s "
            "and does not expose the send workqueue in sysfs" % (workqueue_name(index), index, min_version))


def read_mask(path):
    with open(path, encoding="ascii") as handle:
        return handle.read().strip()


def write_mask(path, mask):
    with open(path, "w", encoding="ascii") as handle:
        handle.write(mask + "\n")


def mask_width(mask):
    """Number of CPUs a kernel mask string covers (4 per hexadecimal digit)."""
    return 4 * len(mask.replace(",", "").strip())


def check_driver(params):
    version = params["driver_version"]
    minimum = params["min_driver_version"]
    if not version:
        return
    try:
        older = compare_ascend_versions(version, minimum) < 0
    except ValueError as exc:
        raise ChangeError("cannot compare driver_version %r with min_driver_version %r: %s" % (version, minimum, to_native(exc)))
    if older:
        raise ChangeError(
            "the Ascend driver on this host is %s, older than %s: its CANN send workqueues (dev<N>_sq_send_wq) "
            "cannot be bound to CPUs. Upgrade the Ascend driver (HDK) to %s or newer, or drop the npu_bind step "
            "for this host; lower min_driver_version only if this driver is known to expose the workqueue cpumask."
            % (version, minimum, minimum))


def diff_text(rows, key):
    return "".join("%s: %s\n" % (workqueue_name(row["index"]), row[key] or "(none)") for row in rows)


def make_diff(rows, check_mode):
    return diff_of(diff_text(rows, "before"), diff_text(rows, "after"), "workqueue cpumask", check_mode)


def plan_devices(params, root):
    """One row per device: the mask before and the one planned; fails naming every device that cannot be bound."""
    seen = set()
    problems = []
    rows = []
    for device in params["devices"]:
        index = device["index"]
        if index < 0:
            raise ChangeError("devices: index %d is negative" % index)
        if index in seen:
            raise ChangeError("devices: index %d is listed twice" % index)
        seen.add(index)
        cores = sorted(set(device["cores"] or []))
        if not cores:
            raise ChangeError("devices: cores of device %d is empty; the kernel rejects a mask without CPUs" % index)
        path = cpumask_path(root, index)
        try:
            mask = read_mask(path)
            before = parse_cpumask(mask)
        except FileNotFoundError:
            problems.append("%s: not found; %s" % (path, missing_reason(root, index, params["min_driver_version"])))
            continue
        except (OSError, ValueError) as exc:
            problems.append("%s: cannot read the mask: %s" % (path, to_native(exc)))
            continue
        nr_cpus = params["nr_cpus"] or mask_width(mask)
        bad = [core for core in cores if core < 0 or core >= nr_cpus]
        if bad:
            problems.append("device %d: cores %s are outside the %d CPUs of the mask" % (index, format_cpulist(bad), nr_cpus))
            continue
        planned_mask = format_cpumask(cores, nr_cpus)
        changed = sorted(set(before)) != cores
        rows.append(dict(
            index=index,
            path=path,
            before=format_cpulist(before),
            after=format_cpulist(cores),
            mask_before=mask,
            mask_after=planned_mask if changed else mask,
            changed=changed,
            cores=cores,
        ))
    if problems:
        raise ChangeError("cannot bind the NPU send workqueues: " + "; ".join(problems))
    return rows


def apply_present(params, root, boot_id, check_mode=False, diff=False):
    check_driver(params)
    rows = plan_devices(params, root)
    state = StateRecord(params["state_dir"], KIND, boot_id)
    result = dict(changed=False, devices=rows, not_restored=[], state_file=state.path)
    to_change = [row for row in rows if row["changed"]]
    if diff:
        result["diff"] = make_diff(rows, check_mode)
    if not to_change:
        return finish(result)
    result["changed"] = True
    if check_mode:
        return finish(result)

    # Record the originals before the first write: the kernel's, which after a reboot the boot unit read
    # before it wrote the planned masks of the last run.
    boot = read_boot_record(params["boot_record"], boot_id)
    originals = []
    for row in to_change:
        mask = boot.get(row["index"], row["mask_before"])
        originals.append((workqueue_name(row["index"]), dict(index=row["index"], path=row["path"], mask=mask,
                                                             cpus=format_cpulist(parse_cpumask(mask)), boot_id=boot_id)))
    state.record_originals(originals, dict(devices=rows))

    written = []
    for row in to_change:
        try:
            write_mask(row["path"], row["mask_after"])
        except OSError as exc:
            rollback = rollback_masks(written)
            raise ChangeError("writing %s to %s failed: %s; %s" % (row["mask_after"], row["path"], to_native(exc), rollback),
                              dict(devices=rows))
        written.append(row)

    not_converged = []
    for row in rows:
        try:
            now = read_mask(row["path"])
            now_cpus = parse_cpumask(now)
        except (OSError, ValueError) as exc:
            not_converged.append("%s: cannot read back: %s" % (row["path"], to_native(exc)))
            continue
        row["mask_after"] = now
        row["after"] = format_cpulist(now_cpus)
        if sorted(set(now_cpus)) != row["cores"]:
            not_converged.append("%s reads %s, expected %s" % (row["path"], row["after"] or "(none)", format_cpulist(row["cores"])))
    if diff:
        result["diff"] = make_diff(rows, False)
    if not_converged:
        raise ChangeError("the workqueue masks did not converge: " + "; ".join(not_converged), strip(result))
    return finish(result)


def rollback_masks(written):
    failed = []
    for row in written:
        try:
            write_mask(row["path"], row["mask_before"])
        except OSError as exc:
            failed.append("%s (%s)" % (row["path"], to_native(exc)))
    if not written:
        return "no mask had been changed"
    if failed:
        return "could not put back the earlier masks of %s; run state=restored" % ", ".join(failed)
    return "the %d mask(s) written before were put back" % len(written)


def apply_restored(params, root, boot_id, check_mode=False, diff=False):
    state = StateRecord(params["state_dir"], KIND, boot_id)
    result = dict(changed=False, devices=[], not_restored=[], state_file=state.path)
    doc = state.load(result=strip(result))
    wanted = None
    if params["devices"]:
        wanted = set(device["index"] for device in params["devices"])

    records = []
    for key, entry in doc["entries"].items():
        if not isinstance(entry, dict) or "index" not in entry:
            continue
        if wanted is not None and entry["index"] not in wanted:
            continue
        records.append((key, entry))
    # The kernel's masks of this boot that the boot unit recorded: the originals of the devices it bound,
    # whatever the state file holds (nothing, or a record of the boot before).
    boot = read_boot_record(params["boot_record"], boot_id)
    recorded = set(entry["index"] for key, entry in records)
    for index in sorted(boot):
        if index not in recorded and (wanted is None or index in wanted):
            records.append((workqueue_name(index), dict(index=index, mask=boot[index], boot_id=boot_id)))
    records = [(key, dict(entry, mask=boot[entry["index"]], boot_id=boot_id) if entry["index"] in boot else entry)
               for key, entry in records]
    records.sort(key=lambda item: item[1]["index"])

    to_write = []
    for key, entry in records:
        index = entry["index"]
        path = cpumask_path(root, index)
        if entry.get("boot_id") != boot_id:
            result["not_restored"].append(dict(
                index=index, path=path,
                reason="recorded in an earlier boot (%s); the reboot already reset this mask" % entry.get("boot_id")))
            state.drop(key)
            continue
        try:
            mask = read_mask(path)
            before = parse_cpumask(mask)
            original = parse_cpumask(entry["mask"])
        except FileNotFoundError:
            result["not_restored"].append(dict(
                index=index, path=path, reason="the cpumask file does not exist (device absent or driver not loaded)"))
            continue
        except (OSError, ValueError) as exc:
            result["not_restored"].append(dict(index=index, path=path, reason="cannot read the masks: %s" % to_native(exc)))
            continue
        row = dict(index=index, path=path, before=format_cpulist(before), after=format_cpulist(original),
                   mask_before=mask, mask_after=entry["mask"], changed=sorted(set(before)) != sorted(set(original)))
        result["devices"].append(row)
        if row["changed"]:
            to_write.append((key, row, original))
        else:
            row["mask_after"] = mask
            state.drop(key)

    result["changed"] = bool(to_write)
    if diff:
        result["diff"] = make_diff(result["devices"], check_mode)
    if check_mode:
        return finish(result)

    for key, row, original in to_write:
        try:
            write_mask(row["path"], row["mask_after"])
            now = read_mask(row["path"])
            now_cpus = parse_cpumask(now)
        except (OSError, ValueError) as exc:
            result["not_restored"].append(dict(index=row["index"], path=row["path"], reason="write failed: %s" % to_native(exc)))
            row["after"], row["mask_after"], row["changed"] = row["before"], row["mask_before"], False
            continue
        row["mask_after"] = now
        row["after"] = format_cpulist(now_cpus)
        if sorted(set(now_cpus)) != sorted(set(original)):
            result["not_restored"].append(dict(
                index=row["index"], path=row["path"],
                reason="reads %s after writing the original %s" % (row["after"], format_cpulist(original))))
            continue
        state.drop(key)

    result["changed"] = any(row["changed"] for row in result["devices"])
    if diff:
        result["diff"] = make_diff(result["devices"], False)
    if state.dirty:
        state.save("the masks were restored but the state file was not updated: ", strip(result))
    return finish(result)


def strip(result):
    """The result without internal keys, for a failure."""
    cleaned = dict(result)
    cleaned.pop("changed", None)
    cleaned["devices"] = [public_row(row) for row in result.get("devices", [])]
    return cleaned


def public_row(row):
    return dict((key, value) for key, value in row.items() if key != "cores")


def finish(result):
    result["devices"] = [public_row(row) for row in result["devices"]]
    return result


def main():
    module = build_module()
    root = module.params["sysfs_root"]
    boot_id = read_boot_id(os.path.join(root, "proc"))
    apply = apply_present if module.params["state"] == "present" else apply_restored
    run_change(module, apply, module.params, root, boot_id, check_mode=module.check_mode, diff=module._diff)


if __name__ == "__main__":
    main()
