# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""`ansible-galaxy collection build` gives a clean tarball."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FORBIDDEN = re.compile(r"(^|/)(\.cache|\.venv|\.git|\.hypothesis|\.pytest_cache|__pycache__|artifacts|tests/output)(/|$)|\.pyc$|\.tar\.gz$")


def test_build_has_no_caches_or_venvs(tmp_path):
    galaxy = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
    subprocess.run([galaxy, "collection", "build", "--output-path", str(tmp_path), ROOT],
                   check=True, capture_output=True, text=True, timeout=120)
    [tarball] = list(tmp_path.glob("aihost-llm_cluster-*.tar.gz"))
    with tarfile.open(str(tarball)) as archive:
        names = archive.getnames()
    assert not [n for n in names if FORBIDDEN.search(n)]
    for required in ("MANIFEST.json", "FILES.json", "README.md", "LICENSE", "meta/runtime.yml", "playbooks/deploy.yml",
                     "roles/prepare/tasks/main.yml", "plugins/modules/accelerator_facts.py"):
        assert required in names
