# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The offline gate on the controller (llm_cluster_offline): no package index, no registry pull, no hub, per node,
with the roles' defaults applied where the inventory is silent; hostile pip arguments that smuggle an index in."""

from __future__ import annotations

import copy
import os

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._inventory_validation import (
    WHEELHOUSE_CACHE,
    offline_problems,
    offline_settings,
    validate,
)
from ansible_collections.aihost.llm_cluster.tests.unit.plugins.plugin_utils.test__inventory_validation_comm import (
    BASE as COMM_BASE,
    MEMBERS,
)

BASE = dict((key, value) for key, value in COMM_BASE.items() if key != "backend_env")
# A host-runtime cluster that installs from wheels on every node.
GOOD = {"llm_cluster_offline": True, "ray_cluster_wheelhouse": "/srv/bundle/content/wheels/aarch64-py3.11"}


def spec(every=None, per_host=None):
    result = copy.deepcopy(BASE)
    result["offline"] = {host: dict(every or {}, **((per_host or {}).get(host) or {})) for host in MEMBERS}
    return result


def offline_errors(found):
    return [error for error in found if error.startswith("llm_cluster_offline is on")]


def test_an_inventory_with_the_wheelhouse_passes_and_online_inventories_are_not_read():
    assert validate(spec(GOOD)) == []
    # Wheels copied from the controller: the engine follows Ray to the node's copy.
    assert validate(spec({"llm_cluster_offline": True, "ray_cluster_wheelhouse_src": "/srv/bundle/w"})) == []
    # The container runtime with its archive.
    assert validate(spec({"llm_cluster_offline": True, "ray_cluster_wheelhouse": "/wheelhouse",
                          "image_name": "aihost-llm-cluster/engine-vllm-cpu",
                          "serve_image_archive": "/images/engine.tar"})) == []
    # Not offline: an index, a pull and a hub are what an online site uses.
    assert validate(spec({"serve_pip_extra_args": "--index-url https://pypi.example/simple",
                          "image_name": "quay.io/ascend/vllm-ascend", "model_distribution_source": "hub"})) == []


@pytest.mark.parametrize("given, named", [
    # The engine's own wheelhouse set: only Ray is named (without it both are, test below).
    ({"ray_cluster_wheelhouse": "", "serve_wheelhouse": "/opt/wheels"},
     "Ray would be installed from the package index: set ray_cluster_wheelhouse"),
    ({"ray_cluster_pip_extra_args": "--index-url https://mirror.example/simple", "serve_pip_extra_args": ""},
     "ray_cluster_pip_extra_args = '--index-url https://mirror.example/simple' sends pip to a network"),
    ({"serve_pip_extra_args": "--extra-index-url=https://x.example/simple"}, "serve_pip_extra_args = "),
    ({"serve_pip_extra_args": "--find-links https://x.example/wheels"}, "'https://x.example/wheels'"),
    ({"model_distribution_hub_pip_extra_args": ["--trusted-host", "x.example"]},
     "model_distribution_hub_pip_extra_args = "),
    ({"serve_wheelhouse": ""}, "the engine would be installed from the package index: set serve_wheelhouse"),
    ({"image_name": "quay.io/ascend/vllm-ascend"}, "the engine image would be pulled from a registry"),
    ({"serve_runtime": "container", "serve_image": "vllm/vllm-openai:v0.9.2"}, "set serve_image_archive"),
    ({"model_distribution_source": "hub"}, "model_distribution_source = 'hub' downloads the model from a hub"),
])
def test_each_network_need_is_named_with_the_variable_and_the_fix(given, named):
    errors = offline_errors(validate(spec(dict(GOOD, **given))))
    assert len(errors) == 1 and named in errors[0], errors
    assert errors[0].startswith("llm_cluster_offline is on, but on every node ")


def test_one_node_s_own_setting_is_named_with_that_host():
    errors = validate(spec(GOOD, per_host={MEMBERS[1]: {"serve_image_archive": "", "image_name": "x/engine"}}))
    assert errors == ["llm_cluster_offline is on, but on host %s the engine image would be pulled from a registry: set "
                      "serve_image_archive to its docker save tarball (on the controller, or on every node with "
                      "serve_image_archive_remote_src: true)." % MEMBERS[1]]


def test_no_wheelhouse_at_all_names_ray_and_the_engine():
    errors = offline_errors(validate(spec({"llm_cluster_offline": True})))
    assert len(errors) == 2
    assert "Ray would be installed from the package index" in errors[0]
    assert "the engine would be installed from the package index" in errors[1]


def test_the_engine_s_pip_arguments_follow_ray_s_and_are_named_too():
    errors = offline_errors(validate(spec(dict(GOOD, ray_cluster_pip_extra_args="-ihttps://mirror.example/simple"))))
    named = [error.split(" = ")[0].rsplit(" ", 1)[-1] for error in errors]
    assert named == ["ray_cluster_pip_extra_args", "serve_pip_extra_args"]


def test_an_engine_already_in_the_venv_needs_no_wheels_for_it_but_ray_still_does():
    errors = offline_errors(validate(spec({"llm_cluster_offline": "yes", "serve_install": False})))
    assert len(errors) == 1 and "Ray would be installed" in errors[0]


def test_the_switch_off_in_any_spelling_reads_nothing():
    for off in (False, "false", "no", 0, None, ""):
        assert offline_problems(offline_settings({"llm_cluster_offline": off, "model_distribution_source": "hub"})) == []


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["llm_cluster_offline", "ray_cluster_wheelhouse", "ray_cluster_wheelhouse_src",
                                        "ray_cluster_pip_extra_args", "serve_wheelhouse", "serve_pip_extra_args",
                                        "serve_install", "serve_runtime", "image_name", "serve_image",
                                        "serve_image_archive", "model_distribution_source",
                                        "model_distribution_hub_pip_extra_args"]),
                       st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=40),
                                 st.lists(st.text(max_size=10), max_size=3),
                                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))))
def test_any_values_get_a_verdict_not_a_traceback(values):
    found = validate(spec(dict(values, llm_cluster_offline=True)))
    assert all("could not be checked" not in error for error in found), found


def test_the_validator_s_wheelhouse_copy_is_where_ray_cluster_puts_it_and_serve_reads_it():
    # Three places name the node's copy of ray_cluster_wheelhouse_src: they must agree.
    roles = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles")
    with open(os.path.join(roles, "ray_cluster", "vars", "main.yml"), encoding="utf-8") as handle:
        assert yaml.safe_load(handle)["__ray_cluster_wheelhouse_cache"] == WHEELHOUSE_CACHE
    with open(os.path.join(roles, "serve", "defaults", "main.yml"), encoding="utf-8") as handle:
        assert "'%s'" % WHEELHOUSE_CACHE in yaml.safe_load(handle)["serve_wheelhouse"]
