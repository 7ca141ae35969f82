# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The operator's wrapper: argument handling, errors, pass-through to ansible-playbook."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy.sh")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "inventories", "llm_solution_config.yaml")


def deploy(*args, cwd=None):
    env = dict(os.environ, LLM_CLUSTER_VENV=sys.prefix, ANSIBLE_NOCOLOR="1")
    return subprocess.run([DEPLOY] + list(args), capture_output=True, text=True, timeout=120, env=env,
                          cwd=cwd or ROOT, check=False)


def test_help():
    result = deploy("--help")
    assert result.returncode == 0
    for word in ("deploy", "status", "teardown", "restore", "bench", "demo", "demo-down", "--tags", "--check"):
        assert word in result.stdout


def test_missing_inventory_is_one_line_exit_2(tmp_path):
    result = deploy("-i", str(tmp_path / "nope.yml"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["deploy.sh: inventory '%s' does not exist" % (tmp_path / "nope.yml")]


def test_inventory_is_required():
    result = deploy("deploy")
    assert result.returncode == 2
    assert "an inventory is required" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("sub", ["demo", "demo-down"])
def test_demo_builds_its_own_inventory(sub):
    result = deploy(sub, "-i", FIXTURE)
    assert result.returncode == 2
    assert result.stderr.strip() == "deploy.sh: '%s' builds its own inventory; drop -i" % sub
    result = deploy(sub, "--check")
    assert result.returncode == 2
    assert result.stderr.strip() == "deploy.sh: '%s' takes no options" % sub


@pytest.mark.parametrize("sub, play", [("status", "Report the Ray cluster"), ("status", "Report the endpoint"),
                                       ("teardown", "Tear down the engine"), ("teardown", "Tear down the Ray cluster"),
                                       ("bench", "Benchmark the endpoint")])
def test_subcommands_run_their_playbooks(sub, play, tmp_path):
    # Only the validation runs (--tags always); the play headers show which playbook ran.
    result = deploy(sub, "-i", FIXTURE, "--tags", "always", "--check", cwd=str(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "PLAY [%s]" % play in output


def test_unknown_argument():
    result = deploy("-i", FIXTURE, "--frobnicate")
    assert result.returncode == 2
    assert "unknown argument '--frobnicate'" in result.stderr


def test_pass_through_of_tags_check_diff_and_extra_vars(tmp_path):
    result = deploy("-i", FIXTURE, "--tags", "always", "--check", "--diff", "-e", "node_num=3", "-v",
                    cwd=str(tmp_path))
    output = result.stdout + result.stderr
    # -e reached ansible-playbook: the extra var breaks validation; --tags kept the hosts untouched.
    assert result.returncode == 2, output
    assert "node_num = 3 but the inventory has 2 host(s)" in " ".join(output.split())
    assert "UNREACHABLE" not in output


def test_valid_inventory_in_check_mode(tmp_path):
    result = deploy("-i", FIXTURE, "--tags", "always", "--check", cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_restore_runs_the_restore_playbook(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    masters:\n      hosts:\n        localhost:\n"
                         "          ansible_connection: local\n          ansible_python_interpreter: %s\n" % sys.executable)
    state_dir = tmp_path / "state"
    result = deploy("restore", "-i", str(inventory), "-e", "prepare_state_dir=%s" % state_dir, "--check", cwd=str(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Restore | Put back the CANN workqueue masks" in output
    assert "Restore | Put back process and IRQ affinity" in output
    assert not state_dir.exists()
