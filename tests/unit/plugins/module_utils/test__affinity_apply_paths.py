# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""affinity_apply's present and restored paths called directly, without AnsibleModule.

IRQs, numa_balancing and the irqbalance file live in a fake procfs and /etc;
thread affinities are set on a real child process through the kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from fake_procfs import fake_kernel, irq_affinity

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _irq
from ansible_collections.aihost.llm_cluster.plugins.module_utils._affinity_present import apply_present
from ansible_collections.aihost.llm_cluster.plugins.module_utils._affinity_restore import apply_restored
from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError
from ansible_collections.aihost.llm_cluster.plugins.module_utils._procfs import ProcTable
from ansible_collections.aihost.llm_cluster.plugins.module_utils._statefile import read_boot_id

ALL_CPUS = sorted(os.sched_getaffinity(0))


def params(proc_root, state_dir, **extra):
    base = dict(rules=[], state="present", settle=5, irqs=None, numa_balancing=None, irqbalance_banned_cpus=None,
                irqbalance_config=None, force=False, proc_root=str(proc_root), state_dir=str(state_dir))
    base.update(extra)
    return base


def run_present(args, **kwargs):
    return apply_present(args, ProcTable(args["proc_root"]), read_boot_id(args["proc_root"]), **kwargs)


def run_restored(args, **kwargs):
    return apply_restored(args, ProcTable(args["proc_root"]), read_boot_id(args["proc_root"]), **kwargs)


@pytest.fixture
def proc(tmp_path):
    return fake_kernel(tmp_path / "proc")


def state_entries(tmp_path):
    with open(str(tmp_path / "state" / "affinity_apply.json"), encoding="utf-8") as handle:
        return json.load(handle)["entries"]


def test_check_mode_plans_and_writes_nothing(proc, tmp_path):
    args = params(proc, tmp_path / "state", irqs=[dict(irq=120, cpus=[1])], numa_balancing=False)
    result = run_present(args, check_mode=True, diff=True)
    assert result["changed"] is True
    assert result["irqs"] == [dict(irq=120, name="ITS-MSI 524288 Edge sq_send_trigger_irq", before="0-3", after="1",
                                   changed=True)]
    assert result["diff"]["after_header"] == "affinity (planned)"
    assert result["diff"]["after"] == "irq 120 (ITS-MSI 524288 Edge sq_send_trigger_irq): 1\nkernel.numa_balancing: 0\n"
    assert irq_affinity(proc, 120) == "0-3" and not (tmp_path / "state").exists()


def test_apply_records_then_restores(proc, tmp_path):
    config = tmp_path / "etc" / "irqbalance"
    config.parent.mkdir()
    moves = []

    def move(src, dest):
        moves.append(dest)
        os.replace(src, dest)

    args = params(proc, tmp_path / "state", irqs=[dict(irq=120, cpus=[1])], numa_balancing=False,
                  irqbalance_banned_cpus="0-1", irqbalance_config=str(config))
    result = run_present(args, diff=True, move=move)
    assert result["changed"] is True and result["diff"]["after_header"] == "affinity (after)"
    assert moves == [str(config)] and config.read_text() == "IRQBALANCE_BANNED_CPULIST=0-1\n"
    assert irq_affinity(proc, 120) == "1"
    entries = state_entries(tmp_path)
    assert entries["irq:120"] == dict(irq=120, name="ITS-MSI 524288 Edge sq_send_trigger_irq", cpus=[0, 1, 2, 3],
                                      boot_id="boot-a")
    assert entries["sysctl:kernel.numa_balancing"] == dict(value="1", boot_id="boot-a")
    assert entries["irqbalance:%s" % config] == dict(path=str(config), existed=False, value=None)
    assert run_present(args)["changed"] is False

    restored = run_restored(dict(args, state="restored"), move=move)
    assert restored["changed"] is True and restored["skipped"] == []
    assert irq_affinity(proc, 120) == "0-3" and (proc / "sys/kernel/numa_balancing").read_text() == "1"
    assert not config.exists()
    assert not (tmp_path / "state" / "affinity_apply.json").exists()
    assert run_restored(dict(args, state="restored"))["changed"] is False


def test_not_converged_raises_with_the_result(proc, tmp_path, monkeypatch):
    monkeypatch.setattr(_irq, "write_proc", lambda path, value: None)
    with pytest.raises(ChangeError) as raised:
        run_present(params(proc, tmp_path / "state", irqs=[dict(irq=120, cpus=[1])]))
    assert "IRQ 120 reads 0-3, expected 1" in raised.value.msg
    assert raised.value.msg.startswith("the binding did not converge (recorded originals can be put back")
    assert "changed" not in raised.value.result
    assert raised.value.result["irqs"][0]["after"] == "0-3"
    assert "irq:120" in state_entries(tmp_path)


def test_restore_skips_other_boots_and_keeps_unreadable_irqs(proc, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    entries = {
        "irq:120": dict(irq=120, name="ITS-MSI 524288 Edge sq_send_trigger_irq", cpus=[0], boot_id="boot-old"),
        "irq:121": dict(irq=121, name="someone else", cpus=[0], boot_id="boot-a"),
        "irq:130": dict(irq=130, name="gone", cpus=[0], boot_id="boot-a"),
        "sysctl:kernel.numa_balancing": dict(value="0", boot_id="boot-old"),
        "proc:999999999": dict(pid=999999999, start_time=1, boot_id="boot-a", comm="x", cpus=[0], applied=[[1]]),
    }
    (state / "affinity_apply.json").write_text(json.dumps(
        {"version": 1, "kind": "affinity_apply", "boot_id": "boot-a", "entries": entries}))
    result = run_restored(params(proc, state, state="restored"))
    reasons = [(entry.get("irq") or entry.get("sysctl") or entry.get("pid"), entry["reason"]) for entry in result["skipped"]]
    assert reasons[0] == (999999999, "process 999999999 has exited")
    assert reasons[1] == (120, "recorded in an earlier boot (boot-old)")
    assert reasons[2] == (121, "IRQ 121 now belongs to 'ITS-MSI 524289 Edge cq_update_irq', recorded 'someone else'")
    assert reasons[3][0] == 130 and "cannot be read (IRQ freed?)" in reasons[3][1]
    assert reasons[4] == ("kernel.numa_balancing", "recorded in an earlier boot")
    assert result["changed"] is False
    assert sorted(state_entries(tmp_path)) == ["irq:130"]


def test_restore_refuses_a_newer_state_file(proc, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "affinity_apply.json").write_text(json.dumps({"version": 9, "kind": "affinity_apply", "entries": {}}))
    with pytest.raises(ChangeError, match="newer"):
        run_restored(params(proc, state, state="restored"))


@pytest.mark.skipif(len(ALL_CPUS) < 2, reason="needs two CPUs to bind to a strict subset")
def test_threads_of_a_real_process_bound_and_restored(tmp_path):
    token = uuid.uuid4().hex
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", "--token=" + token],
                             stdin=subprocess.PIPE)
    try:
        rule = dict(cmdline=r"\x00--token=%s$" % token, cpus=[ALL_CPUS[0]])
        args = params("/proc", tmp_path / "state", rules=[rule], settle=0)
        result = run_present(args)
        assert result["changed"] is True
        assert [(entry["pid"], entry["cpus"], entry["changed_tids"]) for entry in result["processes"]] == [
            (child.pid, str(ALL_CPUS[0]), [child.pid])]
        assert sorted(os.sched_getaffinity(child.pid)) == [ALL_CPUS[0]]
        assert run_present(args)["changed"] is False

        restored = run_restored(dict(args, state="restored"))
        assert restored["changed"] is True and restored["skipped"] == []
        assert sorted(os.sched_getaffinity(child.pid)) == ALL_CPUS
    finally:
        child.stdin.close()
        child.wait()


SPAWNER = """
import sys, threading
def block(started):
    print(threading.get_native_id(), flush=True)
    started.wait()
for line in sys.stdin:
    threading.Thread(target=block, args=(threading.Event(),), daemon=True).start()
"""


@pytest.mark.skipif(len(ALL_CPUS) < 2, reason="needs two CPUs")
def test_restore_catches_a_thread_started_with_a_bound_set_while_it_runs(tmp_path, monkeypatch):
    """A thread that a still-bound thread starts during the restore gets the original too (the settle loop)."""
    from ansible_collections.aihost.llm_cluster.plugins.module_utils import _affinity_restore

    token = uuid.uuid4().hex
    child = subprocess.Popen([sys.executable, "-c", SPAWNER, "--token=" + token],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    late = []
    original_apply_threads = _affinity_restore.Restorer.apply_threads

    def apply_threads_then_a_late_thread(self):
        original_apply_threads(self)
        # What the kernel does when a thread not restored yet starts one: it inherits the bound set.
        child.stdin.write("spawn\n")
        child.stdin.flush()
        tid = int(child.stdout.readline())
        os.sched_setaffinity(tid, [ALL_CPUS[0]])
        late.append(tid)

    try:
        rule = dict(cmdline=r"\x00--token=%s$" % token, cpus=[ALL_CPUS[0]])
        args = params("/proc", tmp_path / "state", rules=[rule], settle=5)
        assert run_present(args)["changed"] is True
        monkeypatch.setattr(_affinity_restore.Restorer, "apply_threads", apply_threads_then_a_late_thread)
        restored = run_restored(dict(args, state="restored"))
        assert restored["skipped"] == []
        assert late and sorted(os.sched_getaffinity(late[0])) == ALL_CPUS
        assert restored["settle_rounds"] >= 2

        monkeypatch.setattr(_affinity_restore.Restorer, "apply_threads", original_apply_threads)
        assert run_present(args)["changed"] is True
        without = run_restored(dict(args, state="restored", settle=0))
        assert without["settle_rounds"] == 0
    finally:
        child.stdin.close()
        child.wait()
