# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The model's life on 1 + 4 nodes, in order: everywhere and verified, unchanged, repaired, resumed, refused.

The tests run once (on md-master1), drive the other nodes through testinfra hosts and run the model step
with ansible-playbook against Molecule's inventory, so they depend on the order they are written in.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest
import testinfra

testinfra_hosts = ["ansible://md-master1"]

SCENARIO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
ARTIFACTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "artifacts")
NAMES = ["md-master1", "md-worker1", "md-worker2", "md-worker3", "md-worker4"]
MODEL = "/srv/models/synthetic"
SHARD = "model-00002-of-00004.safetensors"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def nodes():
    return {name: testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY)) for name in NAMES}


def sums(node):
    out = node.check_output("cd %s && find . -type f ! -name '.llm_cluster-*' -print0 | sort -z | xargs -0 sha256sum" % MODEL)
    return dict(reversed(line.split("  ", 1)) for line in out.splitlines())


def model_step(*extra):
    result = subprocess.run(["ansible-playbook", "-i", INVENTORY, os.path.join(SCENARIO, "model.yml")] + list(extra),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=900,
                            check=False)
    changed = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", result.stdout, re.M)}
    return result, changed


def failures(output):
    """The lines that say why a run failed, for assertion messages."""
    return "\n".join(line for line in output.splitlines() if "fatal:" in line or "FAILED" in line or "msg" in line)[-4000:]


def report():
    with open(os.path.join(ARTIFACTS, "model-distribution.json")) as handle:
        return json.load(handle)


def test_every_node_holds_the_same_verified_model(nodes):
    source = sums(nodes["md-master1"])
    assert len(source) == 7 and sum(1 for name in source if name.endswith(".safetensors")) == 4
    for name in NAMES[1:]:
        assert sums(nodes[name]) == source, name
        record = json.loads(nodes[name].file(MODEL + "/.llm_cluster-verified.json").content_string)
        assert record["digest"] == report()["digest"]


def test_the_model_went_down_one_chain_once_per_link():
    with open(os.path.join(ARTIFACTS, "model-distribution-last-transfer.json")) as handle:
        doc = json.load(handle)
    assert doc["total_bytes"] >= 256 * MIB and doc["files"] == 7
    assert [(link["src"], link["dst"]) for link in doc["rounds"][0]] == list(zip(NAMES[:-1], NAMES[1:]))
    assert len(doc["rounds"]) == 1
    assert sorted(t["dst"] for t in doc["transfers"]) == NAMES[1:]
    assert all(t["files"] == 7 and 256 * MIB <= t["bytes_received"] < 260 * MIB for t in doc["transfers"])


def test_the_second_run_moved_nothing():
    # Molecule's idempotence action ran the whole converge again and found changed=0 on every node; its report
    # is the last one written.
    doc = report()
    assert doc["transfers"] == [] and doc["rounds"] == [], doc


def test_corrupted_shard_is_the_only_file_sent_again(nodes):
    victim = nodes["md-worker2"]
    victim.check_output("dd if=/dev/urandom of=%s/%s bs=1M count=1 seek=10 conv=notrunc status=none" % (MODEL, SHARD))
    result, changed = model_step()
    assert result.returncode == 0, failures(result.stdout)
    transfers = report()["transfers"]
    assert [(t["dst"], t["files"]) for t in transfers] == [("md-worker2", 1)]
    assert transfers[0]["bytes_received"] < 64 * MIB
    assert sums(victim) == sums(nodes["md-master1"])


def test_killed_transfer_leaves_nothing_running_and_resumes(nodes):
    # md-worker3 takes the shard from the holder of its own rack (molecule.yml's model_distribution_locality):
    # md-worker2, whose link is the one slowed down.
    source, victim = nodes["md-worker2"], nodes["md-worker3"]
    victim.check_output("rm -f %s/%s" % (MODEL, SHARD))
    # 64 MiB at 80 Mbit/s takes about 7 s: stop the receiving rsync half-way.
    source.check_output("tc qdisc add dev eth0 root tbf rate 80mbit burst 256kb latency 50ms")
    try:
        run = subprocess.Popen(["ansible-playbook", "-i", INVENTORY, os.path.join(SCENARIO, "model.yml")],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        # rsync receives into a temporary file (.<name>.XXXXXX) next to the target: stop it past 8 MiB.
        deadline, received = time.time() + 120, 0
        while time.time() < deadline and received < 8 * MIB:
            sizes = victim.run("find %s -maxdepth 1 -name '.%s.*' -printf '%%s\\n'" % (MODEL, SHARD)).stdout.split()
            received = max([int(size) for size in sizes] or [0])
            time.sleep(0.3)
        assert received >= 8 * MIB, "the transfer never started"
        victim.check_output("pkill -TERM -f '[r]sync --password-file'")
        output = run.communicate(timeout=600)[0]
        assert run.returncode != 0, output[-3000:]
    finally:
        source.run("tc qdisc del dev eth0 root")
    # The failed round left nothing running and no secret behind, on any node.
    for name in NAMES:
        node = nodes[name]
        assert node.run("systemctl is-active llm-cluster-model-rsyncd").stdout.strip() != "active", name
        assert node.run("pgrep -a -x rsync").stdout == "", (name, node.run("ps -ef").stdout)
        for secret in ("rsyncd.secrets", "password"):
            assert not node.file("/run/llm_cluster/model/" + secret).exists, (name, secret)
    partial = victim.check_output("find %s/.llm_cluster-partial -type f -printf '%%s\\n' 2>/dev/null || true" % MODEL)
    kept = sum(int(size) for size in partial.split())
    assert 0 < kept < 64 * MIB
    result, changed = model_step()
    assert result.returncode == 0, failures(result.stdout)
    transfers = report()["transfers"]
    assert [t["dst"] for t in transfers] == ["md-worker3"]
    assert transfers[0]["bytes_received"] < 64 * MIB - kept // 2
    assert sums(victim) == sums(source)


def test_destination_without_room_fails_before_any_byte_moves(nodes):
    victim = nodes["md-worker4"]
    victim.check_output("mount -t tmpfs -o size=16m tmpfs %s" % MODEL)
    try:
        result, changed = model_step()
        output = " ".join(result.stdout.split())
        assert result.returncode != 0
        assert "Model distribution cannot start; nothing was sent" in output
        assert "md-worker4: 0.02 GiB free under %s, the model needs" % MODEL in output
        assert victim.check_output("ls -A %s" % MODEL) == ""
    finally:
        victim.run("umount %s" % MODEL)
