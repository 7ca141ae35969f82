# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Print, as JSON, every distinct Cpus_allowed_list of the threads of each process titled VLLM::*."""

from __future__ import annotations

import glob
import json

report = {}
for proc in glob.glob("/proc/[0-9]*"):
    try:
        with open(proc + "/cmdline", "rb") as handle:
            title = handle.read().split(b"\0")[0].decode()
    except OSError:
        continue
    if not title.startswith("VLLM::"):
        continue
    seen = report.setdefault(title, set())
    for status in glob.glob(proc + "/task/*/status"):
        try:
            with open(status) as handle:
                seen.update(line.split()[1] for line in handle if line.startswith("Cpus_allowed_list:"))
        except OSError:
            continue
print(json.dumps({title: sorted(values) for title, values in sorted(report.items())}))
