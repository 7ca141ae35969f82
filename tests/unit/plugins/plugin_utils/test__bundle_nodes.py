# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A built bundle given to a deploy (llm_cluster_bundle): what it gives each node (its platform's wheels and lock,
its image's archive and ID, the model), what it lacks for one, and the validator's reading of it."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.aihost.llm_cluster.plugins.lookup import bundle as bundle_lookup
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _bundle
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._inventory_validation import (
    offline_settings,
    validate,
)
from ansible_collections.aihost.llm_cluster.tests.unit.plugins.plugin_utils.test__inventory_validation_offline import (
    spec,
)

IMAGE = "aihost-llm-cluster/engine-vllm-cpu:0.32.0"
ARCHIVE = "images/aihost-llm-cluster_engine-vllm-cpu_0.32.0.tar"
IMAGE_ID = "sha256:" + "ab" * 32
# Two platforms: the x86_64 head and an aarch64 (Kunpeng) worker.
FILES = {
    "wheels/x86_64-py3.11/ray-2.60.0-cp311-cp311-manylinux2014_x86_64.whl": b"ray x86",
    "wheels/x86_64-py3.11/engine-lock.txt": b"ray==2.60.0\n",
    "wheels/aarch64-py3.9/ray-2.60.0-cp39-cp39-manylinux2014_aarch64.whl": b"ray arm",
    ARCHIVE: b"an image archive",
    "model/tiny-llama/config.json": b"{}",
    "model/tiny-llama/model.safetensors": b"weights",
}


def build(root, files=None, **document):
    """A bundle directory as ./deploy.sh bundle writes it: content/ and MANIFEST.json."""
    files = FILES if files is None else files
    for path, data in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, "content", path)), exist_ok=True)
        with open(os.path.join(root, "content", path), "wb") as handle:
            handle.write(data)
    manifest = {"version": 1, "content": "content",
                "platforms": {"x86_64-py3.11": ["master1"], "aarch64-py3.9": ["worker1"]},
                "images": [{"ref": IMAGE, "id": IMAGE_ID, "repo_digests": [], "archive": ARCHIVE}],
                "model": {"path": "model/tiny-llama", "source": "/srv/models/tiny-llama"},
                "files": [{"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                          for path, data in sorted(files.items())]}
    manifest.update(document)
    with open(os.path.join(root, "MANIFEST.json"), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle)
    return str(root)


def test_each_node_gets_its_platform_s_wheels_the_image_s_archive_and_id_and_the_model(tmp_path):
    root = build(tmp_path)
    head, problems = _bundle.resolve(root, "master1", IMAGE, check_files=True)
    assert problems == []
    assert head == {"platform": "x86_64-py3.11", "wheels": os.path.join(root, "content/wheels/x86_64-py3.11"),
                    "lock": os.path.join(root, "content/wheels/x86_64-py3.11/engine-lock.txt"),
                    "image_archive": os.path.join(root, "content", ARCHIVE), "image_id": IMAGE_ID,
                    "model": os.path.join(root, "content/model/tiny-llama")}
    # The aarch64 worker: its own directory, which has no lock; the host runtime takes no image.
    worker, problems = _bundle.resolve(root, "worker1", "", check_files=True)
    assert problems == []
    assert (worker["wheels"], worker["lock"], worker["image_archive"], worker["image_id"]) == (
        os.path.join(root, "content/wheels/aarch64-py3.9"), "", "", "")


def test_a_node_the_bundle_was_not_built_for_and_an_image_it_lacks_are_named(tmp_path):
    root = build(tmp_path)
    items, problems = _bundle.resolve(root, "worker9", "quay.io/ascend/vllm-ascend:v0.9.1")
    assert items["wheels"] == "" and items["image_archive"] == ""
    assert problems == [
        "worker9 is in none of the platforms of llm_cluster_bundle %s (aarch64-py3.9, x86_64-py3.11): build the "
        "bundle with this inventory, so that it names this node's platform" % root,
        "worker9 runs the engine image quay.io/ascend/vllm-ascend:v0.9.1, which llm_cluster_bundle %s does not hold "
        "(it holds %s): add it to bundle_images and build the bundle again" % (root, IMAGE)]
    # One platform serves every node, named or not (a bundle built for a one-platform site).
    single = build(tmp_path / "one", {"wheels/x86_64-py3.11/engine-lock.txt": b"ray==2.60.0\n"},
                   platforms={"x86_64-py3.11": ["node-a"]}, images=[], model={})
    items, problems = _bundle.resolve(single, "worker9", "")
    assert problems == [] and items["platform"] == "x86_64-py3.11" and items["model"] == ""


def test_a_missing_or_cut_file_a_node_takes_is_named_with_the_way_to_check_the_copy(tmp_path):
    root = build(tmp_path)
    os.unlink(os.path.join(root, "content", "model/tiny-llama/model.safetensors"))
    with open(os.path.join(root, "content", ARCHIVE), "wb") as handle:
        handle.write(b"cut")
    # A file of the other platform is not this node's concern.
    os.unlink(os.path.join(root, "content", "wheels/aarch64-py3.9/ray-2.60.0-cp39-cp39-manylinux2014_aarch64.whl"))
    _items, problems = _bundle.resolve(root, "master1", IMAGE, check_files=True)
    check = "check the copy with ./deploy.sh bundle -e bundle_dir=%s -e bundle_verify=true" % root
    assert problems == [
        "master1 needs %s/content/%s has 3 bytes, its MANIFEST.json 16: %s" % (root, ARCHIVE, check),
        "master1 needs %s/content/model/tiny-llama/model.safetensors is missing: %s" % (root, check)]


@pytest.mark.parametrize("manifest, why", [
    (None, "cannot be read (No such file or directory)"),
    (b"{not json", "is not JSON"),
    (b'{"version": 2, "files": []}', "has no MANIFEST.json of a bundle"),
    (b'[1, 2]', "has no MANIFEST.json of a bundle"),
])
def test_a_directory_that_is_not_a_bundle_is_named_with_how_to_build_one(tmp_path, manifest, why):
    if manifest is not None:
        (tmp_path / "MANIFEST.json").write_bytes(manifest)
    items, problems = _bundle.resolve(str(tmp_path), "master1", IMAGE, check_files=True)
    assert set(items.values()) == {""}
    assert len(problems) == 1 and why in problems[0] and "./deploy.sh bundle -e bundle_dir=" in problems[0], problems


def test_the_validator_reads_the_bundle_as_the_roles_defaults_do(tmp_path):
    root = build(tmp_path)
    node = {"llm_cluster_bundle": root}
    # The bundle alone turns offline on and gives Ray's wheels (the engine follows them), the archive and the model.
    resolved = {"items": _bundle.resolve(root, "master1", IMAGE)[0], "problems": []}
    settings_ = offline_settings(dict(node, image_name="aihost-llm-cluster/engine-vllm-cpu", __bundle=resolved))
    assert settings_["offline"] is True
    assert settings_["ray_cluster_wheelhouse_src"] == os.path.join(root, "content/wheels/x86_64-py3.11")
    assert settings_["serve_image_archive"] == os.path.join(root, "content", ARCHIVE)
    assert settings_["model_distribution_source"] == "controller"
    # The inventory's own values win; llm_cluster_offline: false turns the gate off.
    settings_ = offline_settings(dict(node, llm_cluster_offline=False, model_distribution_source="node",
                                      ray_cluster_wheelhouse_src="/srv/w", __bundle=resolved))
    assert (settings_["offline"], settings_["ray_cluster_wheelhouse_src"], settings_["model_distribution_source"]) == (
        False, "/srv/w", "node")
    assert validate(spec(dict(node, __bundle=resolved))) == []


def test_what_the_bundle_lacks_fails_the_validation_once_per_message(tmp_path):
    root = build(tmp_path)
    given = spec(per_host={host: {"llm_cluster_bundle": root, "image_name": "quay.io/ascend/vllm-ascend",
                                  "__bundle": dict(zip(("items", "problems"),
                                                       _bundle.resolve(root, host, "quay.io/ascend/vllm-ascend:v1")))}
                           for host in ("master1", "worker1", "worker2")})
    errors = validate(given)
    lacking = [error for error in errors if "does not hold" in error]
    assert len(lacking) == 3 and all(error.startswith(host) for error, host in zip(
        sorted(lacking), ("master1", "worker1", "worker2"))), errors
    # No archive for the image: the offline gate names the registry pull too, on every node.
    assert any(error.startswith("llm_cluster_offline is on, but on every node the engine image would be pulled")
               for error in errors), errors
    assert any(error.startswith("worker2 is in none of the platforms") for error in errors), errors


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=12))
def test_any_manifest_gets_items_and_problems_not_a_traceback(document):
    items, problems = _bundle.node_items(document, "master1", IMAGE)
    assert set(items) == set(_bundle.ITEMS) and all(isinstance(value, str) for value in items.values())
    assert isinstance(problems, list)


def test_the_lookup_gives_empty_strings_without_a_bundle_and_refuses_an_unknown_item(tmp_path):
    lookup = bundle_lookup.LookupModule()
    assert lookup.run(["wheels", "model"], {}, bundle="", host="master1") == ["", ""]
    root = build(tmp_path)
    assert lookup.run(["image_id", "platform"], {}, bundle=root, host="master1", image=IMAGE) == [IMAGE_ID, "x86_64-py3.11"]
    with pytest.raises(Exception, match="not an item of a bundle"):
        lookup.run(["weights"], {}, bundle=root, host="master1")
    with pytest.raises(Exception, match="hosts is not an option"):
        lookup.run(["wheels"], {}, bundle=root, hosts="master1")
    # A bundle that lacks the node: empty strings (the validation has named it before any host is touched).
    assert lookup.run(["wheels"], {}, bundle=root, host="worker9") == [""]


def test_the_chain_s_copy_is_where_the_nodes_read_the_wheels_and_the_archive(tmp_path):
    """With the chain (llm_cluster_bundle_node_path, by default /var/cache/llm_cluster/bundle) the nodes read the
    wheels and the image archive from their own copy, and no role copies them from the controller; the lock, the
    image's ID and the model stay the controller's."""
    root = build(tmp_path)
    lookup = bundle_lookup.LookupModule()
    terms = ["wheels", "image_archive", "lock", "image_id", "model"]
    on_node = lookup.run(terms, {}, bundle=root, host="master1", image=IMAGE, side="node", node_path=None)
    assert on_node == [_bundle.NODE_PATH + "/wheels/x86_64-py3.11", _bundle.NODE_PATH + "/" + ARCHIVE,
                       os.path.join(root, "content/wheels/x86_64-py3.11/engine-lock.txt"), IMAGE_ID,
                       os.path.join(root, "content/model/tiny-llama")]
    assert lookup.run(terms[:2], {}, bundle=root + "/", host="worker1", side="node", node_path="/srv/airgap") == [
        "/srv/airgap/wheels/aarch64-py3.9", ""]
    # The controller side: nothing to copy for what the chain carries.
    assert lookup.run(terms[:2], {}, bundle=root, host="master1", image=IMAGE, node_path=None) == ["", ""]
    # No chain (""): the controller's paths, copied to each node by the roles as before.
    assert lookup.run(terms[:2], {}, bundle=root, host="master1", image=IMAGE, node_path="") == [
        os.path.join(root, "content/wheels/x86_64-py3.11"), os.path.join(root, "content", ARCHIVE)]
    assert lookup.run(terms[:2], {}, bundle=root, host="master1", image=IMAGE, side="node", node_path="") == ["", ""]
    with pytest.raises(Exception, match="side must be controller or node"):
        lookup.run(["wheels"], {}, bundle=root, host="master1", side="nodes")
    with pytest.raises(Exception, match="is not an absolute path"):
        lookup.run(["wheels"], {}, bundle=root, host="master1", side="node", node_path="var/cache/bundle")
    with pytest.raises(Exception, match="must be a path"):
        lookup.run(["wheels"], {}, bundle=root, host="master1", side="node", node_path=["/var/cache/bundle"])
    # Without a bundle every item is empty, whatever the node path says (the validation names a bad one then).
    assert lookup.run(["wheels"], {}, bundle="", host="master1", side="node", node_path="var/cache/bundle") == [""]


def test_the_chain_carries_the_content_without_the_model_under_a_manifest_the_module_accepts(tmp_path):
    from ansible_collections.aihost.llm_cluster.plugins.module_utils import _manifest

    root = build(tmp_path)
    with open(os.path.join(root, "MANIFEST.json"), encoding="utf-8") as handle:
        document = json.load(handle)
    payload = _bundle.payload_manifest(document)
    assert [entry["path"] for entry in payload["files"]] == sorted(
        path for path in FILES if not path.startswith("model/"))
    assert payload["excluded"] == ["model/tiny-llama"] and payload["content"] == "content"
    assert payload["total_bytes"] == sum(len(data) for path, data in FILES.items() if not path.startswith("model/"))
    # The module that verifies every node's copy takes it as it is, and finds the content's files match it.
    checked = _manifest.check_manifest(payload)
    assert checked["digest"] == payload["digest"]
    result = _manifest.verify(os.path.join(root, "content"), payload)
    assert result["bad_files"] == [] and {item["path"] for item in result["mismatches"]} == {
        "model/tiny-llama/config.json", "model/tiny-llama/model.safetensors"}
    # A bundle without a model carries everything.
    document["model"] = {}
    assert len(_bundle.payload_manifest(document)["files"]) == len(FILES)


@pytest.mark.parametrize("document, why", [
    (None, "not a bundle's MANIFEST.json"),
    ({"version": 2, "files": []}, "not a bundle's MANIFEST.json"),
    ({"version": 1, "files": [{"size": 1, "sha256": "0" * 64}]}, "without a path"),
    ({"version": 1, "files": [{"path": "a.whl", "sha256": "0" * 64}]}, "without a size or SHA-256"),
    ({"version": 1, "files": [{"path": "a.whl", "size": "many", "sha256": "0" * 64}]}, "without a size or SHA-256"),
])
def test_a_manifest_the_chain_cannot_carry_is_refused_with_why(document, why):
    with pytest.raises(ValueError, match=why):
        _bundle.payload_manifest(document)


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=12))
def test_any_document_gives_a_payload_or_a_value_error(document):
    try:
        payload = _bundle.payload_manifest(document)
    except ValueError:
        return
    assert payload["version"] == 1 and isinstance(payload["files"], list)


@pytest.mark.parametrize("value, model, why", [
    ("var/cache/llm_cluster/bundle", "", "is not an absolute path"),
    ("/var/cache/../etc", "", "is not an absolute path"),
    ("/var/cache/llm_cluster/bundle/", "", "is not an absolute path"),
    ("/var/cache/llm bundle", "", "is not an absolute path"),
    ("/var/cache/bundle\nExecStart=/bin/sh", "", "is not an absolute path"),
    ("/var/cache/$(reboot)", "", "is not an absolute path"),
    (["/var/cache/bundle"], "", "must be a path"),
    (7, "", "must be a path"),
    ("/srv/models/qwen", "/srv/models/qwen/", "overlaps model_path /srv/models/qwen"),
    ("/srv/models/qwen/bundle", "/srv/models/qwen", "overlaps model_path"),
    ("/srv/models", "/srv/models/qwen", "overlaps model_path"),
])
def test_a_node_path_the_chain_cannot_use_is_named_with_the_fix(value, model, why):
    problems = _bundle.node_path_problems(value, model)
    assert len(problems) == 1 and why in problems[0] and "llm_cluster_bundle_node_path" in problems[0]


@pytest.mark.parametrize("value, model", [(None, ""), ("", "/srv/models/qwen"), (_bundle.NODE_PATH, "/srv/models/qwen"),
                                          ("/srv/models-bundle", "/srv/models")])
def test_the_default_no_chain_and_a_sibling_of_the_model_are_accepted(value, model):
    assert _bundle.node_path_problems(value, model) == []
