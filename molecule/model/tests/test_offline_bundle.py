# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""An offline bundle built on the controller (./deploy.sh bundle: Ray's wheels from the local wheelhouse, an engine
image, a model) carried to the 5 nodes by deploy.yml's bundle step: once from the controller, then down one chain,
every copy checked here with sha256sum against the bundle's MANIFEST.json; a second run moves nothing; a damaged
wheel on one node is the only file sent again; a file damaged in the controller's bundle stops the step before any
node but the head takes a byte. Runs after test_model.py (the nodes are prepared by the converge).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest
import testinfra

testinfra_hosts = ["ansible://md-master1"]

SCENARIO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(SCENARIO))
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
ARTIFACTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "artifacts")
WHEELHOUSE = os.path.join(ROOT, ".cache", "wheelhouse")
NAMES = ["md-master1", "md-worker1", "md-worker2", "md-worker3", "md-worker4"]
ON_NODE = "/var/cache/llm_cluster/bundle"
IMAGE = "llmc-md-bundle-probe:1"
RAY = "2.60.0"


def run(*args, timeout=900):
    result = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                            timeout=timeout, check=False)
    changed = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", result.stdout, re.M)}
    return result, changed


def failures(output):
    return "\n".join(line for line in output.splitlines() if "fatal:" in line or "FAILED" in line or "msg" in line)[-4000:]


def report(name="bundle-distribution.json"):
    with open(os.path.join(ARTIFACTS, name)) as handle:
        return json.load(handle)


def msgpack_version():
    """The version of the one msgpack wheel in the wheelhouse `make` fills."""
    wheels = [name for name in os.listdir(WHEELHOUSE) if name.startswith("msgpack-") and name.endswith(".whl")]
    assert len(wheels) == 1, wheels
    return wheels[0].split("-")[1]


@pytest.fixture(scope="module")
def nodes():
    return {name: testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY)) for name in NAMES}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """./deploy.sh bundle's playbook on the controller, for this inventory: Ray and msgpack pinned by a lock and taken
    from the wheelhouse `make` fills, a one-file image made with docker import, and a small model (which the bundle
    step leaves to the model step). The nodes are not contacted (bundle_platform is given)."""
    work = tmp_path_factory.mktemp("offline-bundle")
    lock = work / "engine.lock"
    lock.write_text("ray==%s\nmsgpack==%s\n" % (RAY, msgpack_version()), encoding="utf-8")
    payload = work / "engine-payload.txt"
    payload.write_bytes(os.urandom(256 * 1024))
    layer = work / "layer.tar"
    with tarfile.open(layer, "w") as archive:
        archive.add(payload, arcname="engine-payload.txt")
    made = subprocess.run(["docker", "import", str(layer), IMAGE], capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    model = work / "models" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "llama"}\n', encoding="utf-8")
    target = work / "bundle"
    try:
        result, _changed = run(
            "ansible-playbook", "-i", INVENTORY, os.path.join(ROOT, "playbooks", "bundle.yml"),
            "-e", "bundle_dir=%s" % target, "-e", "bundle_platform=x86_64/3.11", "-e", "serve_pip_lock=%s" % lock,
            "-e", "bundle_pip_args='--no-index --find-links %s'" % WHEELHOUSE, "-e", "bundle_model=%s/" % model,
            "-e", json.dumps({"bundle_images": [IMAGE], "bundle_image_pull": False}))
        assert result.returncode == 0, failures(result.stdout)
    finally:
        subprocess.run(["docker", "image", "rm", "-f", IMAGE], capture_output=True, check=False)
    yield target
    shutil.rmtree(work, ignore_errors=True)


def bundle_step(target, *extra):
    return run("ansible-playbook", "-i", INVENTORY, os.path.join(ROOT, "playbooks", "deploy.yml"), "--tags", "bundle",
               "-e", "llm_cluster_bundle=%s" % target, *extra)


def carried(target):
    """{path under the node's copy: sha256} of what the chain carries: MANIFEST.json's files but the model's."""
    with open(os.path.join(target, "MANIFEST.json"), encoding="utf-8") as handle:
        document = json.load(handle)
    return {entry["path"]: entry["sha256"] for entry in document["files"] if not entry["path"].startswith("model/")}


def sums(node):
    out = node.check_output("cd %s && find . -type f ! -name '.llm_cluster-*' -printf '%%P\\0' | sort -z "
                            "| xargs -0 -r sha256sum" % ON_NODE)
    return {path: digest for digest, path in (line.split("  ", 1) for line in out.splitlines())}


def test_the_bundle_reaches_every_node_down_one_chain_and_matches_its_manifest(nodes, bundle):
    want = carried(bundle)
    assert any(path.startswith("images/") for path in want) and any(path.endswith(".whl") for path in want)
    result, changed = bundle_step(bundle)
    assert result.returncode == 0, failures(result.stdout)
    for name in NAMES:
        # Recomputed on the node by sha256sum: every file of the manifest but the model's, and nothing else.
        assert sums(nodes[name]) == want, name
    doc = report("bundle-distribution-last-transfer.json")
    assert doc["path"] == ON_NODE and doc["files"] == len(want)
    assert [(link["src"], link["dst"]) for link in doc["rounds"][0]] == list(zip(NAMES[:-1], NAMES[1:]))
    assert sorted(t["dst"] for t in doc["transfers"]) == NAMES[1:]
    assert all(t["files"] == len(want) for t in doc["transfers"])
    # What the roles install from: pip finds the lock's pins in a worker's copy, with no index.
    worker = nodes["md-worker4"]
    found = worker.run("python3 -m pip download --no-index --no-deps --find-links %s/wheels/x86_64-py3.11 "
                       "-d /tmp/bundle-probe 'msgpack==%s' && rm -rf /tmp/bundle-probe" % (ON_NODE, msgpack_version()))
    assert found.rc == 0, found.stdout + found.stderr


def test_a_second_run_moves_nothing(bundle):
    result, changed = bundle_step(bundle)
    assert result.returncode == 0, failures(result.stdout)
    assert changed == {name: 0 for name in NAMES}
    assert report()["transfers"] == []


def test_a_damaged_wheel_on_one_node_is_the_only_file_sent_again(nodes, bundle):
    want = carried(bundle)
    ray = [path for path in want if "/ray-" in path][0]
    victim = nodes["md-worker3"]
    victim.check_output("dd if=/dev/urandom of=%s/%s bs=1k count=4 seek=100 conv=notrunc status=none" % (ON_NODE, ray))
    result, changed = bundle_step(bundle)
    assert result.returncode == 0, failures(result.stdout)
    assert [(t["dst"], t["files"]) for t in report()["transfers"]] == [("md-worker3", 1)]
    assert sums(victim) == want


def test_a_file_damaged_in_the_controller_s_bundle_stops_the_step_before_the_chain(nodes, bundle):
    want = carried(bundle)
    archive = [path for path in want if path.startswith("images/")][0]
    path = os.path.join(bundle, "content", archive)
    with open(path, "r+b") as handle:
        handle.seek(1024)
        good = handle.read(16)
        handle.seek(1024)
        handle.write(bytes(byte ^ 0xFF for byte in good))
    try:
        result, _changed = bundle_step(bundle)
    finally:
        with open(path, "r+b") as handle:
            handle.seek(1024)
            handle.write(good)
    out = " ".join(result.stdout.split())
    assert result.returncode != 0
    assert "md-master1:%s does not match the manifest it was given" % ON_NODE in out, failures(result.stdout)
    assert "nothing was sent to the other nodes" in out and "%s is damaged: SHA-256" % archive in out, out[-3000:]
    assert "-e bundle_verify=true" in out
    # The workers kept their good copies.
    for name in NAMES[1:]:
        assert sums(nodes[name]) == want, name


def test_teardown_removes_every_node_s_copy(nodes):
    result, changed = run("ansible-playbook", "-i", INVENTORY, os.path.join(ROOT, "playbooks", "teardown.yml"),
                          "--tags", "ray")
    assert result.returncode == 0, failures(result.stdout)
    for name in NAMES:
        assert not nodes[name].file(ON_NODE).exists, name
