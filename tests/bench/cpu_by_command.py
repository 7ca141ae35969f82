# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The CPU every process of this machine used over a span, summed by command name.

Reads each process's user and system time from ``/proc/<pid>/stat`` at the start and the end of ``SECONDS``
and prints the difference per command name (``comm``), largest first, with its share of one core. The
containers' processes are in this machine's process table too, so one sample covers the nodes of a demo or
a Molecule scenario. A process that starts and ends inside the span is not counted (process accounting,
``accton``/``sa``, counts those); for an idle cluster (docs/benchmarks.md) it counts what runs all along.

  python3 tests/bench/cpu_by_command.py 60 [--json FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time


def sample(proc="/proc"):
    """{pid: (command name, user + system clock ticks)} of every process readable now."""
    found = {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc, name, "stat"), encoding="utf-8", errors="replace") as handle:
                line = handle.read()
        except OSError:
            continue
        # The command name is between the first "(" and the last ")": it may hold spaces and parentheses.
        command = line[line.index("(") + 1:line.rindex(")")]
        fields = line[line.rindex(")") + 2:].split()
        # After the name: state is field 3 of proc(5), utime 14 and stime 15, here indexes 11 and 12.
        found[name] = (command, int(fields[11]) + int(fields[12]))
    return found


def by_command(before, after, ticks_per_second):
    """CPU seconds per command name between two samples (a process found only in ``after`` counts from 0)."""
    seconds = collections.Counter()
    for pid, (command, ticks) in after.items():
        seconds[command] += (ticks - before.get(pid, (command, 0))[1]) / ticks_per_second
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("seconds", type=float, help="the span to sample")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--json", help="write the result there too")
    args = parser.parse_args()
    before = sample()
    began = time.monotonic()
    time.sleep(args.seconds)
    after = sample()
    wall = time.monotonic() - began
    seconds = by_command(before, after, os.sysconf("SC_CLK_TCK"))
    total = sum(seconds.values())
    print("%.1f CPU-seconds in %.0f s: %.0f %% of one core" % (total, wall, 100 * total / wall))
    rows = [(command, value) for command, value in seconds.most_common(args.top) if value > 0]
    for command, value in rows:
        print("%-32s %7.2f s %5.1f %%" % (command, value, 100 * value / wall))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"wall": wall, "total": total, "by_command": dict(rows)}, handle, indent=2)


if __name__ == "__main__":
    main()
