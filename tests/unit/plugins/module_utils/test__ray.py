# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _ray

MIB = 1024 * 1024
GIB = 1024 * MIB


def test_pyvenv_cfg_version_prefers_version_info():
    assert _ray.parse_pyvenv_cfg("home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n") == "3.11.2"
    assert _ray.parse_pyvenv_cfg("home = /usr/bin\nversion_info = 3.12.4.final.0\nversion = 3.12\n") == "3.12.4.final.0"
    assert _ray.parse_pyvenv_cfg("") is None and _ray.parse_pyvenv_cfg(None) is None


def test_metadata_version_stops_at_the_headers():
    assert _ray.parse_metadata_version("Metadata-Version: 2.1\nName: ray\nVersion: 2.60.0\n\nVersion: 9\n") == "2.60.0"
    assert _ray.parse_metadata_version("Name: ray\n\nVersion: 1.0\n") is None


def test_venv_facts_from_files(tmp_path):
    venv = tmp_path / "ray"
    site = venv / "lib" / "python3.11" / "site-packages" / "ray-2.60.0.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: ray\nVersion: 2.60.0\n")
    (venv / "pyvenv.cfg").write_text("version = 3.11.2\n")
    (venv / "bin").mkdir()
    (venv / "bin" / "python").write_text("")
    facts = _ray.venv_facts(str(venv))
    assert facts == {"path": str(venv), "exists": True, "python": str(venv / "bin" / "python"),
                     "python_version": "3.11.2", "ray_version": "2.60.0", "grpcio_version": None}
    missing = _ray.venv_facts(str(tmp_path / "none"))
    assert missing["exists"] is False and missing["ray_version"] is None and missing["python"] is None
    assert missing["grpcio_version"] is None


def test_grpcio_is_found_by_its_own_dist_info_only(tmp_path):
    site = tmp_path / "ray" / "lib" / "python3.11" / "site-packages"
    (site / "grpcio_tools-1.76.0.dist-info").mkdir(parents=True)
    (site / "grpcio_tools-1.76.0.dist-info" / "METADATA").write_text("Name: grpcio-tools\nVersion: 1.76.0\n")
    assert _ray.venv_facts(str(tmp_path / "ray"))["grpcio_version"] is None
    (site / "grpcio-1.85.3.dist-info").mkdir()
    (site / "grpcio-1.85.3.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: grpcio\nVersion: 1.85.3\n")
    assert _ray.venv_facts(str(tmp_path / "ray"))["grpcio_version"] == "1.85.3"


def test_minor_version():
    assert _ray.minor_version("3.11.2") == "3.11" and _ray.minor_version(None) is None


@pytest.mark.parametrize("text, expected", [
    ("max\n", None), ("9223372036854771712\n", None), ("3221225472\n", 3 * GIB), ("", None), ("junk", None)])
def test_cgroup_limit(text, expected):
    assert _ray.parse_cgroup_limit(text) == expected


def test_memory_limit_takes_the_cgroup_limit_below_memtotal(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:       24576000 kB\nMemFree: 1 kB\n")
    assert _ray.memory_limit(str(tmp_path)) == 24576000 * 1024
    (tmp_path / "sys" / "fs" / "cgroup" / "memory").mkdir(parents=True)
    (tmp_path / "sys" / "fs" / "cgroup" / "memory" / "memory.limit_in_bytes").write_text("3221225472\n")
    assert _ray.memory_limit(str(tmp_path)) == 3 * GIB
    (tmp_path / "sys" / "fs" / "cgroup" / "memory.max").write_text("max\n")
    assert _ray.memory_limit(str(tmp_path)) == 3 * GIB


def test_object_store_auto_is_ray_share_capped_by_shm():
    # 3 GiB memory, 1 GiB shm: 30 % of memory (921.6 MiB) is above 80 % of shm (819.2 MiB).
    size, why = _ray.object_store_size(0, 3 * GIB, GIB)
    assert why is None and size == 819 * MIB
    # Plenty of shm: Ray's own share of memory, rounded down to MiB.
    size, why = _ray.object_store_size(0, 10 * GIB, 64 * GIB)
    assert size == 3072 * MIB


def test_object_store_refuses_a_small_shm_with_the_size_it_needs():
    size, why = _ray.object_store_size(0, 64 * GIB, 64 * MIB)
    assert size is None
    assert why == "/dev/shm holds only 64 MiB; the Ray object store needs at least 94 MiB there"


def test_object_store_requested_size_is_checked():
    assert _ray.object_store_size(500 * MIB, GIB, GIB) == (500 * MIB, None)
    assert _ray.object_store_size(2 * GIB, GIB, GIB)[1] == \
        "ray_cluster_object_store_memory is 2048 MiB but /dev/shm holds only 1024 MiB"
    assert "needs at least 75 MiB" in _ray.object_store_size(10 * MIB, GIB, GIB)[1]
    assert _ray.object_store_size(0, GIB, None) == (None, "/dev/shm is missing or unreadable")
