# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""roles/prepare/files/llm_cluster_npu_bind.py, the boot unit's script, on a fake sysfs root; and with the
npu_bind module across a reboot: apply, reboot (the kernel's masks and a new boot id), the boot script binds
again without Ansible, a deploy changes nothing, a restore puts the kernel's masks of that boot back."""

from __future__ import annotations

import json
import os
import threading

import pytest

from ansible_collections.aihost.llm_cluster.plugins.modules import npu_bind
from ansible_collections.aihost.llm_cluster.tests.unit.plugins.modules.test_npu_bind import ALL_192, make_root
from ansible_collections.aihost.llm_cluster.tests.unit.plugins.modules.utils import run_module
from role_files import load_role_file

CPU23_192 = "00000000,00000000,00000000,00000000,00000000,00800000"
CPUS_0_3_192 = "00000000,00000000,00000000,00000000,00000000,0000000f"


@pytest.fixture
def script():
    return load_role_file("prepare", "llm_cluster_npu_bind.py")


@pytest.fixture
def root(tmp_path):
    return make_root(tmp_path / "root", 2, "boot-1")


def path(root, index):
    return root / "sys/devices/virtual/workqueue" / ("dev%d_sq_send_wq" % index) / "cpumask"


def config(root, tmp_path, devices, wait=0):
    return {"sysfs_root": str(root), "boot_record": str(tmp_path / "run" / "npu_bind-boot.json"), "wait": wait,
            "devices": [{"index": index, "path": str(path(root, index)), "mask": mask} for index, mask in devices]}


def record(tmp_path):
    return json.loads((tmp_path / "run" / "npu_bind-boot.json").read_text())


def reboot(root, boot_id):
    """What a reboot does to the masks: the kernel's own again, under a new boot id."""
    for index in range(2):
        path(root, index).write_text(ALL_192 + "\n")
    (root / "proc/sys/kernel/random/boot_id").write_text(boot_id + "\n")


def test_writes_each_planned_mask_and_records_the_kernel_s_first(script, root, tmp_path, capsys):
    assert script.bind(config(root, tmp_path, [(0, CPU23_192), (1, CPUS_0_3_192)])) == []
    assert path(root, 0).read_text().strip() == CPU23_192 and path(root, 1).read_text().strip() == CPUS_0_3_192
    assert record(tmp_path) == {"version": 1, "boot_id": "boot-1", "devices": {
        "0": {"path": str(path(root, 0)), "mask": ALL_192}, "1": {"path": str(path(root, 1)), "mask": ALL_192}}}
    assert "NPU 0: %s set to %s (was %s)" % (path(root, 0), CPU23_192, ALL_192) in capsys.readouterr().out
    # Run again in the same boot (the unit restarted): the kernel's masks stay recorded, nothing is written.
    assert script.bind(config(root, tmp_path, [(0, CPU23_192), (1, CPUS_0_3_192)])) == []
    assert record(tmp_path)["devices"]["0"]["mask"] == ALL_192
    assert "already holds the planned mask" in capsys.readouterr().out


def test_a_record_of_an_earlier_boot_is_replaced(script, root, tmp_path):
    script.bind(config(root, tmp_path, [(0, CPU23_192)]))
    reboot(root, "boot-2")
    path(root, 0).write_text(CPUS_0_3_192 + "\n")  # this boot's kernel default differs
    script.bind(config(root, tmp_path, [(0, CPU23_192)]))
    assert record(tmp_path) == {"version": 1, "boot_id": "boot-2", "devices": {
        "0": {"path": str(path(root, 0)), "mask": CPUS_0_3_192}}}


def test_a_workqueue_that_appears_late_is_waited_for(script, root, tmp_path):
    late = path(root, 1)
    late.unlink()
    staged = late.with_name(late.name + ".new")

    def appear():
        # At once, as sysfs shows a driver's file: a write_text would let the script see it empty, bind it, and then
        # have the rest of this write land over the script's mask.
        staged.write_text(ALL_192 + "\n")
        os.replace(staged, late)

    timer = threading.Timer(1.0, appear)
    timer.start()
    try:
        assert script.bind(config(root, tmp_path, [(1, CPU23_192)], wait=30)) == []
    finally:
        timer.join()
    assert late.read_text().strip() == CPU23_192


def test_a_missing_workqueue_fails_naming_it_and_the_others_are_bound(script, root, tmp_path, capsys):
    path(root, 0).unlink()
    conf = tmp_path / "npu-bind.json"
    conf.write_text(json.dumps(config(root, tmp_path, [(0, CPU23_192), (1, CPU23_192)])))
    assert script.main([str(conf)]) == 1
    out = capsys.readouterr().out
    assert "NPU 0: %s: No such file or directory (the driver is not loaded, or the device is gone)" % path(root, 0) in out
    assert path(root, 1).read_text().strip() == CPU23_192


def test_across_a_reboot_the_masks_come_back_without_ansible_and_restore_puts_the_kernel_s_back(script, root, tmp_path):
    state_dir, boot_record = str(tmp_path / "state"), str(tmp_path / "run" / "npu_bind-boot.json")
    args = {"sysfs_root": str(root), "state_dir": state_dir, "boot_record": boot_record,
            "devices": [{"index": 0, "cores": [23]}, {"index": 1, "cores": [0, 1, 2, 3]}]}
    applied = run_module(npu_bind.main, args)
    assert applied["changed"] is True
    # What the role writes for the boot unit: the module's read-back.
    planned = [(row["index"], row["mask_after"]) for row in applied["devices"]]
    reboot(root, "boot-2")
    assert script.bind(config(root, tmp_path, planned)) == []
    assert path(root, 0).read_text().strip() == CPU23_192 and path(root, 1).read_text().strip() == CPUS_0_3_192
    # The next deploy finds the masks in place.
    assert run_module(npu_bind.main, args)["changed"] is False
    # A restore in this boot puts back what the kernel had (the state file's records are of the boot before).
    restored = run_module(npu_bind.main, {"sysfs_root": str(root), "state_dir": state_dir, "boot_record": boot_record,
                                          "state": "restored"})
    assert restored["changed"] is True and restored["not_restored"] == []
    assert path(root, 0).read_text().strip() == ALL_192 and path(root, 1).read_text().strip() == ALL_192
    again = run_module(npu_bind.main, {"sysfs_root": str(root), "state_dir": state_dir, "boot_record": boot_record,
                                       "state": "restored"})
    assert again["changed"] is False


def test_a_plan_changed_after_a_reboot_records_the_kernel_s_mask_not_the_boot_unit_s(script, root, tmp_path):
    state_dir, boot_record = str(tmp_path / "state"), str(tmp_path / "run" / "npu_bind-boot.json")
    reboot(root, "boot-3")
    # The boot unit bound NPU 0 to CPU 23 (the plan of a run before this boot, whose record is gone).
    script.bind(config(root, tmp_path, [(0, CPU23_192)]))
    changed = run_module(npu_bind.main, {"sysfs_root": str(root), "state_dir": state_dir, "boot_record": boot_record,
                                         "devices": [{"index": 0, "cores": [0, 1, 2, 3]}]})
    assert changed["changed"] is True
    with open(tmp_path / "state" / "npu_bind.json", encoding="utf-8") as handle:
        assert json.load(handle)["entries"]["dev0_sq_send_wq"]["mask"] == ALL_192
