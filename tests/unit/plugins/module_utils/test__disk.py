# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _disk


def test_filesystem_walks_up_to_an_existing_parent(tmp_path):
    info = _disk.filesystem(str(tmp_path / "a" / "b"))
    assert info["checked"] == str(tmp_path) and info["free"] > 0 and info["size"] >= info["free"]
