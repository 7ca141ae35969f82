# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""IRQ affinities, kernel.numa_balancing and the irqbalance file on a fake procfs and /etc."""

from __future__ import annotations

import os

import pytest
from fake_procfs import INTERRUPTS, fake_kernel

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _irq
from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError


@pytest.fixture
def proc(tmp_path):
    return fake_kernel(tmp_path / "proc")


def test_parse_interrupts():
    parsed = _irq.parse_interrupts(INTERRUPTS)
    assert parsed == [(24, "IO-APIC 5-edge ACPI:Ged"), (120, "ITS-MSI 524288 Edge sq_send_trigger_irq"),
                      (121, "ITS-MSI 524289 Edge cq_update_irq"), (122, "ITS-MSI 524290 Edge trs-mbox-0-0")]
    assert _irq.parse_interrupts("") == []


def test_irqbalance_default(tmp_path):
    assert _irq.irqbalance_default(str(tmp_path)) == os.path.join(str(tmp_path), "default", "irqbalance")
    (tmp_path / "sysconfig").mkdir()
    assert _irq.irqbalance_default(str(tmp_path)) == os.path.join(str(tmp_path), "sysconfig", "irqbalance")


def test_plan_irqs_by_name_and_number_later_wins(proc):
    rows = _irq.plan_irqs(str(proc), [dict(irq="sq_send_trigger_irq|cq_update_irq", cpus=[2, 3]),
                                      dict(irq="121", cpus="0-3"), dict(irq=122, cpus=[3])])
    assert [(row["irq"], row["name"], row["before"], row["after"], row["changed"]) for row in rows] == [
        (120, "ITS-MSI 524288 Edge sq_send_trigger_irq", [0, 1, 2, 3], [2, 3], True),
        (121, "ITS-MSI 524289 Edge cq_update_irq", [0, 1, 2, 3], [0, 1, 2, 3], False),
        (122, "ITS-MSI 524290 Edge trs-mbox-0-0", [0, 1, 2, 3], [3], True)]
    assert rows[0]["path"] == os.path.join(str(proc), "irq", "120", "smp_affinity_list")
    assert _irq.plan_irqs(str(proc), None) == []


@pytest.mark.parametrize("spec, message", [
    (dict(irq="no_such_irq", cpus=[0]), r"irqs\[0\]: no IRQ in .*interrupts matches 'no_such_irq'"),
    (dict(irq=999, cpus=[0]), r"irqs\[0\]: IRQ 999 does not exist \(no .*irq/999/smp_affinity_list\)"),
    (dict(irq=True, cpus=[0]), r"irqs\[0\]\.irq: expected an IRQ number or a regular expression"),
    (dict(irq="(", cpus=[0]), r"irqs\[0\]\.irq: invalid regular expression"),
    (dict(irq=120, cpus=[]), r"irqs\[0\]\.cpus: the CPU set is empty"),
])
def test_plan_irqs_errors(proc, spec, message):
    with pytest.raises(ChangeError, match=message):
        _irq.plan_irqs(str(proc), [spec])


def test_plan_irqs_without_interrupts_file(tmp_path):
    with pytest.raises(ChangeError, match="cannot read .*interrupts"):
        _irq.plan_irqs(str(tmp_path), [dict(irq=1, cpus=[0])])


def test_plan_numa(proc, tmp_path):
    assert _irq.plan_numa(str(proc), None) is None
    off = _irq.plan_numa(str(proc), False)
    assert (off["before"], off["after"], off["changed"], off["value"]) == ("1", "0", True, "0")
    assert _irq.plan_numa(str(proc), True)["changed"] is False
    (proc / "sys/kernel/numa_balancing").write_text("2\n")
    assert _irq.plan_numa(str(proc), True)["after"] == "2"
    (proc / "sys/kernel/numa_balancing").write_text("0\n")
    assert _irq.plan_numa(str(proc), True)["after"] == "1"
    assert _irq.plan_numa(str(tmp_path), False)["changed"] is False
    with pytest.raises(ChangeError, match="the kernel has no automatic NUMA balancing"):
        _irq.plan_numa(str(tmp_path), True)


def test_read_and_edit_the_banned_line(tmp_path):
    path = tmp_path / "irqbalance"
    assert _irq.read_banned(str(path)) == (False, None, "")
    path.write_text('# comment\nexport IRQBALANCE_BANNED_CPULIST="4-5"\nIRQBALANCE_ONESHOT=0\nIRQBALANCE_BANNED_CPULIST=6\n')
    existed, value, text = _irq.read_banned(str(path))
    assert (existed, value) == (True, "6")
    assert _irq.banned_text(text, "0-1") == "# comment\nIRQBALANCE_BANNED_CPULIST=0-1\nIRQBALANCE_ONESHOT=0\n"
    assert _irq.banned_text(text, None) == "# comment\nIRQBALANCE_ONESHOT=0\n"
    assert _irq.banned_text("", "2") == "IRQBALANCE_BANNED_CPULIST=2\n"
    assert _irq.banned_text("IRQBALANCE_BANNED_CPULIST=2\n", None) == ""


def test_read_banned_of_a_directory_is_an_error(tmp_path):
    with pytest.raises(ChangeError, match="cannot read"):
        _irq.read_banned(str(tmp_path))


def test_plan_banned(tmp_path):
    path = tmp_path / "irqbalance"
    path.write_text("IRQBALANCE_BANNED_CPULIST=0,1\n")
    assert _irq.plan_banned(None, str(path)) is None
    row = _irq.plan_banned([1, 0], str(path))
    assert (row["before"], row["after"], row["changed"], row["existed"]) == ("0,1", "0-1", False, True)
    row = _irq.plan_banned("0-3", str(path))
    assert row["changed"] is True and row["after"] == "0-3"


def test_same_cpulist():
    assert _irq.same_cpulist("0,1", "0-1") is True
    assert _irq.same_cpulist(None, None) is True
    assert _irq.same_cpulist(None, "0") is False
    assert _irq.same_cpulist("x", "x") is True and _irq.same_cpulist("x", "0") is False


def test_write_banned_needs_the_directory(tmp_path):
    with pytest.raises(ChangeError, match=r"does not exist \(is irqbalance installed\?\)"):
        _irq.write_banned(str(tmp_path / "default" / "irqbalance"), "x\n")
    _irq.write_banned(str(tmp_path / "irqbalance"), "IRQBALANCE_BANNED_CPULIST=1\n")
    assert (tmp_path / "irqbalance").read_text() == "IRQBALANCE_BANNED_CPULIST=1\n"


def test_apply_and_verify(proc, tmp_path):
    rows = _irq.plan_irqs(str(proc), [dict(irq=120, cpus=[1])])
    numa = _irq.plan_numa(str(proc), False)
    config = tmp_path / "irqbalance"
    config.write_text("")
    banned = _irq.plan_banned([2], str(config))
    problems = []
    _irq.apply_irqs(rows, problems)
    _irq.apply_numa(numa, problems)
    _irq.write_banned(banned["path"], _irq.banned_text(banned["text"], banned["after"]))
    _irq.verify_others(rows, numa, banned, problems)
    assert problems == []
    assert (proc / "irq/120/smp_affinity_list").read_text() == "1"
    assert (proc / "sys/kernel/numa_balancing").read_text() == "0"


def test_verify_reports_what_did_not_converge(proc, tmp_path):
    rows = _irq.plan_irqs(str(proc), [dict(irq=120, cpus=[1])])
    numa = _irq.plan_numa(str(proc), False)
    banned = _irq.plan_banned([2], str(tmp_path / "irqbalance"))
    problems = []
    _irq.verify_others(rows, numa, banned, problems)
    assert problems == ["IRQ 120 reads 0-3, expected 1",
                        "%s reads 1, expected 0" % (proc / "sys/kernel/numa_balancing"),
                        "%s has IRQBALANCE_BANNED_CPULIST=None, expected 2" % (tmp_path / "irqbalance")]
    assert rows[0]["after"] == [0, 1, 2, 3] and numa["after"] == "1" and banned["after"] is None


def test_write_failures_are_listed(tmp_path):
    rows = [dict(irq=7, path=str(tmp_path / "absent" / "smp_affinity_list"), after=[1], changed=True)]
    numa = dict(path=str(tmp_path / "absent" / "numa_balancing"), value="0", changed=True)
    problems = []
    _irq.apply_irqs(rows, problems)
    _irq.apply_numa(numa, problems)
    _irq.apply_numa(None, problems)
    assert len(problems) == 2
    assert problems[0].startswith("IRQ 7: writing 1 to ") and "No such file" in problems[0]
    assert problems[1].startswith("writing 0 to ")
