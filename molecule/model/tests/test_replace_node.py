# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""./deploy.sh replace-node with a node's own name on new hardware: md-worker4's container is replaced by a fresh one
(same name, same settings, an empty disk but for the part of the model the operator put there), then the replacement
playbook runs its prepare and model steps (the scenario has no Ray or engine). Runs after test_model.py and
test_offline_bundle.py, on the model they leave on every node."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess

import pytest
import testinfra

testinfra_hosts = ["ansible://md-master1"]

SCENARIO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
ARTIFACTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "artifacts")
NAMES = ["md-master1", "md-worker1", "md-worker2", "md-worker3", "md-worker4"]
RACK = {"md-master1": "rack-a", "md-worker1": "rack-a", "md-worker2": "rack-b", "md-worker3": "rack-b",
        "md-worker4": "rack-b"}
MODEL = "/srv/models/synthetic"
KEPT = ["config.json", "generation_config.json", "model.safetensors.index.json", "model-00001-of-00004.safetensors",
        "model-00002-of-00004.safetensors"]
MIB = 1024 * 1024

# The node replacement the scenarios share (molecule/shared/replace.py).
_SPEC = importlib.util.spec_from_file_location("replace", os.path.join(os.path.dirname(SCENARIO), "shared", "replace.py"))
replace = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(replace)


def failures(output):
    return "\n".join(line for line in output.splitlines() if "fatal:" in line or "FAILED" in line or "msg" in line)[-4000:]


def sums(node):
    out = node.check_output("cd %s && find . -type f ! -name '.llm_cluster-*' -print0 | sort -z | xargs -0 sha256sum" % MODEL)
    return dict(reversed(line.split("  ", 1)) for line in out.splitlines())


@pytest.fixture(scope="module")
def nodes():
    return {name: testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY)) for name in NAMES}


@pytest.fixture(scope="module")
def replaced():
    """md-worker4 as a new machine (molecule/shared/replace.py), with the model's small files and first two shards
    copied onto it from md-worker3 (what an operator stages before, or what a repaired disk kept); then the
    replacement's prepare and model steps."""
    replace.renew(SCENARIO, "md-worker4", INVENTORY)
    staged = subprocess.run(
        "docker exec md-worker4 mkdir -p %s && docker exec md-worker3 tar -C %s -cf - %s | "
        "docker exec -i md-worker4 tar -C %s -xf -" % (MODEL, MODEL, " ".join(KEPT), MODEL),
        shell=True, capture_output=True, text=True, check=False)
    assert staged.returncode == 0, staged.stderr
    held = subprocess.run(["docker", "exec", "md-worker4", "ls", "-A", MODEL], capture_output=True, text=True, check=True)
    assert sorted(held.stdout.split()) == sorted(KEPT), held.stdout
    return replace.replace_node(INVENTORY, "md-worker4", "md-worker4", "--tags", "prepare,model")


def test_the_replacement_passes_its_check_and_runs(replaced):
    result, _changed = replaced
    assert result.returncode == 0, failures(result.stdout)
    assert "Replacing md-worker4 by md-worker4" in result.stdout


def test_it_got_only_the_files_it_lacked_from_a_holder_in_its_own_rack(nodes, replaced):
    with open(os.path.join(ARTIFACTS, "model-distribution-last-transfer.json")) as handle:
        doc = json.load(handle)
    links = [(link["src"], link["dst"]) for round_ in doc["rounds"] for link in round_]
    assert len(links) == 1 and links[0][1] == "md-worker4", links
    assert RACK[links[0][0]] == "rack-b" and links[0][0] != "md-worker4", links
    assert [(t["dst"], t["files"]) for t in doc["transfers"]] == [("md-worker4", 2)]
    assert 128 * MIB <= doc["transfers"][0]["bytes_received"] < 130 * MIB
    assert sums(nodes["md-worker4"]) == sums(nodes["md-master1"])


def changes(output):
    """{host: [names of the tasks that changed it, once per task as the recap counts]} from a run's output."""
    found, task, seen = {}, None, set()
    for line in output.splitlines():
        heading = re.match(r"^TASK \[(.*)\] \*+$", line)
        if heading:
            task, seen = heading.group(1), set()
        moved = re.match(r"^changed: \[([^\]]+)\]", line)
        host = moved.group(1).split(" -> ")[0] if moved else None
        if host and task and host not in seen:
            seen.add(host)
            found.setdefault(host, []).append(task)
    return found


def test_the_other_nodes_changed_nothing_but_the_sender_s_daemon_for_the_round(replaced):
    result, changed = replaced
    assert changed["md-worker4"] > 0
    with open(os.path.join(ARTIFACTS, "model-distribution-last-transfer.json")) as handle:
        sender = json.load(handle)["rounds"][0][0]["src"]
    assert {name: changed[name] for name in NAMES[:-1] if name != sender} == {
        name: 0 for name in NAMES[:-1] if name != sender}
    # The sender ran this round's rsync daemon (its configuration, password and transient unit, stopped and removed
    # at the end, the unit through the common role) and changed nothing else.
    tasks = changes(result.stdout).get(sender, [])
    assert len(tasks) == changed[sender], tasks
    assert all(" : Round | " in task or task == "aihost.llm_cluster.common : Unit absent | Stop (and disable) the units "
               "systemd knows" for task in tasks), tasks
