# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The recorded topologies of tests/fixtures/topologies/, unpacked once per test run.

Each ``<name>.tar.gz`` holds a fake sysfs tree (``<name>/sys/...``) and its
``fixture.json``; ``ROOT`` is a temporary directory holding every ``<name>/``,
with ``../vendor`` beside it as in the source tree (a fixture names its
vendor-tool output relative to itself).
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import tarfile
import tempfile

SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "topologies")
_BASE = tempfile.mkdtemp(prefix="llm-cluster-fixtures-")
atexit.register(shutil.rmtree, _BASE, True)
ROOT = os.path.join(_BASE, "topologies")
os.mkdir(ROOT)
os.symlink(os.path.join(os.path.dirname(SOURCE), "vendor"), os.path.join(_BASE, "vendor"))

for _archive_path in sorted(glob.glob(os.path.join(SOURCE, "*.tar.gz"))):
    with tarfile.open(_archive_path) as _archive:
        _archive.extractall(ROOT)
