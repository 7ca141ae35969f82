# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Write the host tuning's sysfs values again at boot (llm-cluster-tuning.service).

Transparent hugepages and the CPU governor live in sysfs and go back to the kernel's defaults at every
boot; they have no sysctl.d file. The prepare role writes the values its last run applied
(``host_tuning``'s rows) into a JSON configuration::

    {"root": "/", "settings": [{"name": "transparent_hugepage",
                                "path": "/sys/kernel/mm/transparent_hugepage/enabled", "value": "always"},
                               {"name": "cpu_governor",
                                "path": "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                                "value": "performance"}]}

and this script writes each again and reads it back (a multiple-choice file such as ``always [madvise]
never`` reads as its bracketed word). Exits 1 naming each setting the kernel did not take or that is
missing; the others are written.

Standard library only: it runs on the node's system Python, before anything else of the collection.
"""

from __future__ import annotations

import json
import os
import re
import sys


def read_value(path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    chosen = re.search(r"\[([^\]]+)\]", text)
    return chosen.group(1) if chosen else " ".join(text.split())


def apply(config):
    """Write every setting of ``config``; returns the list of problems (empty when all took)."""
    root = config.get("root") or "/"
    problems = []
    for setting in config.get("settings") or []:
        path = os.path.join(root, setting["path"].lstrip("/"))
        value = str(setting["value"])
        try:
            if read_value(path) != value:
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(value + "\n")
            now = read_value(path)
        except OSError as exc:
            problems.append("%s (%s): %s" % (setting["name"], path, exc.strerror or exc))
            continue
        if now != value:
            problems.append("%s (%s) reads %s after writing %s" % (setting["name"], path, now, value))
        else:
            print("%s = %s (%s)" % (setting["name"], value, path), flush=True)
    return problems


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: llm_cluster_tuning.py CONFIG.json", file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        print("cannot read %s: %s" % (argv[0], exc), file=sys.stderr)
        return 1
    problems = apply(config)
    for problem in problems:
        print("not set: " + problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
