# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The templates that write files other programs parse, rendered with hostile values.

Each template is rendered with Jinja2 and the filters it uses (as Ansible does:
trim_blocks), then read back by the program that reads it in production (sh for
the env file and the profile hook) or refused by the filter.
"""

from __future__ import annotations

import os
import subprocess

import jinja2
import pytest
from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import FilterModule as CoreFilters

from ansible_collections.aihost.llm_cluster.plugins.filter.quoting import FilterModule
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _quoting

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
HOSTILE = [
    "/data/my model",
    "/data/m\nExecStartPre=/bin/touch {canary}",
    "$(touch {canary})",
    "`touch {canary}`",
    "a'b\"c\\d",
    "'; touch {canary}; '",
    "${{HOME}}/x",
    " leading and trailing ",
    "tab\there",
    "\u202e\u00b2",
    "",
]


def environment():
    env = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    core = CoreFilters().filters()
    for name in ("comment", "combine", "extract", "bool", "quote"):
        env.filters[name] = core[name]
    for name, function in FilterModule().filters().items():
        env.filters["aihost.llm_cluster." + name] = function
    return env


def render(role, template, **variables):
    with open(os.path.join(ROOT, "roles", role, "templates", template)) as handle:
        return environment().from_string(handle.read()).render(ansible_managed="Ansible managed", **variables)


def env_vars(model_path, extra=None, env_file="/etc/llm_cluster/env"):
    return dict(
        inventory_hostname="master1", __prepare_head="master1", prepare_node_num=2,
        __prepare_head_address="192.0.2.10", __prepare_address="192.0.2.10", __prepare_interface="eth0",
        __prepare_accel={"type": "npu", "count": 2}, prepare_ray_port=6379, prepare_llm_port=8000,
        prepare_dp_port=12570, prepare_model_path=model_path, prepare_profile_hook="/etc/profile.d/llm_cluster.sh",
        __prepare_backend_env={"Native": {"HCCL_CONNECT_TIMEOUT": "7200"}}, prepare_backend_type="Native",
        prepare_env_extra=extra or {}, prepare_env_file=env_file)


def source(path, name):
    """The value of name after sh sources path the way the profile hook does (in path's directory)."""
    result = subprocess.run(["sh", "-c", 'set -a; . "$1"; set +a; printf %s "$' + name + '"', "sh", path],
                            capture_output=True, check=True, cwd=os.path.dirname(path))
    return result.stdout.decode()


@pytest.mark.parametrize("raw", HOSTILE)
def test_env_file_value_comes_back_byte_equal_and_nothing_runs(tmp_path, raw):
    canary = tmp_path / "pwned"
    value = raw.format(canary=canary)
    text = render("prepare", "env.j2", **env_vars(value, {"MY_EXTRA": value}))
    path = tmp_path / "env"
    path.write_text(text)
    subprocess.run(["bash", "-n", str(path)], check=True)
    assert source(str(path), "LLM_CLUSTER_MODEL_PATH") == value
    assert source(str(path), "MY_EXTRA") == value
    assert source(str(path), "HCCL_CONNECT_TIMEOUT") == "7200"
    assert not canary.exists()
    parsed = _quoting.env_file_parse(text)
    assert parsed["LLM_CLUSTER_MODEL_PATH"] == value and parsed["MY_EXTRA"] == value
    assert parsed["LLM_CLUSTER_NODE"] == "master1" and parsed["LLM_CLUSTER_RAY_PORT"] == "6379"
    assert parsed["ASCEND_RT_VISIBLE_DEVICES"] == "0,1"
    # A newline in a value adds no variable (nor a unit directive) of its own.
    assert "ExecStartPre" not in parsed
    assert set(parsed) == set(_quoting.env_file_parse(render("prepare", "env.j2", **env_vars("/x", {"MY_EXTRA": "y"}))))


def test_env_file_keeps_plain_values_unquoted():
    text = render("prepare", "env.j2", **env_vars("/data/models/DeepSeek-R1"))
    assert "LLM_CLUSTER_MODEL_PATH=/data/models/DeepSeek-R1\n" in text
    assert "GLOO_SOCKET_IFNAME=eth0\n" in text and "HCCL_IF_IP=192.0.2.10\n" in text


@pytest.mark.parametrize("name", ["A B", "X\nLD_PRELOAD", "1X", "$(id)"])
def test_env_file_refuses_a_name_that_is_no_variable(name):
    with pytest.raises(AnsibleFilterError, match="is not an environment variable name"):
        render("prepare", "env.j2", **env_vars("/data/m", {name: "1"}))


def test_env_file_refuses_nul():
    with pytest.raises(AnsibleFilterError, match="NUL"):
        render("prepare", "env.j2", **env_vars("/data/m\0x"))


def test_profile_hook_sources_an_env_file_whose_path_needs_quoting(tmp_path):
    canary = tmp_path / "pwned"
    directory = tmp_path / "dir with space $(touch pwned)"
    directory.mkdir()
    env_file = directory / "env"
    env_file.write_text(render("prepare", "env.j2", **env_vars("/data/m x", env_file=str(env_file))))
    hook = tmp_path / "llm_cluster.sh"
    hook.write_text(render("prepare", "profile.sh.j2", **env_vars("/data/m x", env_file=str(env_file))))
    subprocess.run(["bash", "-n", str(hook)], check=True)
    assert source(str(hook), "LLM_CLUSTER_MODEL_PATH") == "/data/m x"
    assert not canary.exists()


def rsyncd_vars(path, address="192.0.2.10"):
    return dict(__model_distribution_address=address, model_distribution_rsync_port=8730,
                __model_distribution_receivers=["worker1"], __model_distribution_members=["master1", "worker1"],
                hostvars={"master1": {"__model_distribution_address": address},
                          "worker1": {"__model_distribution_address": "192.0.2.11"}},
                model_distribution_path=path, model_distribution_run_dir="/run/llm_cluster/model",
                __model_distribution_partial_dir=".llm_cluster-partial", __model_distribution_sender_waits=False,
                __model_distribution_from="")


def test_rsyncd_conf_renders_plain_values_on_their_lines():
    text = render("model_distribution", "rsyncd.conf.j2", **rsyncd_vars("/data/my model"))
    assert "    path = /data/my model\n" in text
    assert "    hosts allow = 192.0.2.10 192.0.2.11\n" in text
    assert "address = 192.0.2.10\n" in text
    assert "pre-xfer exec" not in text


def chain_vars(sender_receives, interpreter="/opt/py 3/bin/python3"):
    variables = rsyncd_vars("/data/m")
    variables.update(__model_distribution_sender_waits=True, ansible_facts={}, ansible_python_interpreter=interpreter,
                     model_distribution_run_dir="/run/llm cluster",
                     __model_distribution_from="master1" if sender_receives else "")
    return variables


def test_rsyncd_conf_holds_requests_only_at_a_sender_that_is_receiving():
    text = render("model_distribution", "rsyncd.conf.j2", **chain_vars(True))
    assert "    pre-xfer exec = '/opt/py 3/bin/python3' -S -I '/run/llm cluster/sender_wait.py'\n" in text
    # The first node of the chain (the source) has a verified copy: nothing to hold.
    assert "pre-xfer exec" not in render("model_distribution", "rsyncd.conf.j2", **chain_vars(False))
    with pytest.raises(AnsibleFilterError, match="one_line"):
        render("model_distribution", "rsyncd.conf.j2", **chain_vars(True, "/usr/bin/python3\nlist = yes"))


@pytest.mark.parametrize("path, address", [
    ("/data/m\n[root]\n    path = /", "192.0.2.10"),
    ("/data/m\r", "192.0.2.10"),
    ("/data/m ", "192.0.2.10"),
    ("/data/m", "192.0.2.10\nhosts allow = *"),
])
def test_rsyncd_conf_refuses_a_value_that_would_add_directives(path, address):
    with pytest.raises(AnsibleFilterError, match="one_line"):
        render("model_distribution", "rsyncd.conf.j2", **rsyncd_vars(path, address))


def serve_vars(runtime, key, environment=None):
    return dict(__serve_unit="llm-cluster-engine", __serve_engine_leader=True, __serve_api_key=key,
                __serve_runtime=runtime, __serve_environment=environment or {})


def test_engine_env_for_systemd_quotes_the_key(tmp_path):
    key = "k'y $(touch %s)" % (tmp_path / "pwned")
    text = render("serve", "engine.env.j2", **serve_vars("host", key))
    path = tmp_path / "engine.env"
    path.write_text(text)
    assert source(str(path), "VLLM_API_KEY") == key
    assert _quoting.env_file_parse(text)["VLLM_API_KEY"] == key
    assert not (tmp_path / "pwned").exists()


def test_engine_container_gets_its_environment_through_the_api_not_a_file():
    # The container runtime writes no environment file (docker's --env-file would read each line
    # literally): docker_container gets a mapping, so a newline stays inside its one value, and the
    # file the host runtime reads holds the key alone.
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _serve
    params = _serve.container_params({"name": "e", "image": "i", "argv": ["vllm", "serve", "/m"], "model_path": "/m",
                                      "env": {"HCCL_IF_IP": "192.0.2.10", "X": "1\nLD_PRELOAD=/tmp/x.so"}})
    assert params["env"] == {"HCCL_IF_IP": "192.0.2.10", "X": "1\nLD_PRELOAD=/tmp/x.so"}
    text = render("serve", "engine.env.j2", **serve_vars("host", "sk-abc", {"HCCL_IF_IP": "192.0.2.10"}))
    assert "VLLM_API_KEY=sk-abc\n" in text and "HCCL_IF_IP" not in text


def test_env_file_parse_reads_what_env_quote_writes():
    values = {"A": "x y", "B": "it's", "C": "", "D": "line1\nline2", "E": "#not a comment"}
    text = "# header\n" + "".join("%s=%s\n" % (k, _quoting.env_quote(v)) for k, v in values.items())
    assert _quoting.env_file_parse(text) == values
