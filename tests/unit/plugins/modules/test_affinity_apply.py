# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Tests of affinity_apply against real processes (and a fake procfs for IRQs and sysctls).

The child processes name themselves like vLLM does (``VLLM::EngineCore_DP0``);
the kernel keeps only the first 15 characters of a ``comm``, so they show up as
``VLLM::EngineCor`` and the rules match that truncated name. Every test also
matches a random token in the command line so that it never binds processes of
another test run on the same machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import uuid

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _irq
from ansible_collections.aihost.llm_cluster.plugins.module_utils._cpuset import format_cpulist
from ansible_collections.aihost.llm_cluster.plugins.modules import affinity_apply
from ansible_collections.aihost.llm_cluster.tests.unit.plugins.modules.utils import run_module
from fake_procfs import fake_kernel, irq_affinity

ALL_CPUS = sorted(os.sched_getaffinity(0))
# Two CPUs this process may use (0 and 1 on a 2-CPU machine) and the text of all of them.
CPU_A, CPU_B = (ALL_CPUS + [None, None])[:2]
ALL_TEXT = format_cpulist(ALL_CPUS)
needs_two_cpus = pytest.mark.skipif(len(ALL_CPUS) < 2, reason="needs two CPUs to bind to a strict subset")

# Names itself, starts four threads, then keeps starting threads (every fourth one
# named acl_thread) for argv[2] seconds while the module runs; exits when stdin closes.
CHILD = textwrap.dedent(r"""
    import sys, threading, time
    name, seconds = sys.argv[1], float(sys.argv[2])
    with open("/proc/self/comm", "w") as handle:
        handle.write(name)
    stop = threading.Event()
    count = 0

    def worker(label):
        try:
            with open("/proc/thread-self/comm", "w") as handle:
                handle.write(label)
        except OSError:
            pass
        stop.wait()

    def start_one():
        global count
        label = "acl_thread" if count % 4 == 0 else "worker_%d" % count
        threading.Thread(target=worker, args=(label,), daemon=True).start()
        count += 1

    for index in range(4):
        start_one()
    time.sleep(0.05)
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and count < 150:
        start_one()
        time.sleep(0.005)
    time.sleep(0.05)
    print("done %d" % count, flush=True)
    sys.stdin.read()
""")


class Child:
    def __init__(self, name, seconds, token, extra_args=()):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, name, str(seconds), "--token=" + token] + list(extra_args),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        assert self.proc.stdout.readline().strip() == "ready"

    def wait_done(self):
        line = self.proc.stdout.readline().strip()
        assert line.startswith("done"), line

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def tids(self):
        return sorted(int(name) for name in os.listdir("/proc/%d/task" % self.pid))

    def allowed(self, tid):
        with open("/proc/%d/task/%d/status" % (self.pid, tid), encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Cpus_allowed_list:"):
                    return line.split(":", 1)[1].strip()
        raise AssertionError("no Cpus_allowed_list")

    def thread_comm(self, tid):
        with open("/proc/%d/task/%d/comm" % (self.pid, tid), encoding="utf-8") as handle:
            return handle.read().strip()

    def affinities(self):
        return dict((tid, self.allowed(tid)) for tid in self.tids())


@pytest.fixture
def token():
    return uuid.uuid4().hex


@pytest.fixture
def children():
    started = []

    def start(name="VLLM::EngineCore_DP0", seconds=1.0, token="x", extra_args=()):
        child = Child(name, seconds, token, extra_args)
        started.append(child)
        return child

    yield start
    for child in started:
        child.stop()


def run(args, check_mode=False, diff=False):
    return run_module(affinity_apply.main, args, check_mode=check_mode, diff=diff)


def engine_rule(token, cpus, **extra):
    rule = dict(comm=r"^VLLM::EngineCor$", cmdline=r"\x00--token=%s(\x00|$)" % token, cpus=cpus)
    rule.update(extra)
    return rule


def read_state(tmp_path):
    with open(str(tmp_path / "state" / "affinity_apply.json"), encoding="utf-8") as handle:
        return json.load(handle)


def write_state(tmp_path, doc):
    with open(str(tmp_path / "state" / "affinity_apply.json"), "w", encoding="utf-8") as handle:
        json.dump(doc, handle)


# ---------------------------------------------------------------------------
# Real processes
# ---------------------------------------------------------------------------

@needs_two_cpus
def test_comm_is_truncated_to_15_characters(children, token):
    child = children(seconds=0, token=token)
    with open("/proc/%d/comm" % child.pid, encoding="utf-8") as handle:
        assert handle.read().strip() == "VLLM::EngineCor"


@needs_two_cpus
def test_apply_binds_all_threads_of_all_matches_while_they_spawn(children, token, tmp_path):
    first = children(token=token)
    second = children(token=token)
    other = children(name="VLLM::Worker_DP0_TP0", seconds=0, token=token)
    args = dict(rules=[engine_rule(token, [CPU_B])], state_dir=str(tmp_path / "state"))

    result = run(args)
    assert result["changed"] is True, result
    assert result["settle_rounds"] >= 2
    by_pid = dict((entry["pid"], entry) for entry in result["processes"])
    assert sorted(by_pid) == sorted([first.pid, second.pid])
    for child in (first, second):
        entry = by_pid[child.pid]
        assert entry["comm"] == "VLLM::EngineCor"
        assert entry["cpus"] == str(CPU_B) and entry["rule"] == 0
        assert child.pid in entry["tids"] and entry["changed_tids"]
    # The workers keep spawning: new threads inherit the binding of their creator.
    first.wait_done()
    second.wait_done()
    for child in (first, second):
        affinities = child.affinities()
        assert len(affinities) > 10
        assert set(affinities.values()) == {str(CPU_B)}, affinities
    assert set(other.affinities().values()) == {ALL_TEXT}

    again = run(args)
    assert again["changed"] is False, again
    assert all(entry["changed_tids"] == [] for entry in again["processes"])

    recorded = read_state(tmp_path)
    assert recorded["version"] == 1 and recorded["kind"] == "affinity_apply"
    task = recorded["entries"]["task:%d:%d" % (first.pid, first.pid)]
    assert task["cpus"] == ALL_CPUS and task["applied"] == [CPU_B]
    assert task["start_time"] > 0 and task["boot_id"] == recorded["boot_id"]


@needs_two_cpus
def test_check_mode_leaves_affinity_untouched(children, token, tmp_path):
    child = children(seconds=0, token=token)
    before = child.affinities()
    result = run(dict(rules=[engine_rule(token, str(CPU_A))], state_dir=str(tmp_path / "state")), check_mode=True, diff=True)
    assert result["changed"] is True
    assert result["processes"][0]["cpus"] == str(CPU_A)
    assert sorted(result["processes"][0]["changed_tids"]) == sorted(before)
    assert child.affinities() == before
    assert not os.path.exists(str(tmp_path / "state"))
    assert result["diff"]["before"] == "pid %d (VLLM::EngineCor) threads %s: %s\n" % (
        child.pid, format_cpulist(sorted(before)), ALL_TEXT)
    assert result["diff"]["after"].endswith(": %d\n" % CPU_A)


@needs_two_cpus
def test_restore_brings_back_the_original_affinity(children, token, tmp_path):
    child = children(token=token)
    original = child.affinities()
    args = dict(rules=[engine_rule(token, [CPU_A])], state_dir=str(tmp_path / "state"))
    assert run(args)["changed"] is True
    child.wait_done()
    bound = child.affinities()
    assert set(bound.values()) == {str(CPU_A)}
    assert len(bound) > len(original)

    restore = dict(state="restored", state_dir=str(tmp_path / "state"))
    checked = run(restore, check_mode=True)
    assert checked["changed"] is True
    assert set(child.affinities().values()) == {str(CPU_A)}

    result = run(restore, diff=True)
    assert result["changed"] is True, result
    assert result["skipped"] == []
    # Threads started after the binding inherited it and get the process's original back.
    assert set(child.affinities().values()) == {ALL_TEXT}
    assert result["processes"][0]["pid"] == child.pid and result["processes"][0]["cpus"] == ALL_TEXT
    assert "threads" in result["diff"]["before"]
    assert not (tmp_path / "state" / "affinity_apply.json").exists()  # the last record took the file with it

    assert run(restore)["changed"] is False


@needs_two_cpus
def test_restore_skips_a_reused_pid(children, token, tmp_path):
    child = children(seconds=0, token=token)
    args = dict(rules=[engine_rule(token, [CPU_B])], state_dir=str(tmp_path / "state"))
    assert run(args)["changed"] is True
    doc = read_state(tmp_path)
    for entry in doc["entries"].values():
        if entry.get("pid") == child.pid:
            entry["start_time"] += 1
    write_state(tmp_path, doc)

    result = run(dict(state="restored", state_dir=str(tmp_path / "state")))
    assert result["changed"] is False
    assert len(result["skipped"]) == 1
    assert result["skipped"][0]["pid"] == child.pid
    assert "reused" in result["skipped"][0]["reason"]
    assert set(child.affinities().values()) == {str(CPU_B)}
    assert not (tmp_path / "state" / "affinity_apply.json").exists()  # the last record took the file with it


@needs_two_cpus
def test_thread_rules_later_rule_wins(children, token, tmp_path):
    child = children(seconds=0, token=token)
    rules = [engine_rule(token, [CPU_B]), engine_rule(token, [CPU_A], threads="^acl_thread$")]
    result = run(dict(rules=rules, state_dir=str(tmp_path / "state")))
    assert result["changed"] is True
    for tid, allowed in child.affinities().items():
        assert allowed == str(CPU_A if child.thread_comm(tid) == "acl_thread" else CPU_B), (tid, child.thread_comm(tid))
    rules_seen = sorted((entry["rule"], entry["cpus"]) for entry in result["processes"])
    assert rules_seen == [(0, str(CPU_B)), (1, str(CPU_A))]
    assert run(dict(rules=rules, state_dir=str(tmp_path / "state")))["changed"] is False


@needs_two_cpus
def test_parent_comm_pid_and_cpulist_string(children, token, tmp_path):
    child = children(seconds=0, token=token)
    with open("/proc/self/comm", encoding="utf-8") as handle:
        own = handle.read().strip()
    rules = [dict(parent_comm="^%s$" % re.escape(own), cmdline="--token=%s" % token, cpus=str(CPU_B))]
    result = run(dict(rules=rules, state_dir=str(tmp_path / "state")))
    assert [entry["pid"] for entry in result["processes"]] == [child.pid]
    assert set(child.affinities().values()) == {str(CPU_B)}
    result = run(dict(rules=[dict(pid=child.pid, cpus=ALL_CPUS)], state_dir=str(tmp_path / "state")))
    assert result["changed"] is True
    assert set(child.affinities().values()) == {ALL_TEXT}


def test_refuses_when_the_engine_binds_itself(children, token, tmp_path):
    child = children(seconds=0, token=token, extra_args=["--additional-config", '{"enable_cpu_binding": true}'])
    args = dict(rules=[engine_rule(token, ALL_CPUS[:1])], state_dir=str(tmp_path / "state"))
    result = run(args)
    assert result["failed"] is True
    assert "enable_cpu_binding" in result["msg"] and "PID %d" % child.pid in result["msg"]
    assert "force" in result["msg"]
    forced = run(dict(args, force=True))
    assert forced.get("failed") is not True, forced


def test_rule_without_match(token, tmp_path):
    rules = [dict(comm="^no-such-process-%s$" % token[:4], cpus=[0])]
    result = run(dict(rules=rules, state_dir=str(tmp_path / "state")))
    assert result["failed"] is True and "matches no running process" in result["msg"]
    rules[0]["optional"] = True
    result = run(dict(rules=rules, state_dir=str(tmp_path / "state")))
    assert result["changed"] is False and result["unmatched_rules"] == [0]


@pytest.mark.parametrize("rule, message", [
    (dict(cpus=[0]), "one of the following is required"),
    (dict(comm="(", cpus=[0]), "invalid regular expression"),
    (dict(comm="x", cpus="3-1"), "goes backwards"),
    (dict(comm="x", cpus=[]), "empty"),
])
def test_bad_rules(rule, message, tmp_path):
    result = run(dict(rules=[rule], state_dir=str(tmp_path / "state")))
    assert result["failed"] is True
    assert message in result["msg"]


# ---------------------------------------------------------------------------
# IRQs, numa_balancing and the irqbalance file on a fake procfs
# ---------------------------------------------------------------------------

@pytest.fixture
def fake_proc(tmp_path):
    return fake_kernel(tmp_path / "proc")


def test_irqs_sysctl_and_irqbalance_round_trip(fake_proc, tmp_path):
    config = tmp_path / "etc-default" / "irqbalance"
    config.parent.mkdir()
    config.write_text("# irqbalance\nIRQBALANCE_ONESHOT=0\nIRQBALANCE_BANNED_CPULIST=2\n")
    args = dict(
        proc_root=str(fake_proc),
        state_dir=str(tmp_path / "state"),
        irqs=[dict(irq="sq_send_trigger_irq|cq_update_irq", cpus=[2, 3]), dict(irq=122, cpus="3")],
        numa_balancing=False,
        irqbalance_banned_cpus="0-1",
        irqbalance_config=str(config),
    )
    checked = run(args, check_mode=True, diff=True)
    assert checked["changed"] is True
    assert irq_affinity(fake_proc, 120) == "0-3"
    assert "irq 120 (ITS-MSI 524288 Edge sq_send_trigger_irq): 2-3" in checked["diff"]["after"]

    result = run(args, diff=True)
    assert result["changed"] is True, result
    assert [(row["irq"], row["before"], row["after"]) for row in result["irqs"]] == [
        (120, "0-3", "2-3"), (121, "0-3", "2-3"), (122, "0-3", "3")]
    assert irq_affinity(fake_proc, 121) == "2-3" and irq_affinity(fake_proc, 24) == "0-3"
    assert (fake_proc / "sys/kernel/numa_balancing").read_text() == "0"
    assert result["numa_balancing"] == dict(before="1", after="0", changed=True)
    assert config.read_text() == "# irqbalance\nIRQBALANCE_ONESHOT=0\nIRQBALANCE_BANNED_CPULIST=0-1\n"
    assert result["irqbalance_banned"] == dict(path=str(config), before="2", after="0-1", changed=True)
    assert "kernel.numa_balancing: 1" in result["diff"]["before"]

    again = run(args)
    assert again["changed"] is False, again

    restore = dict(proc_root=str(fake_proc), state_dir=str(tmp_path / "state"), state="restored")
    restored = run(restore)
    assert restored["changed"] is True, restored
    assert restored["skipped"] == []
    assert irq_affinity(fake_proc, 120) == "0-3" and irq_affinity(fake_proc, 122) == "0-3"
    assert (fake_proc / "sys/kernel/numa_balancing").read_text() == "1"
    assert config.read_text() == "# irqbalance\nIRQBALANCE_ONESHOT=0\nIRQBALANCE_BANNED_CPULIST=2\n"
    assert run(restore)["changed"] is False


def test_irqbalance_file_created_and_removed(fake_proc, tmp_path):
    config = tmp_path / "etc" / "irqbalance"
    config.parent.mkdir()
    args = dict(proc_root=str(fake_proc), state_dir=str(tmp_path / "state"),
                irqbalance_banned_cpus=[0, 1, 2], irqbalance_config=str(config))
    assert run(args)["changed"] is True
    assert config.read_text() == "IRQBALANCE_BANNED_CPULIST=0-2\n"
    restored = run(dict(args, state="restored"))
    assert restored["changed"] is True
    assert not config.exists()


def test_irq_errors(fake_proc, tmp_path):
    base = dict(proc_root=str(fake_proc), state_dir=str(tmp_path / "state"))
    result = run(dict(base, irqs=[dict(irq="no_such_irq", cpus=[0])]))
    assert result["failed"] is True and "no IRQ in" in result["msg"]
    result = run(dict(base, irqs=[dict(irq=999, cpus=[0])]))
    assert result["failed"] is True and "IRQ 999 does not exist" in result["msg"]


def test_irq_restore_after_reboot_is_skipped(fake_proc, tmp_path):
    args = dict(proc_root=str(fake_proc), state_dir=str(tmp_path / "state"), irqs=[dict(irq=120, cpus=[1])])
    assert run(args)["changed"] is True
    (fake_proc / "sys/kernel/random/boot_id").write_text("boot-b\n")
    result = run(dict(args, state="restored"))
    assert result["changed"] is False
    assert irq_affinity(fake_proc, 120) == "1"
    assert "earlier boot" in result["skipped"][0]["reason"]


def test_irq_not_converged(fake_proc, tmp_path, monkeypatch):
    monkeypatch.setattr(_irq, "write_proc", lambda path, value: None)
    result = run(dict(proc_root=str(fake_proc), state_dir=str(tmp_path / "state"), irqs=[dict(irq=120, cpus=[1])]))
    assert result["failed"] is True
    assert "IRQ 120 reads 0-3, expected 1" in result["msg"]


def test_numa_balancing_true_keeps_a_nonzero_mode(fake_proc, tmp_path):
    (fake_proc / "sys/kernel/numa_balancing").write_text("2\n")
    result = run(dict(proc_root=str(fake_proc), state_dir=str(tmp_path / "state"), numa_balancing=True))
    assert result["changed"] is False
    (fake_proc / "sys/kernel/numa_balancing").write_text("0\n")
    result = run(dict(proc_root=str(fake_proc), state_dir=str(tmp_path / "state"), numa_balancing=True))
    assert result["changed"] is True and result["numa_balancing"]["after"] == "1"


def test_newer_state_file_refused(fake_proc, tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "affinity_apply.json").write_text(json.dumps({"version": 3, "kind": "affinity_apply", "entries": {}}))
    result = run(dict(proc_root=str(fake_proc), state_dir=str(state_dir), irqs=[dict(irq=120, cpus=[1])]))
    assert result["failed"] is True and "newer" in result["msg"]
    assert irq_affinity(fake_proc, 120) == "0-3"
