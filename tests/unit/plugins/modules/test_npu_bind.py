# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.aihost.llm_cluster.plugins.modules import npu_bind
from ansible_collections.aihost.llm_cluster.tests.unit.plugins.modules.utils import run_module

# The 192-CPU Kunpeng host of vendor-tools.md section 3.1.
ALL_192 = "ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff"
NUMA6_192 = "000000ff,ffff0000,00000000,00000000,00000000,00000000"
CPU23_192 = "00000000,00000000,00000000,00000000,00000000,00800000"
BOOT_ID = "0f6c2d1e-1111-2222-3333-444455556666"


def make_root(base, devices, boot_id):
    """A fake sysfs/procfs root at ``base``: ``devices`` NPU send workqueues at their default mask, a boot id."""
    for index in range(devices):
        wq = base / "sys/devices/virtual/workqueue" / ("dev%d_sq_send_wq" % index)
        wq.mkdir(parents=True)
        (wq / "cpumask").write_text(ALL_192 + "\n")
    boot = base / "proc/sys/kernel/random"
    boot.mkdir(parents=True)
    (boot / "boot_id").write_text(boot_id + "\n")
    return base


@pytest.fixture
def root(tmp_path):
    """A fake sysfs/procfs root with four NPU send workqueues at their default mask."""
    return make_root(tmp_path / "root", 4, BOOT_ID)


def mask(root, index):
    return (root / "sys/devices/virtual/workqueue" / ("dev%d_sq_send_wq" % index) / "cpumask").read_text()


def run(args, check_mode=False, diff=False):
    return run_module(npu_bind.main, args, check_mode=check_mode, diff=diff)


def base_args(root, tmp_path, **extra):
    args = dict(
        sysfs_root=str(root),
        state_dir=str(tmp_path / "state"),
        devices=[dict(index=0, cores=list(range(144, 168))), dict(index=1, cores=[23])],
    )
    args.update(extra)
    return args


def state(tmp_path):
    with open(os.path.join(str(tmp_path / "state"), "npu_bind.json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_apply_then_second_apply_unchanged(root, tmp_path):
    result = run(base_args(root, tmp_path))
    assert result["changed"] is True, result
    assert mask(root, 0) == NUMA6_192 + "\n"
    assert mask(root, 1) == CPU23_192 + "\n"
    assert mask(root, 2) == ALL_192 + "\n"
    assert [(row["index"], row["before"], row["after"], row["changed"]) for row in result["devices"]] == [
        (0, "0-191", "144-167", True), (1, "0-191", "23", True)]
    assert result["devices"][0]["mask_after"] == NUMA6_192
    assert result["not_restored"] == []

    recorded = state(tmp_path)
    assert recorded["version"] == 1 and recorded["kind"] == "npu_bind" and recorded["boot_id"] == BOOT_ID
    assert recorded["entries"]["dev0_sq_send_wq"]["mask"] == ALL_192
    assert recorded["entries"]["dev1_sq_send_wq"]["boot_id"] == BOOT_ID

    again = run(base_args(root, tmp_path))
    assert again["changed"] is False
    assert [row["changed"] for row in again["devices"]] == [False, False]


def test_second_apply_with_other_cores_keeps_the_original(root, tmp_path):
    run(base_args(root, tmp_path))
    result = run(base_args(root, tmp_path, devices=[dict(index=0, cores=[0, 1])]))
    assert result["changed"] is True
    assert mask(root, 0) == "00000000,00000000,00000000,00000000,00000000,00000003\n"
    assert state(tmp_path)["entries"]["dev0_sq_send_wq"]["mask"] == ALL_192


def test_check_mode_writes_nothing(root, tmp_path):
    result = run(base_args(root, tmp_path), check_mode=True)
    assert result["changed"] is True
    assert result["devices"][0]["after"] == "144-167"
    assert result["devices"][0]["mask_after"] == NUMA6_192
    assert mask(root, 0) == ALL_192 + "\n"
    assert not os.path.exists(str(tmp_path / "state"))


def test_diff_shows_cpulists(root, tmp_path):
    result = run(base_args(root, tmp_path), diff=True)
    assert result["diff"]["before"] == "dev0_sq_send_wq: 0-191\ndev1_sq_send_wq: 0-191\n"
    assert result["diff"]["after"] == "dev0_sq_send_wq: 144-167\ndev1_sq_send_wq: 23\n"
    planned = run(base_args(root, tmp_path, devices=[dict(index=2, cores=[1, 2, 3])]), check_mode=True, diff=True)
    assert planned["diff"]["after"] == "dev2_sq_send_wq: 1-3\n"
    assert planned["diff"]["after_header"].endswith("(planned)")


def test_restore(root, tmp_path):
    run(base_args(root, tmp_path))
    args = dict(sysfs_root=str(root), state_dir=str(tmp_path / "state"), state="restored")
    checked = run(args, check_mode=True, diff=True)
    assert checked["changed"] is True
    assert mask(root, 0) == NUMA6_192 + "\n"
    assert checked["diff"]["after"] == "dev0_sq_send_wq: 0-191\ndev1_sq_send_wq: 0-191\n"

    result = run(args)
    assert result["changed"] is True
    assert [(row["index"], row["before"], row["after"]) for row in result["devices"]] == [
        (0, "144-167", "0-191"), (1, "23", "0-191")]
    assert mask(root, 0) == ALL_192 + "\n" and mask(root, 1) == ALL_192 + "\n"
    assert result["not_restored"] == []
    assert not (tmp_path / "state" / "npu_bind.json").exists()  # the last record took the file with it

    again = run(args)
    assert again["changed"] is False and again["devices"] == []


def test_restore_only_some_devices_and_report_missing(root, tmp_path):
    run(base_args(root, tmp_path))
    args = dict(sysfs_root=str(root), state_dir=str(tmp_path / "state"), state="restored")
    partial = run(dict(args, devices=[dict(index=1)]))
    assert [row["index"] for row in partial["devices"]] == [1]
    assert mask(root, 0) == NUMA6_192 + "\n"
    os.remove(str(root / "sys/devices/virtual/workqueue/dev0_sq_send_wq/cpumask"))
    result = run(args)
    assert result["changed"] is False
    assert result["not_restored"][0]["index"] == 0
    assert "does not exist" in result["not_restored"][0]["reason"]
    assert "dev0_sq_send_wq" in state(tmp_path)["entries"]


def test_restore_after_reboot_drops_stale_records(root, tmp_path):
    run(base_args(root, tmp_path))
    (root / "proc/sys/kernel/random/boot_id").write_text("another-boot\n")
    result = run(dict(sysfs_root=str(root), state_dir=str(tmp_path / "state"), state="restored"))
    assert result["changed"] is False
    assert mask(root, 0) == NUMA6_192 + "\n"
    assert all("earlier boot" in row["reason"] for row in result["not_restored"])
    assert not (tmp_path / "state" / "npu_bind.json").exists()  # the last record took the file with it


def test_missing_file_error(root, tmp_path):
    result = run(base_args(root, tmp_path, devices=[dict(index=0, cores=[1]), dict(index=7, cores=[2])]))
    assert result["failed"] is True
    assert "dev7_sq_send_wq/cpumask: not found" in result["msg"]
    assert "NPU 7 is absent" in result["msg"] and "driver" in result["msg"]
    assert mask(root, 0) == ALL_192 + "\n"


def test_directory_without_cpumask_names_bound_workqueue(root, tmp_path):
    os.remove(str(root / "sys/devices/virtual/workqueue/dev2_sq_send_wq/cpumask"))
    result = run(base_args(root, tmp_path, devices=[dict(index=2, cores=[1])]))
    assert result["failed"] is True
    assert "exists but has no cpumask" in result["msg"]


def test_old_driver_error(root, tmp_path):
    result = run(base_args(root, tmp_path, driver_version="23.0.7"))
    assert result["failed"] is True
    assert "23.0.7" in result["msg"] and "24.1.0" in result["msg"] and "Upgrade the Ascend driver" in result["msg"]
    assert mask(root, 0) == ALL_192 + "\n"
    ok = run(base_args(root, tmp_path, driver_version="25.0.rc1.1"))
    assert ok["changed"] is True


def test_bad_cores(root, tmp_path):
    result = run(base_args(root, tmp_path, devices=[dict(index=0, cores=[192])]))
    assert result["failed"] is True and "outside the 192 CPUs" in result["msg"]
    result = run(base_args(root, tmp_path, devices=[dict(index=0, cores=[])]))
    assert result["failed"] is True and "empty" in result["msg"]
    result = run(base_args(root, tmp_path, devices=[dict(index=0, cores=[1]), dict(index=0, cores=[2])]))
    assert result["failed"] is True and "twice" in result["msg"]


def test_narrow_kernel_mask_and_nr_cpus(root, tmp_path):
    # A 2-CPU VM prints "3".
    (root / "sys/devices/virtual/workqueue/dev3_sq_send_wq/cpumask").write_text("3\n")
    result = run(base_args(root, tmp_path, devices=[dict(index=3, cores=[1])]))
    assert result["devices"][0]["before"] == "0-1"
    assert result["devices"][0]["after"] == "1"
    result = run(base_args(root, tmp_path, devices=[dict(index=3, cores=[1])], nr_cpus=2))
    assert result["changed"] is False


def test_not_converged(root, tmp_path, monkeypatch):
    monkeypatch.setattr(npu_bind, "write_mask", lambda path, value: None)
    result = run(base_args(root, tmp_path))
    assert result["failed"] is True
    assert "did not converge" in result["msg"]


def test_write_failure_rolls_back(root, tmp_path, monkeypatch):
    real_write = npu_bind.write_mask

    def write_mask(path, value):
        if "dev1_" in path and value != ALL_192:
            raise OSError(22, "Invalid argument")
        real_write(path, value)

    monkeypatch.setattr(npu_bind, "write_mask", write_mask)
    result = run(base_args(root, tmp_path))
    assert result["failed"] is True
    assert "Invalid argument" in result["msg"] and "put back" in result["msg"]
    assert mask(root, 0) == ALL_192 + "\n"


def test_newer_state_file_refused(root, tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "npu_bind.json").write_text(json.dumps({"version": 9, "kind": "npu_bind", "entries": {}}))
    result = run(base_args(root, tmp_path))
    assert result["failed"] is True and "newer" in result["msg"]
    assert mask(root, 0) == ALL_192 + "\n"
