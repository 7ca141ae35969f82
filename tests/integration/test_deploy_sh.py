# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The operator's wrapper: argument handling, errors, pass-through to ansible-playbook."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml

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
    for word in ("deploy", "status", "teardown", "restore", "bench", "rolling-restart", "replace-node OLD NEW",
                 "remove-node OLD", "demo", "demo-down", "--tags", "--check"):
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
                                       ("bench", "Benchmark the endpoint"), ("bundle", "Build the offline bundle"),
                                       ("rolling-restart", "Plan the rolling restart")])
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


def vaulted_inventory(tmp_path):
    """The fixture with the SSH password in a vault-encrypted group_vars file; returns (inventory, password file).

    Without the fixture's StrictHostKeyChecking=no, whose warning would fail the strict runs below.
    """
    inventory = tmp_path / "inventory"
    (inventory / "group_vars" / "all").mkdir(parents=True)
    with open(FIXTURE) as handle:
        text = handle.read()
    for line in ('          ansible_password: ""\n', "    ansible_ssh_common_args: '-o StrictHostKeyChecking=no'\n"):
        assert line in text
        text = text.replace(line, "")
    (inventory / "hosts.yml").write_text(text)
    password_file = tmp_path / "vault-pass"
    password_file.write_text("correct horse\n")
    password_file.chmod(0o600)
    secret = inventory / "group_vars" / "all" / "vault.yml"
    secret.write_text("ansible_password: hunter2\n")
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-vault"), "encrypt",
                    "--vault-password-file", str(password_file), str(secret)], check=True, capture_output=True)
    assert secret.read_text().startswith("$ANSIBLE_VAULT")
    return str(inventory), str(password_file)


@pytest.mark.parametrize("how", ["--vault-password-file", "--vault-password-file=", "--vault-id", "--ask-vault-pass"])
def test_vault_options_reach_ansible_playbook(tmp_path, how):
    inventory, password_file = vaulted_inventory(tmp_path)
    args = ["-i", inventory, "--tags", "always", "--strict"]
    stdin = None
    if how == "--vault-password-file":
        args += [how, password_file]
    elif how.endswith("="):
        args += [how + password_file]
    elif how == "--vault-id":
        args += [how, "default@" + password_file]
    else:
        args += [how]
        stdin = "correct horse\n"
    env = dict(os.environ, LLM_CLUSTER_VENV=sys.prefix, ANSIBLE_NOCOLOR="1")
    result = subprocess.run([DEPLOY] + args, capture_output=True, text=True, timeout=120, env=env, cwd=str(tmp_path),
                            input=stdin, check=False)
    output = result.stdout + result.stderr
    # Decrypted, and a vaulted password is no clear-text warning even in strict mode.
    assert result.returncode == 0, output
    assert "ok: [master1]" in output and "Inventory validation found" not in output
    assert "clear text" not in output


def test_without_the_vault_password_the_run_stops(tmp_path):
    inventory = vaulted_inventory(tmp_path)[0]
    result = deploy("-i", inventory, "--tags", "always", cwd=str(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "vault" in output.lower() and "Inventory is valid" not in output


def test_strict_turns_validation_warnings_into_failures(tmp_path):
    inventory = tmp_path / "config.yaml"
    with open(FIXTURE) as handle:
        inventory.write_text(handle.read().replace('ansible_password: ""', 'ansible_password: "hunter2"', 1))
    result = deploy("-i", str(inventory), "--tags", "always", cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ansible_password is set in clear text for master1" in " ".join((result.stdout + result.stderr).split())
    result = deploy("-i", str(inventory), "--tags", "always", "--strict", cwd=str(tmp_path))
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2, output
    assert "warning: ansible_password is set in clear text for master1" in output


@pytest.mark.parametrize("path", ["inventories/sample/credentials/serve_api_key", "inventories/prod/credentials/ray_token",
                                  "credentials/serve_api_key"])
def test_generated_credentials_are_ignored_by_git(path):
    if not os.path.isdir(os.path.join(os.path.realpath(ROOT), ".git")):
        pytest.skip("not a git checkout")
    result = subprocess.run(["git", "-C", os.path.realpath(ROOT), "check-ignore", "--no-index", "-q", path], check=False)
    assert result.returncode == 0, "%s is not ignored by .gitignore" % path


@pytest.mark.parametrize("args, usage", [(["replace-node", "-i", FIXTURE], "OLD NEW"),
                                         (["replace-node", "worker2", "-i", FIXTURE], "OLD NEW"),
                                         (["replace-node", "", "worker1", "-i", FIXTURE], "OLD NEW"),
                                         (["remove-node", "--check", "worker2", "-i", FIXTURE], "OLD")])
def test_replace_and_remove_node_need_the_node_names_first(args, usage):
    result = deploy(*args)
    assert result.returncode == 2
    assert result.stderr.strip() == "deploy.sh: '%s' needs %s first (see ./deploy.sh --help)" % (args[0], usage)


def test_replace_node_checks_the_inventory_then_deploys(tmp_path):
    # worker1 took worker9's place in the fixture: the check passes and deploy.yml's plays follow (only the
    # validation runs, --tags always).
    result = deploy("replace-node", "worker9", "worker1", "-i", FIXTURE, "--tags", "always", "--check",
                    cwd=str(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "PLAY [Check the replacement]" in output and "PLAY [Validate the inventory]" in output
    assert ("Replacing worker9 by worker1: deploy.yml over master1, worker1; worker9 itself is left as it is."
            in " ".join(output.split()))
    assert "not a variable this collection knows" not in output


@pytest.mark.parametrize("args, message", [
    (["replace-node", "worker1", "worker2"], "worker1 is still in workers of"),
    (["remove-node", "master1"], "master1 is still in masters of"),
    (["replace-node", "*", "worker1"], "the node to replace (OLD) = '*' is a host pattern, not one host name"),
    (["replace-node", "all", "worker1"], "the node to replace (OLD) = 'all' is a group of"),
    (["replace-node", "worker1 master1", "worker1"], "the node to replace (OLD) = 'worker1 master1' is a host pattern"),
    (["replace-node", 'w"}, "x": {"', "worker1"], "is a host pattern, not one host name"),
])
def test_replace_node_refuses_before_any_host_changes(args, message, tmp_path):
    result = deploy(*(args + ["-i", FIXTURE, "--check"]), cwd=str(tmp_path))
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2, output
    assert "The replacement cannot start; nothing was changed on any host:" in output
    assert message in output
    # The check runs on the controller: no node was contacted.
    assert "PLAY [Validate the inventory]" not in output and "UNREACHABLE" not in output


def test_retire_goes_with_replace_and_remove_node_only():
    result = deploy("deploy", "-i", FIXTURE, "--retire")
    assert result.returncode == 2
    assert result.stderr.strip() == "deploy.sh: --retire goes with replace-node or remove-node (see ./deploy.sh --help)"


@pytest.mark.parametrize("args, message", [
    (["replace-node", "worker9", "worker1"], "--retire cleans worker9 before it goes, and "),
    (["replace-node", "worker1", "worker1"], "--retire cleans the machine that leaves, and worker1 keeps its name"),
])
def test_retire_refuses_a_node_it_cannot_reach_or_that_stays(args, message, tmp_path):
    result = deploy(*(args + ["-i", FIXTURE, "--retire", "--check"]), cwd=str(tmp_path))
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2, output
    assert "The replacement cannot start; nothing was changed on any host:" in output and message in output
    assert "PLAY [Validate the inventory]" not in output and "UNREACHABLE" not in output


def test_retire_tears_down_and_restores_the_node_that_left_after_the_others(tmp_path):
    # worker9 kept as a host outside the groups: after deploy.yml's plays over the members come teardown.yml's and
    # restore.yml's on worker9 alone (listed, and then run with --tags always on the members: only the checks run,
    # on the controller; no host is contacted).
    with open(FIXTURE, encoding="utf-8") as handle:
        inventory = yaml.safe_load(handle)
    inventory["all"].setdefault("hosts", {})["worker9"] = {"ansible_host": "192.0.2.19"}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    result = deploy("replace-node", "worker9", "worker1", "-i", str(path), "--retire", "--list-hosts", cwd=str(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    plays = re.findall(r"play #\d+ \((\S+)\): (.+?)\s+TAGS", output)
    retired = [("worker9", name) for name in ("Tear down the monitoring", "Tear down the engine",
                                              "Tear down the Ray cluster", "Remove the cluster's configuration",
                                              "Restore host settings")]
    # After every play of deploy.yml. teardown.yml's validation runs on no host: deploy.yml's, the first play
    # after the check, validated the same inventory.
    assert plays[-6:] == [("all:!all", "Validate the inventory")] + retired, plays
    assert ("masters:workers", "Serve the model") in plays[:-6]
    assert [play for play in plays if play[1] == "Validate the inventory"] == [
        ("masters:workers", "Validate the inventory"), ("all:!all", "Validate the inventory")], plays
    assert "worker9" not in "".join(play[0] for play in plays[:-5])
    result = deploy("replace-node", "worker9", "worker1", "-i", str(path), "--retire", "--tags", "always", "--check",
                    "--limit", "masters:workers", cwd=str(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    output = " ".join(output.split())
    assert ("Replacing worker9 by worker1: deploy.yml over master1, worker1; then worker9 is torn down and its host "
            "settings restored (--retire).") in output


def test_replace_node_checks_with_a_limit_too(tmp_path):
    # A play on localhost would be skipped by --limit; the check runs on the members, on the controller.
    result = deploy("replace-node", "worker1", "worker2", "-i", FIXTURE, "--limit", "worker1", "--check",
                    cwd=str(tmp_path))
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2, output
    assert "worker1 is still in workers of" in output and "PLAY [Validate the inventory]" not in output
