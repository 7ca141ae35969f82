# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import os
import random

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _ascend_versions as versions

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "vendor")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------
# Version files
# ---------------------------------------------------------------------------

def test_driver_version_info():
    data = versions.parse_driver_version_info(fixture("ascend-driver-version-23.0.7.info"))
    assert data["Version"] == "23.0.7"
    assert data["package_version"] == "23.0.7"
    assert data["Innerversion"] == "V100R001C15SPC012B220"
    assert data["compatible_version_fw"] == "[7.0.0,7.1.99]"


def test_firmware_version_info():
    data = versions.parse_firmware_version_info(fixture("ascend-firmware-version-7.1.0.11.220.info"))
    assert data["Version"] == "7.1.0.11.220"
    assert data["compatible_version_drv"] == "[23.0.rc3,23.0.rc3.],[23.0.0,23.0.0.]"


def test_ascend_install_info():
    data = versions.parse_ascend_install_info(fixture("ascend_install.info"))
    assert data["Driver_Install_Path_Param"] == "/usr/local/Ascend"


def test_toolkit_install_info():
    data = versions.parse_toolkit_install_info(fixture("ascend_toolkit_install-8.3.RC2.info"))
    assert data["version"] == "8.3.RC2"
    assert data["arch"] == "aarch64"


def test_version_cfg():
    data = versions.parse_version_cfg(fixture("ascend-toolkit-version.cfg-8.0.0.txt"))
    assert data["toolkit_running_version"] == {"inner": "7.6.0.1.220", "cann": "8.0.0"}
    assert versions.cann_version_from_version_cfg(data) == "8.0.0"


def test_version_cfg_hccl_style_and_fallbacks():
    data = versions.parse_version_cfg("runtime_running_version=[1.83.T8.0.B128:CANN-1.83]\nodd=value\n")
    assert data["runtime_running_version"] == {"inner": "1.83.T8.0.B128", "cann": "1.83"}
    assert data["odd"] == {"inner": None, "cann": None, "raw": "value"}
    assert versions.cann_version_from_version_cfg(data) == "1.83"
    only_installed = versions.parse_version_cfg("opp_installed_version=[7.6.0.1.220:8.0.0]\n")
    assert versions.cann_version_from_version_cfg(only_installed) == "8.0.0"
    assert versions.cann_version_from_version_cfg(versions.parse_version_cfg("x=y\n")) is None


@pytest.mark.parametrize("text, message", [
    ("Version 23.0.7\n", r"driver/version.info: expected 'key=value' \(line 1: 'Version 23.0.7'\)"),
    ("# only a comment\n", "driver/version.info: no 'key=value' lines"),
    ("=23.0.7\n", "expected 'key=value'"),
])
def test_key_value_file_errors(text, message):
    with pytest.raises(ValueError, match=message):
        versions.parse_driver_version_info(text)


# ---------------------------------------------------------------------------
# find_cann_version
# ---------------------------------------------------------------------------

def test_find_cann_version_from_install_info_other_arch(tmp_path):
    path = write(tmp_path / "ascend-toolkit" / "latest" / "aarch64-linux" / "ascend_toolkit_install.info",
                 fixture("ascend_toolkit_install-8.3.RC2.info"))
    write(tmp_path / "ascend-toolkit" / "latest" / "version.cfg", fixture("ascend-toolkit-version.cfg-8.0.0.txt"))
    assert versions.find_cann_version(str(tmp_path), machine="x86_64") == ("8.3.RC2", str(path))


def test_find_cann_version_prefers_host_arch(tmp_path):
    write(tmp_path / "ascend-toolkit" / "latest" / "aarch64-linux" / "ascend_toolkit_install.info", "version=8.3.RC2\n")
    path = write(tmp_path / "ascend-toolkit" / "latest" / "x86_64-linux" / "ascend_toolkit_install.info",
                 "version=8.2.RC1\n")
    assert versions.find_cann_version(str(tmp_path), machine="AMD64") == ("8.2.RC1", str(path))


def test_find_cann_version_falls_back_to_version_cfg(tmp_path):
    path = write(tmp_path / "ascend-toolkit" / "latest" / "version.cfg", fixture("ascend-toolkit-version.cfg-8.0.0.txt"))
    assert versions.find_cann_version(str(tmp_path)) == ("8.0.0", str(path))


def test_find_cann_version_cann_dir(tmp_path):
    path = write(tmp_path / "cann" / "aarch64-linux" / "ascend_toolkit_install.info", "version=8.5.0\n")
    assert versions.find_cann_version(str(tmp_path), machine="aarch64") == ("8.5.0", str(path))


def test_find_cann_version_absent(tmp_path):
    assert versions.find_cann_version(str(tmp_path)) == (None, None)


def test_find_cann_version_unparseable(tmp_path):
    path = write(tmp_path / "ascend-toolkit" / "latest" / "aarch64-linux" / "ascend_toolkit_install.info", "garbage\n")
    with pytest.raises(ValueError, match=str(path)):
        versions.find_cann_version(str(tmp_path))
    write(path, "package_name=Ascend-cann-toolkit\n")
    with pytest.raises(ValueError, match="no 'version=' line"):
        versions.find_cann_version(str(tmp_path))


def test_find_cann_version_cfg_without_cann_part(tmp_path):
    write(tmp_path / "ascend-toolkit" / "latest" / "version.cfg", "# version: 1.0\nfoo=bar\n")
    with pytest.raises(ValueError, match="running_version"):
        versions.find_cann_version(str(tmp_path))


def test_read_version_file(tmp_path):
    assert versions.read_version_file(str(tmp_path / "missing"), versions.parse_driver_version_info) is None
    path = write(tmp_path / "version.info", fixture("ascend-driver-version-23.0.7.info"))
    assert versions.read_version_file(str(path), versions.parse_driver_version_info)["Version"] == "23.0.7"


# ---------------------------------------------------------------------------
# Version comparison
# ---------------------------------------------------------------------------

ORDERED = [
    "23.0.rc1.b070",
    "23.0.rc1",
    "23.0.rc2",
    "23.0.5",
    "23.0.7",
    "24.1.rc1.b030",
    "24.1.rc1",
    "24.1.rc2",
    "24.1.rc3",
    "24.1.rc3.3",
    "24.1.0",
    "25.0.rc1",
    "25.0.rc1.1",
    "25.2.2",
    "25.3.rc1",
    "25.5.1",
]


def test_sorting_known_versions():
    shuffled = list(ORDERED)
    random.Random(4).shuffle(shuffled)
    assert sorted(shuffled, key=versions.ascend_version_key) == ORDERED


@pytest.mark.parametrize("version_a, version_b, expected", [
    ("24.1.rc2", "24.1.0", -1),
    ("25.0.rc1.1", "24.1.0", 1),
    ("25.3.rc1", "25.0.rc1.1", 1),
    ("23.0.7", "24.1.0", -1),
    ("24.1", "24.1.0", 0),
    ("24.1.0", "24.1", 0),
    ("24.1", "24.1.rc3", 1),
    ("8.3.RC2", "8.3.rc2", 0),
    ("25.0.rc1", "25.0.rc1.1", -1),
])
def test_compare(version_a, version_b, expected):
    assert versions.compare_ascend_versions(version_a, version_b) == expected
    assert versions.compare_ascend_versions(version_b, version_a) == -expected


def test_at_least():
    assert versions.ascend_version_at_least("25.0.rc1.1", "24.1.0")
    assert versions.ascend_version_at_least("24.1.0", "24.1.0")
    assert not versions.ascend_version_at_least("24.1.rc2", "24.1.0")


@pytest.mark.parametrize("garbage", ["", "abc", "24", "24..1", "24.1-beta", "v24.1.0", "rc1.24", "24.1.x",
                                     "1.2.3.4.5.6.7.8.9", None, 24.1])
def test_garbage_versions(garbage):
    with pytest.raises(ValueError, match="invalid Ascend version"):
        versions.ascend_version_key(garbage)
    with pytest.raises(ValueError, match="invalid Ascend version"):
        versions.compare_ascend_versions("24.1.0", garbage)
