# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""After converge: workqueues and every thread of the stand-in workers follow the plan; after a reboot of
the masks (the kernel's own again, a new boot id, an empty /run) the boot unit binds the workqueues again
without Ansible (and cleanup.yml's restore then puts back the kernel's masks of that boot)."""

from __future__ import annotations

import json
import subprocess

testinfra_hosts = ["ansible://all"]

# The plan for prepare_affinity_layout on two CPUs: DP rank n's worker on CPU n.
PLANNED = {"VLLM::Worker_DP0": "0", "VLLM::Worker_DP1": "1"}
WORKQUEUE = {0: (164, 167), 1: (160, 163), 2: (116, 119), 3: (112, 115),
             4: (20, 23), 5: (16, 19), 6: (68, 71), 7: (64, 67)}


def affinity(host):
    return json.loads(host.check_output("python3 /var/tmp/llmc/affinity_report.py"))


def test_every_worker_thread_follows_the_plan(host):
    report = affinity(host)
    for title, cpus in PLANNED.items():
        assert report[title] == [cpus], (title, report[title])


def test_threads_started_after_binding_inherit_it(host):
    # The stand-ins start a thread every 0.2 s: after a second, all of them are new.
    host.run("sleep 1.5")
    report = affinity(host)
    for title, cpus in PLANNED.items():
        assert report[title] == [cpus]


def test_engines_without_planned_cores_are_left_alone(host):
    online = host.file("/sys/devices/system/cpu/online").content_string.strip()
    report = affinity(host)
    assert report["VLLM::EngineCore_DP0"] == [online]
    assert report["VLLM::EngineCore_DP1"] == [online]


def test_workqueues_follow_llm_solution(host):
    for device, (first, last) in WORKQUEUE.items():
        mask = host.file("/var/lib/llm-cluster-fakes/sys/devices/virtual/workqueue/dev%d_sq_send_wq/cpumask" % device)
        value = int(mask.content_string.strip().replace(",", ""), 16)
        assert value == sum(1 << cpu for cpu in range(first, last + 1))


def test_originals_recorded_with_process_identity(host):
    state = json.loads(host.file("/var/lib/llm_cluster/affinity_apply.json").content_string)
    assert state["version"] == 1 and state["boot_id"]
    assert state["entries"]


FAKES = "/var/lib/llm-cluster-fakes"
ALL_192 = ",".join(["ffffffff"] * 6)


def test_after_a_reboot_the_boot_unit_binds_the_workqueues_again(host):
    assert host.service("llm-cluster-npu-bind.service").is_enabled
    config = json.loads(host.file("/etc/llm_cluster/npu-bind.json").content_string)
    assert [device["index"] for device in config["devices"]] == list(range(8))
    # What a reboot does to the masks: the kernel's own (every CPU), under a new boot id; /run is empty.
    for device in range(8):
        host.check_output("echo %s > %s/sys/devices/virtual/workqueue/dev%d_sq_send_wq/cpumask" % (ALL_192, FAKES, device))
    boot_id = host.check_output("cat /proc/sys/kernel/random/uuid")
    host.check_output("mkdir -p %s/proc/sys/kernel/random && echo %s > %s/proc/sys/kernel/random/boot_id" % (
        FAKES, boot_id, FAKES))
    host.check_output("rm -f /run/llm_cluster/npu_bind-boot.json")
    # What the boot does: the enabled unit runs (multi-user.target wants it).
    host.check_output("systemctl restart llm-cluster-npu-bind.service")
    test_workqueues_follow_llm_solution(host)
    record = json.loads(host.file("/run/llm_cluster/npu_bind-boot.json").content_string)
    assert record["boot_id"] == boot_id
    assert {entry["mask"] for entry in record["devices"].values()} == {ALL_192} and len(record["devices"]) == 8
    journal = host.check_output("journalctl -u llm-cluster-npu-bind.service --no-pager")
    assert journal.count("(was %s)" % ALL_192) >= 8, journal[-2000:]


# The host tuning: the Ascend profile (bind1 is the head, so the listen backlog too) on a Linux 6.18 host's
# sysctl and hugepage files and an intel_pstate host's cpufreq files (tests/fixtures/system).
TUNED = {"proc/sys/vm/swappiness": "0", "proc/sys/net/core/somaxconn": "65535",
         "proc/sys/net/ipv4/tcp_max_syn_backlog": "65535"}
GOVERNORS = ["sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor" % cpu for cpu in range(4)]
THP = "sys/kernel/mm/transparent_hugepage/enabled"


def test_the_host_is_tuned_and_its_own_values_recorded(host):
    for path, value in TUNED.items():
        assert host.file("%s/%s" % (FAKES, path)).content_string.strip() == value, path
    for path in GOVERNORS:
        assert host.file("%s/%s" % (FAKES, path)).content_string.strip() == "performance", path
    assert host.file("%s/%s" % (FAKES, THP)).content_string.strip() == "always"
    # This kernel has no sched_migration_cost_ns (debugfs since 5.13): skipped, not invented.
    assert not host.file(FAKES + "/proc/sys/kernel/sched_migration_cost_ns").exists
    state = json.loads(host.file("/var/lib/llm_cluster/host_tuning.json").content_string)
    originals = {path: entry["value"] for path, entry in state["entries"].items()}
    assert originals["proc/sys/vm/swappiness"] == "60"
    assert originals["proc/sys/net/core/somaxconn"] == "4096"
    assert originals[THP] == "madvise"
    assert {originals[path] for path in GOVERNORS} == {"powersave"}


def test_the_sysctls_are_kept_in_sysctl_d(host):
    conf = host.file("/etc/sysctl.d/90-llm-cluster-tuning.conf")
    assert conf.mode == 0o644 and conf.user == "root"
    lines = [line for line in conf.content_string.splitlines() if line and not line.startswith("#")]
    assert sorted(lines) == ["net.core.somaxconn = 65535", "net.ipv4.tcp_max_syn_backlog = 65535", "vm.swappiness = 0"]
    # systemd's own reader takes the file as a sysctl.d drop-in.
    assert "/etc/sysctl.d/90-llm-cluster-tuning.conf" in host.check_output("/lib/systemd/systemd-sysctl --cat-config")


def test_a_container_restart_brings_back_the_masks_and_the_tuning(host):
    """A reboot as far as a container goes: systemd boots again, /run is empty, and the enabled boot units run.

    sysfs values of the fake tree survive a container restart (it is a directory, not the kernel), so the test
    first puts them where a reboot leaves them: every mask on all 192 CPUs, the kernel's hugepage mode and
    governors, a new boot id. The sysctls are systemd-sysctl's at a real boot; a container's /proc/sys is
    read-only, so only the file that it reads is checked (above).
    """
    for device in range(8):
        host.check_output("echo %s > %s/sys/devices/virtual/workqueue/dev%d_sq_send_wq/cpumask" % (ALL_192, FAKES, device))
    host.check_output("echo 'always [madvise] never' > %s/%s" % (FAKES, THP))
    for path in GOVERNORS:
        host.check_output("echo powersave > %s/%s" % (FAKES, path))
    boot_id = host.check_output("cat /proc/sys/kernel/random/uuid")
    host.check_output("echo %s > %s/proc/sys/kernel/random/boot_id" % (boot_id, FAKES))
    restarted = subprocess.run(["docker", "restart", "--time", "30", "bind1"], capture_output=True, text=True, timeout=120,
                               check=False)
    assert restarted.returncode == 0, restarted.stderr
    # systemd's bus comes up a moment after the container starts; then wait for the end of the boot.
    state = host.run("for _ in $(seq 60); do state=$(systemctl is-system-running --wait 2>/dev/null) && break; "
                     "case $state in running|degraded) break ;; esac; sleep 1; done; echo $state")
    assert state.stdout.strip() in ("running", "degraded"), state.stdout + state.stderr
    # /run is a new tmpfs: the record in it is this boot's, written by the unit before it bound anything.
    record = json.loads(host.file("/run/llm_cluster/npu_bind-boot.json").content_string)
    assert record["boot_id"] == boot_id
    assert {entry["mask"] for entry in record["devices"].values()} == {ALL_192}
    for unit in ("llm-cluster-npu-bind.service", "llm-cluster-tuning.service"):
        shown = host.check_output("systemctl show %s --property=ActiveState,Result" % unit)
        assert "ActiveState=active" in shown and "Result=success" in shown, (unit, shown)
    test_workqueues_follow_llm_solution(host)
    assert host.file("%s/%s" % (FAKES, THP)).content_string.strip() == "always"
    for path in GOVERNORS:
        assert host.file("%s/%s" % (FAKES, path)).content_string.strip() == "performance", path
    journal = host.check_output("journalctl -b -u llm-cluster-tuning.service --no-pager")
    assert "cpu_governor = performance" in journal, journal[-2000:]
    # The stand-in engines were transient: start them again for cleanup's affinity checks.
    host.check_output("systemd-run --unit=llmc-fake-vllm /usr/bin/python3 /var/tmp/llmc/fake_vllm.py launch "
                      "VLLM::EngineCore_DP0=VLLM::Worker_DP0 VLLM::EngineCore_DP1=VLLM::Worker_DP1")
    host.check_output("for _ in $(seq 30); do [ \"$(pgrep -c -f '^VLLM::Worker_DP')\" = 2 ] && exit 0; sleep 1; done; exit 1")
