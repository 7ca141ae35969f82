# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Pass Molecule's output through unchanged and time each of its actions.

`make molecule-<name>` pipes `molecule test` through this filter. Molecule
prints `INFO [scenario > action] Executing` when an action starts and
`... Executed: ...` when it ends, without times; this filter notes the time of
each, echoes every line, and at the end prints one line per action
(`phase <scenario> <action> <seconds>`) and writes them as JSON to
``--json`` (docs/benchmarks.md reads those files). It also keeps the N slowest
tasks of every action from the profile_tasks recap (``--tasks N``; 0 keeps them
all, as `make molecule-<name>` does with PROFILE_TASKS_TASK_OUTPUT_LIMIT=all).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time

ACTION = re.compile(r"INFO\s+\[(?P<scenario>[^ \]]+) > (?P<action>[^\]]+)\] (?P<what>Executing|Executed)")
# profile_tasks pads a task's name with dashes up to a width: a long name gets a single one.
TASK_TIME = re.compile(r"^(?P<task>.+?) -+ (?P<seconds>[0-9.]+)s$")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the phases (and slowest tasks) to this file")
    parser.add_argument("--tasks", type=int, default=5, help="slowest tasks kept per action (0: all)")
    args = parser.parse_args(argv)

    phases: list[dict] = []
    current: dict | None = None
    started = time.monotonic()
    for line in sys.stdin:
        sys.stdout.write(line)
        sys.stdout.flush()
        match = ACTION.search(line)
        if match and match["what"] == "Executing":
            current = {"scenario": match["scenario"], "action": match["action"], "start": time.monotonic(), "tasks": []}
        elif match and current is not None:
            current["seconds"] = round(time.monotonic() - current.pop("start"), 1)
            current["tasks"] = sorted(current["tasks"], key=lambda t: -t["seconds"])[: args.tasks or None]
            phases.append(current)
            current = None
        elif current is not None:
            task = TASK_TIME.match(line.rstrip("\n"))
            if task:
                current["tasks"].append({"task": task["task"].strip(), "seconds": float(task["seconds"])})
    total = round(time.monotonic() - started, 1)
    for phase in phases:
        print(f"phase {phase['scenario']} {phase['action']} {phase['seconds']:.1f}")
    print(f"phase total {total:.1f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"total_seconds": total, "phases": phases}, handle, indent=2)
            handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
