# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Read what the KV-cache tiers would take on this node (serve role, check step): memory and disk, as JSON.

    llm_cluster_kv_budget.py UNIT [DISK_PATH]

mem_available and mem_total from /proc/meminfo; engine_memory, the memory systemd counts for the engine's
unit now (a restart gives it back; 0 when the unit is not running or has no accounting); disk_free, the bytes
an unprivileged writer may still use at DISK_PATH or its nearest existing parent; disk_tier, the bytes of the
files under DISK_PATH already. Read-only; the standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def meminfo(path="/proc/meminfo"):
    values = {}
    with open(path, encoding="ascii") as handle:
        for line in handle:
            name, _sep, rest = line.partition(":")
            words = rest.split()
            if words and words[0].isdigit():
                values[name] = int(words[0]) * (1024 if words[1:2] == ["kB"] else 1)
    return values


def unit_memory(unit):
    try:
        out = subprocess.run(["systemctl", "show", "--property=ActiveState,MemoryCurrent", unit],
                             capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    current = props.get("MemoryCurrent", "")
    return int(current) if props.get("ActiveState") == "active" and current.isdigit() else 0


def disk(path):
    if not path:
        return 0, 0
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    stats = os.statvfs(probe)
    used = 0
    if os.path.isdir(path):
        for top, _dirs, names in os.walk(path):
            for name in names:
                try:
                    used += os.lstat(os.path.join(top, name)).st_size
                except OSError:
                    pass
    return stats.f_bavail * stats.f_frsize, used


def main(argv):
    unit = argv[1] if len(argv) > 1 else ""
    path = argv[2] if len(argv) > 2 else ""
    memory = meminfo()
    free, tier = disk(path)
    print(json.dumps({"mem_available": memory.get("MemAvailable", 0), "mem_total": memory.get("MemTotal", 0),
                      "engine_memory": unit_memory(unit) if unit else 0, "disk_free": free, "disk_tier": tier}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
