# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Run tests/fakes/install_fakes.yml on localhost into a temporary root, twice.

Checks what it writes, that the installed tools work from there, and that a
second run changes nothing. Skipped where ansible-playbook is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FAKES = Path(__file__).resolve().parents[2] / "fakes"
PLAYBOOK = """\
- name: Install the fakes
  hosts: all
  gather_facts: false
  tasks:
    - name: Include the installer
      ansible.builtin.include_tasks: {tasks}
"""
ANSIBLE_PLAYBOOK = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable)) or shutil.which("ansible-playbook")

pytestmark = pytest.mark.skipif(ANSIBLE_PLAYBOOK is None, reason="ansible-playbook is not installed")


def install(tmp_path: Path, profile: str, faults: dict, **more) -> int:
    """Run the installer for host node1 into tmp_path/root; return the number of changed tasks."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK.format(tasks=FAKES / "install_fakes.yml"), encoding="utf-8")
    extra = {
        "ansible_python_interpreter": sys.executable,
        "llm_cluster_fake_profile": profile,
        "llm_cluster_fake_src": str(FAKES),
        "llm_cluster_fake_faults": faults,
        "llm_cluster_fake_root": str(tmp_path / "root"),
        "llm_cluster_fake_build_dir": str(tmp_path / "build"),
        **more,
    }
    result = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", "node1,", "-c", "local", str(playbook), "-e", json.dumps(extra)],
        cwd=tmp_path,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_PIPELINING": "1", "ANSIBLE_RETRY_FILES_ENABLED": "0"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return int(re.search(r"node1\s+: ok=\d+\s+changed=(\d+)", result.stdout).group(1))


def run_installed(root: Path, tool: str, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        "LLM_CLUSTER_FAKE_STATE": str(root / "var/lib/llm-cluster-fakes/state.json"),
    }
    return subprocess.run(
        [str(root / "usr/local/bin" / tool), *args], env=env, capture_output=True, text=True, check=False, timeout=60
    )


def test_install_npu_profile_is_complete_and_idempotent(tmp_path):
    faults = {"missing_devices": [7], "health": {"3": "Alarm"}}
    assert install(tmp_path, "atlas-800i-a2", faults, llm_cluster_fake_topology="atlas-800i-a2") > 0
    root = tmp_path / "root"
    state = json.loads((root / "var/lib/llm-cluster-fakes/state.json").read_text())
    assert state["hostname"] == "node1" and state["health"] == {"3": "Alarm"}
    assert state["fabric_dir"] == f"{root}/var/lib/llm-cluster-fabric"

    assert sorted(p.name for p in (root / "dev").iterdir()) == sorted(
        [f"davinci{i}" for i in range(7)] + ["davinci_manager", "devmm_svm", "hisi_hdc"]
    )
    assert not (root / "usr/local/bin/nvidia-smi").exists()
    version = (root / "usr/local/Ascend/driver/version.info").read_text().splitlines()
    assert version[0] == "Version=25.0.rc1.1" and version[-1] == "package_version=25.0.rc1.1"
    assert (root / "usr/local/Ascend/firmware/version.info").read_text().startswith("Version=7.7.0.1.231\n")
    toolkit = root / "usr/local/Ascend/ascend-toolkit/latest"
    assert "runtime_running_version=[7.8.0.2.212:8.3.RC2]" in (toolkit / "version.cfg").read_text().splitlines()
    arch = os.uname().machine
    info = (toolkit / f"{arch}-linux/ascend_toolkit_install.info").read_text()
    assert "version=8.3.RC2\n" in info and f"arch={arch}\n" in info
    assert (root / "etc/ascend_install.info").read_text().startswith("UserName=HwHiAiUser\n")
    assert (root / "usr/local/Ascend/ascend-toolkit/set_env.sh").read_text().startswith("export LD_LIBRARY_PATH=")
    workqueue = root / "var/lib/llm-cluster-fakes/sys/devices/virtual/workqueue"
    assert sorted(p.name for p in workqueue.iterdir()) == [f"dev{i}_sq_send_wq" for i in range(7)]
    assert (workqueue / "dev0_sq_send_wq/cpumask").read_text() == ",".join(["ffffffff"] * 6) + "\n"
    # The recorded topology lies beside the workqueues, as the binding roles read it.
    cpu = root / "var/lib/llm-cluster-fakes/sys/devices/system/cpu"
    assert (cpu / "online").read_text() == "0-191\n"
    assert (root / "var/lib/llm-cluster-fakes/sys/bus/pci/devices/0000:01:00.0/numa_node").exists()

    table = run_installed(root, "npu-smi", "info").stdout
    assert "| 3     910B4               | Alarm         |" in table and "0000:42:00.0" not in table
    set_ip = run_installed(root, "hccn_tool", "-i", "0", "-ip", "-s", "address", "10.1.0.1", "netmask", "255.255.0.0")
    assert set_ip.stdout == "Cmd executed successfully!\n"
    assert (root / "etc/hccn.conf").read_text().startswith("address_0=10.1.0.1\n")
    assert json.loads((root / "var/lib/llm-cluster-fabric/node1.json").read_text())["devices"]["0"]["address"] == "10.1.0.1"

    # A role may already have rebound the workqueues: a second run keeps that and changes nothing.
    (workqueue / "dev0_sq_send_wq/cpumask").write_text("000000ff,ffff0000,00000000,00000000,00000000,00000000\n")
    (cpu / "online").write_text("0-95\n")
    assert install(tmp_path, "atlas-800i-a2", faults, llm_cluster_fake_topology="atlas-800i-a2") == 0
    assert (workqueue / "dev0_sq_send_wq/cpumask").read_text().startswith("000000ff,")
    assert (cpu / "online").read_text() == "0-95\n"
    # A changed fault re-unpacks the tools and state but still keeps what lies under sys/.
    faults["health"] = {"3": "Critical"}
    assert install(tmp_path, "atlas-800i-a2", faults, llm_cluster_fake_topology="atlas-800i-a2") > 0
    assert json.loads((root / "var/lib/llm-cluster-fakes/state.json").read_text())["health"] == {"3": "Critical"}
    assert (workqueue / "dev0_sq_send_wq/cpumask").read_text().startswith("000000ff,")
    assert (cpu / "online").read_text() == "0-95\n"


def test_install_gpu_profile_links_only_nvidia_smi(tmp_path):
    install(tmp_path, "nvidia-8gpu", {})
    root = tmp_path / "root"
    assert not (root / "usr/local/bin/npu-smi").exists() and not (root / "usr/local/Ascend").exists()
    assert not (root / "dev/davinci0").exists()
    listing = run_installed(root, "nvidia-smi", "-L").stdout.splitlines()
    assert len(listing) == 8 and listing[0].startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")


def test_another_profile_on_the_same_node_takes_the_old_accelerator_s_tools_and_device_nodes_away(tmp_path):
    # The container scenario turns its NPU stand-ins into CPU nodes this way (molecule/container/cpu_fakes.yml).
    install(tmp_path, "atlas-800i-a2", {})
    root = tmp_path / "root"
    assert (root / "dev/davinci0").exists() and (root / "usr/local/bin/npu-smi").exists()
    assert install(tmp_path, "cpu-only", {}) > 0
    assert sorted(p.name for p in (root / "dev").iterdir()) == []
    assert not (root / "usr/local/bin/npu-smi").exists() and not (root / "usr/local/bin/hccn_tool").exists()
    assert install(tmp_path, "cpu-only", {}) == 0
    # And back: the NPU profile makes its device nodes again.
    install(tmp_path, "atlas-800i-a2", {"missing_devices": [1, 2, 3, 4, 5, 6, 7]})
    assert sorted(p.name for p in (root / "dev").iterdir()) == ["davinci0", "davinci_manager", "devmm_svm", "hisi_hdc"]
