# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A fake procfs for the affinity tests: processes laid out as the kernel shows them.

``fake_kernel`` writes the kernel side (boot id, ``numa_balancing`` set to 1,
``interrupts`` and ``irq/<n>/smp_affinity_list`` at ``0-3`` for its IRQs);
``fake_process`` writes ``<proc>/<pid>/{stat,comm,cmdline,cgroup,environ}`` and
``task/<pid>``, with field 22 of ``stat`` (start time) set to ``1000 + pid``.
``INTERRUPTS`` is a four-CPU ``/proc/interrupts`` in the kernel's layout (a
header of CPU columns, numbered lines with per-CPU counters, chip, hardware IRQ,
type and action, and a named NMI line), reduced to four IRQs whose action names
are those of the Ascend driver; it is written for these tests, not captured.
"""

from __future__ import annotations

INTERRUPTS = """\
           CPU0       CPU1       CPU2       CPU3
 24:          1          0          0          0  IO-APIC   5-edge      ACPI:Ged
120:        100          0          0          0  ITS-MSI 524288 Edge      sq_send_trigger_irq
121:          0        200          0          0  ITS-MSI 524289 Edge      cq_update_irq
122:          0          0          0          0  ITS-MSI 524290 Edge      trs-mbox-0-0
NMI:          0          0          0          0   Non-maskable interrupts
"""


def fake_process(proc, pid, comm, ppid=1, cmdline=b"", cgroup="0::/\n", environ=b""):
    base = proc / str(pid)
    (base / "task" / str(pid)).mkdir(parents=True)
    (base / "stat").write_text("%d (%s) S %d 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n" % (pid, comm, ppid, 1000 + pid))
    (base / "comm").write_text(comm + "\n")
    (base / "cmdline").write_bytes(cmdline)
    (base / "cgroup").write_text(cgroup)
    (base / "environ").write_bytes(environ)


def fake_kernel(proc):
    """Write boot id ``boot-a``, ``numa_balancing`` 1 and the IRQs of INTERRUPTS under ``proc``; returns it."""
    (proc / "sys/kernel/random").mkdir(parents=True)
    (proc / "sys/kernel/random/boot_id").write_text("boot-a\n")
    (proc / "sys/kernel/numa_balancing").write_text("1\n")
    (proc / "interrupts").write_text(INTERRUPTS)
    for irq in (24, 120, 121, 122):
        (proc / "irq" / str(irq)).mkdir(parents=True)
        (proc / "irq" / str(irq) / "smp_affinity_list").write_text("0-3\n")
    return proc


def irq_affinity(proc, irq):
    """The stripped ``smp_affinity_list`` of ``irq`` under ``proc``."""
    return (proc / "irq" / str(irq) / "smp_affinity_list").read_text().strip()
