# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""host_tuning and the tuning's boot script on a root built from real kernel files.

The sysctl and hugepage files are a Linux 6.18 host's, the cpufreq directories a real intel_pstate host's
from node_exporter's fixtures (tests/fixtures/system/README.md): nothing here is typed by hand but the
values the tests ask for.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil

import pytest

from ansible_collections.aihost.llm_cluster.plugins.modules import host_tuning
from ansible_collections.aihost.llm_cluster.tests.unit.plugins.modules.utils import run_module

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "..", "fixtures", "system")
KERNEL = os.path.join(FIXTURES, "kernel-6.18-tuning")
CPUFREQ = os.path.join(FIXTURES, "node-exporter-sys-cpufreq-intel_pstate.ttar")
BOOT_SCRIPT = os.path.join(HERE, "..", "..", "..", "..", "roles", "prepare", "files", "llm_cluster_tuning.py")
TTAR = os.path.join(HERE, "..", "..", "..", "fakes", "ttar.py")
PROFILE = {"vm.swappiness": "0", "kernel.sched_migration_cost_ns": "50000", "net.core.somaxconn": "65535"}


def load_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def root(tmp_path):
    base = tmp_path / "root"
    shutil.copytree(KERNEL, str(base))
    load_file(TTAR, "ttar").unpack(CPUFREQ, str(base), "/cpufreq/")
    return base


def read(root, path):
    return (root / path).read_text()


def run(root, tmp_path, check_mode=False, diff=False, **args):
    args.setdefault("root", str(root))
    args.setdefault("state_dir", str(tmp_path / "state"))
    return run_module(host_tuning.main, args, check_mode=check_mode, diff=diff)


def apply_profile(root, tmp_path, **extra):
    args = dict(sysctl=dict(PROFILE), optional=["kernel.sched_migration_cost_ns"], transparent_hugepage="always",
                cpu_governor="performance")
    args.update(extra)
    return run(root, tmp_path, **args)


def test_the_fixture_is_what_the_kernel_wrote(root):
    assert read(root, "sys/kernel/mm/transparent_hugepage/enabled") == "always [madvise] never\n"
    assert read(root, "proc/sys/vm/swappiness") == "60\n"
    assert read(root, "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor") == "powersave\n"
    assert read(root, "sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors") == "performance powersave\n"


def test_apply_records_the_hosts_values_and_a_second_run_changes_nothing(root, tmp_path):
    result = apply_profile(root, tmp_path)
    assert result["changed"] is True
    assert read(root, "proc/sys/vm/swappiness") == "0\n"
    assert read(root, "proc/sys/net/core/somaxconn") == "65535\n"
    assert read(root, "sys/kernel/mm/transparent_hugepage/enabled").strip() in ("always", "[always] madvise never")
    for cpu in range(4):
        assert read(root, "sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor" % cpu) == "performance\n"
    # The kernel's debugfs move: reported, not failed, not written.
    assert [item["name"] for item in result["unavailable"]] == ["kernel.sched_migration_cost_ns"]
    assert "5.13" in result["unavailable"][0]["reason"]
    assert not (root / "proc/sys/kernel/sched_migration_cost_ns").exists()
    state = json.loads((tmp_path / "state" / "host_tuning.json").read_text())
    originals = dict((path, entry["value"]) for path, entry in state["entries"].items())
    assert originals["proc/sys/vm/swappiness"] == "60"
    assert originals["proc/sys/net/core/somaxconn"] == "4096"
    assert originals["sys/kernel/mm/transparent_hugepage/enabled"] == "madvise"
    assert originals["sys/devices/system/cpu/cpu2/cpufreq/scaling_governor"] == "powersave"
    assert len(originals) == 7
    again = apply_profile(root, tmp_path)
    assert again["changed"] is False
    assert set(row["status"] for row in again["settings"]) == {"unchanged"}


def test_a_later_change_keeps_the_first_original(root, tmp_path):
    apply_profile(root, tmp_path)
    apply_profile(root, tmp_path, sysctl={"vm.swappiness": "1"})
    state = json.loads((tmp_path / "state" / "host_tuning.json").read_text())
    assert state["entries"]["proc/sys/vm/swappiness"]["value"] == "60"


def test_check_mode_reports_the_drift_and_writes_nothing(root, tmp_path):
    before = dict((path, read(root, path)) for path in ("proc/sys/vm/swappiness", "sys/kernel/mm/transparent_hugepage/enabled"))
    result = apply_profile(root, tmp_path, check_mode=True, diff=True)
    assert result["changed"] is True
    assert "vm.swappiness = 60\n" in result["diff"]["before"]
    assert "vm.swappiness = 0\n" in result["diff"]["after"]
    assert "transparent_hugepage = madvise\n" in result["diff"]["before"]
    assert "cpu_governor = powersave (cpu0)\n" in result["diff"]["before"]
    assert not (tmp_path / "state").exists()
    for path, text in before.items():
        assert read(root, path) == text


def test_vectors_compare_with_their_whitespace_collapsed(root, tmp_path):
    # The kernel prints tcp_rmem with tabs; the same numbers with spaces are no change.
    current = read(root, "proc/sys/net/ipv4/tcp_rmem")
    assert "\t" in current
    result = run(root, tmp_path, sysctl={"net.ipv4.tcp_rmem": " ".join(current.split())})
    assert result["changed"] is False


def test_restore_puts_every_original_back_and_drops_the_records(root, tmp_path):
    paths = ("proc/sys/vm/swappiness", "proc/sys/net/core/somaxconn", "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor")
    pristine = dict((path, read(root, path)) for path in paths)
    apply_profile(root, tmp_path)
    result = run(root, tmp_path, state="restored", diff=True)
    assert result["changed"] is True
    assert result["not_restored"] == []
    for path, text in pristine.items():
        assert read(root, path) == text
    assert "madvise" in read(root, "sys/kernel/mm/transparent_hugepage/enabled")
    assert not (tmp_path / "state" / "host_tuning.json").exists()
    assert run(root, tmp_path, state="restored")["changed"] is False


def test_restore_in_check_mode_writes_nothing(root, tmp_path):
    apply_profile(root, tmp_path)
    result = run(root, tmp_path, state="restored", check_mode=True)
    assert result["changed"] is True
    assert read(root, "proc/sys/vm/swappiness") == "0\n"
    assert (tmp_path / "state" / "host_tuning.json").exists()


@pytest.mark.parametrize("args, named", [
    (dict(sysctl={"vm.swapiness": "0"}), "vm.swapiness"),
    (dict(sysctl={"../../etc/passwd": "x"}), "not a kernel parameter name"),
    (dict(sysctl={"vm.swappiness": "0\nkernel.panic = 1"}), "not one value"),
    (dict(cpu_governor="ondemand"), "cpu0 offers performance powersave"),
])
def test_a_bad_value_changes_nothing(root, tmp_path, args, named):
    failure = run(root, tmp_path, **dict(args, sysctl=dict(args.get("sysctl", {}), **{"net.core.somaxconn": "65535"})))
    assert failure["failed"] is True
    assert named in failure["msg"]
    assert failure["msg"].startswith("nothing was changed")
    assert read(root, "proc/sys/net/core/somaxconn") == "4096\n"
    assert not (tmp_path / "state").exists()


def test_a_value_the_kernel_does_not_take_fails_naming_it(root, tmp_path, monkeypatch):
    real_write = host_tuning.write_value

    def clamping(base, path, value):
        # A kernel that clamps swappiness to 10, as a hardened one might.
        real_write(base, path, "10" if path.endswith("swappiness") else value)

    monkeypatch.setattr(host_tuning, "write_value", clamping)
    failure = run(root, tmp_path, sysctl={"vm.swappiness": "0"})
    assert failure["failed"] is True
    assert "vm.swappiness (/proc/sys/vm/swappiness) reads 10 after writing 0" in failure["msg"]
    # Recorded before the write, so restore can still put the host's value back.
    monkeypatch.setattr(host_tuning, "write_value", real_write)
    run(root, tmp_path, state="restored")
    assert read(root, "proc/sys/vm/swappiness") == "60\n"


def test_a_host_without_cpufreq_or_thp_reports_them(tmp_path):
    base = tmp_path / "bare"
    (base / "proc/sys/vm").mkdir(parents=True)
    shutil.copy(os.path.join(KERNEL, "proc/sys/vm/swappiness"), str(base / "proc/sys/vm/swappiness"))
    result = run(base, tmp_path, sysctl={"vm.swappiness": "60"}, transparent_hugepage="always", cpu_governor="performance")
    assert result["changed"] is False
    assert sorted(item["name"] for item in result["unavailable"]) == ["cpu_governor", "transparent_hugepage"]


def load_boot_script():
    return load_file(BOOT_SCRIPT, "llm_cluster_tuning")


def test_the_boot_script_writes_the_sysfs_values_again_after_a_reboot(root, tmp_path):
    result = apply_profile(root, tmp_path)
    config = {"root": str(root), "settings": [dict(name=row["name"], path=row["path"], value=row["after"])
                                              for row in result["settings"]
                                              if row["name"] in ("transparent_hugepage", "cpu_governor")]}
    assert len(config["settings"]) == 5
    # A reboot: sysfs holds the kernel's defaults again.
    (root / "sys/kernel/mm/transparent_hugepage/enabled").write_text("always [madvise] never\n")
    for cpu in range(4):
        (root / ("sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor" % cpu)).write_text("powersave\n")
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps(config))
    script = load_boot_script()
    assert script.main([str(path)]) == 0
    assert "always" in read(root, "sys/kernel/mm/transparent_hugepage/enabled")
    assert read(root, "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor") == "performance\n"
    # Nothing differs now: the module agrees.
    assert apply_profile(root, tmp_path)["changed"] is False


def test_the_boot_script_names_a_setting_it_cannot_write(root, tmp_path, capsys):
    config = {"root": str(root), "settings": [
        {"name": "cpu_governor", "path": "/sys/devices/system/cpu/cpu9/cpufreq/scaling_governor", "value": "performance"},
        {"name": "cpu_governor", "path": "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "value": "performance"},
    ]}
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps(config))
    assert load_boot_script().main([str(path)]) == 1
    assert "cpu9" in capsys.readouterr().err
    # The others are still written.
    assert read(root, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") == "performance\n"
