# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""CPU set codecs: the kernel's cpulist and cpumask text formats.

Pure functions, standard library only.

* cpulist (``%*pbl``): what ``/sys/devices/system/cpu/online``,
  ``.../node*/cpulist``, ``local_cpulist``, ``Cpus_allowed_list`` and
  ``/proc/irq/<n>/smp_affinity_list`` hold, e.g. ``0-3,8,10-11``.
* cpumask (``%*pb``): what ``/sys/devices/virtual/workqueue/*/cpumask``,
  ``local_cpus`` and ``/proc/irq/<n>/smp_affinity`` hold: 32-bit hex words,
  most significant first, separated by commas, e.g.
  ``000000ff,ffff0000,00000000,00000000,00000000,00000000`` for CPUs 144-167
  of a 192-CPU host.

CPU sets are passed around as sorted lists of unique ints.
"""

from __future__ import annotations

import re

_CPULIST_ITEM_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
_MASK_WORD_RE = re.compile(r"^[0-9A-Fa-f]{1,8}$")
_WORD_BITS = 32
_WORD_MASK = (1 << _WORD_BITS) - 1


def parse_cpulist(text):
    """Parse a cpulist such as ``0-3,8,10-11`` into a sorted list of unique ints.

    Surrounding whitespace (the kernel's trailing newline) is ignored and an
    empty string is the empty set. Anything else raises ``ValueError`` naming
    the offending text.
    """
    if not isinstance(text, str):
        raise ValueError("cpulist must be a string, got %r" % (text,))
    body = text.strip()
    if not body:
        return []
    cpus = set()
    for item in body.split(","):
        match = _CPULIST_ITEM_RE.match(item.strip())
        if not match:
            raise ValueError("invalid cpulist %r: bad item %r" % (text, item))
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ValueError("invalid cpulist %r: range %r goes backwards" % (text, item))
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def _checked(cpus):
    """Return ``cpus`` as a sorted list of unique non-negative ints."""
    result = set()
    for cpu in cpus:
        if isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 0:
            raise ValueError("invalid CPU number %r" % (cpu,))
        result.add(cpu)
    return sorted(result)


def format_cpulist(cpus):
    """Format CPUs as a compressed cpulist: ``[0, 1, 2, 3, 8, 10, 11]`` -> ``0-3,8,10-11``.

    Two or more consecutive CPUs become a range, as the kernel prints them.
    The empty set is the empty string.
    """
    ordered = _checked(cpus)
    items = []
    start = None
    previous = None
    for cpu in ordered:
        if start is None:
            start = previous = cpu
            continue
        if cpu == previous + 1:
            previous = cpu
            continue
        items.append(_range_text(start, previous))
        start = previous = cpu
    if start is not None:
        items.append(_range_text(start, previous))
    return ",".join(items)


def _range_text(first, last):
    return str(first) if first == last else "%d-%d" % (first, last)


def parse_cpumask(text):
    """Parse a kernel cpumask (``00000000,00ffffff``) into a sorted list of CPUs.

    Words are comma-separated hex groups of up to 8 digits, most significant
    first. The kernel prints every group but the first zero-padded to 8
    digits; shorter groups (``ff,ffff0000``) are read as the kernel's own
    parser reads them. Raises ``ValueError`` naming the offending text.
    """
    if not isinstance(text, str):
        raise ValueError("cpumask must be a string, got %r" % (text,))
    body = text.strip()
    if not body:
        raise ValueError("invalid cpumask %r: empty" % (text,))
    value = 0
    for word in body.split(","):
        if not _MASK_WORD_RE.match(word):
            raise ValueError("invalid cpumask %r: bad word %r" % (text, word))
        value = (value << _WORD_BITS) | int(word, 16)
    # bin() gives "0b..." most significant bit first: reverse it and drop "0b".
    bits = bin(value)[:1:-1]
    return [cpu for cpu, bit in enumerate(bits) if bit == "1"]


def format_cpumask(cpus, nr_cpus):
    """Format CPUs as a kernel cpumask for a host with ``nr_cpus`` CPU ids.

    ``nr_cpus`` is the kernel's ``nr_cpu_ids`` (one more than the highest
    possible CPU, see ``/sys/devices/system/cpu/possible``); the mask has
    ``ceil(nr_cpus / 32)`` words of 8 zero-padded hex digits, most significant
    first: ``format_cpumask(range(144, 168), 192)`` ->
    ``000000ff,ffff0000,00000000,00000000,00000000,00000000``.

    The kernel prints the first word of a host whose ``nr_cpu_ids`` is not a
    multiple of 32 with fewer digits (``3`` on a 2-CPU host) and accepts both
    forms on write, so compare masks with ``parse_cpumask``, not as strings.
    A CPU at or above ``nr_cpus`` raises ``ValueError``.
    """
    if isinstance(nr_cpus, bool) or not isinstance(nr_cpus, int) or nr_cpus < 1:
        raise ValueError("nr_cpus must be a positive integer, got %r" % (nr_cpus,))
    ordered = _checked(cpus)
    if ordered and ordered[-1] >= nr_cpus:
        raise ValueError("CPU %d does not fit a mask of %d CPUs" % (ordered[-1], nr_cpus))
    value = 0
    for cpu in ordered:
        value |= 1 << cpu
    words = (nr_cpus + _WORD_BITS - 1) // _WORD_BITS
    return ",".join(
        "%08x" % ((value >> (_WORD_BITS * position)) & _WORD_MASK)
        for position in range(words - 1, -1, -1)
    )
