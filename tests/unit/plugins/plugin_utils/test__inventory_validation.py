# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._inventory_validation import host_key_checking_off, validate, verdict

GOOD = {
    "head_group": "masters",
    "worker_group": "workers",
    "groups": {"masters": ["master1"], "workers": ["worker1", "worker2"]},
    "node_num": 3,
    "ports": {"ray_port": 6379, "llm_port": 8000, "dp_port": 12570},
    "backend_type": "MindFormers",
    "model_type": "safetensors",
    "model_path": "/data/models/DeepSeek-R1",
    "interface_var": "ray_device",
    "interfaces": {"master1": "enp67s0f0np0", "worker1": "enp67s0f0np0", "worker2": "auto"},
    "cidrs": {"npu_network_cidr": "10.10.0.0/16", "llm_cluster_client_cidrs": []},
    "booleans": {"prepare_require_cann": True},
    "flags": {"is_stop_other_container": 0},
    "addresses": {"master1": "192.0.2.1", "worker1": "192.0.2.2", "worker2": "192.0.2.3"},
    "container": {"image_name": "hub.oepkgs.net/oedeploy/openeuler/aarch64/mindspore", "image_tag": 20250717,
                  "container_name": "openeuler_ds"},
}


def spec_with(**changes):
    spec = copy.deepcopy(GOOD)
    for key, value in changes.items():
        spec[key] = value
    return spec


def test_good_spec_has_no_errors():
    assert validate(GOOD) == []


def test_single_node_without_workers_group():
    spec = spec_with(groups={"masters": ["master1"]}, node_num="1", interfaces={"master1": "eth0"},
                     addresses={"master1": "192.0.2.1"})
    assert validate(spec) == []


@pytest.mark.parametrize("changes, expected", [
    ({"node_num": True}, "node_num = True (boolean): must be a positive integer; set node_num: 3"),
    ({"node_num": 0}, "node_num = 0 (integer): must be a positive integer"),
    ({"ports": {"ray_port": "6379", "llm_port": 0, "dp_port": 12570}}, "llm_port = 0 (integer): a port must be"),
    ({"ports": {"ray_port": 6379, "llm_port": "6379", "dp_port": 1}}, "ray_port = 6379 clashes with llm_port = 6379"),
    ({"ports": {"ray_port": 6379.5, "llm_port": 8000, "dp_port": 1}}, "ray_port = 6379.5 (number)"),
    ({"model_path": "/"}, "model_path = '/' is the root directory"),
    ({"model_path": "/data/../etc"}, "model_path = '/data/../etc' contains '..': write the normalised path /etc."),
    ({"model_path": ""}, "model_path = '': set model_path to the absolute directory"),
    ({"interfaces": {"master1": "eth0", "worker1": "eth0", "worker2": "a-very-long-interface-name"}},
     "ray_device = 'a-very-long-interface-name' on host worker2 is not a network interface name"),
    ({"cidrs": {"npu_network_cidr": "10.10.0.0"}}, "npu_network_cidr = '10.10.0.0' is not a CIDR"),
    ({"cidrs": {"llm_cluster_client_cidrs": ["192.168.0.0/16", "banana/8"]}},
     "llm_cluster_client_cidrs = 'banana/8' is not a CIDR"),
    ({"booleans": {"prepare_require_cann": 1}}, "prepare_require_cann = 1 (integer) must be a YAML boolean"),
    ({"flags": {"is_stop_other_container": 2}}, "is_stop_other_container = 2 (integer) must be 0 or 1"),
    ({"container": {"container_name": "-bad"}}, "container_name = '-bad' is not a valid container name"),
    ({"container": {"serve_container_name": "engine\n"}}, "serve_container_name = 'engine\\n' is not a valid container name"),
    ({"container": {"image_tag": "a b"}}, "image_tag = 'a b' is not a valid image tag"),
])
def test_each_problem_names_variable_value_and_fix(changes, expected):
    errors = validate(spec_with(**changes))
    assert len(errors) == 1, errors
    assert expected in errors[0]


WATCHDOG = {"serve_watchdog": True, "serve_watchdog_interval": 30, "serve_watchdog_timeout": 60,
            "serve_watchdog_failures": 3, "serve_watchdog_start_grace": 0, "serve_watchdog_max_restarts": 3,
            "serve_watchdog_window": 3600}


@pytest.mark.parametrize("changes, expected", [
    ({"serve_watchdog_interval": "30s"}, "serve_watchdog_interval = '30s' must be a whole number from 5 to 86400 "
     "(seconds between two checks), e.g. serve_watchdog_interval: 30."),
    ({"serve_watchdog_interval": 1}, "serve_watchdog_interval = 1 (integer) must be a whole number from 5"),
    ({"serve_watchdog_failures": True}, "serve_watchdog_failures = True (boolean) must be a whole number from 1 to 100"),
    ({"serve_watchdog_failures": 0}, "serve_watchdog_failures = 0 (integer) must be a whole number from 1"),
    ({"serve_watchdog_timeout": -5}, "serve_watchdog_timeout = -5 (integer) must be a whole number from 1 to 3600"),
    ({"serve_watchdog_timeout": 2.5}, "serve_watchdog_timeout = 2.5 (number) must be a whole number"),
    ({"serve_watchdog_start_grace": "$(reboot)"}, "serve_watchdog_start_grace = '$(reboot)' must be a whole number"),
    ({"serve_watchdog_max_restarts": 10 ** 30}, "serve_watchdog_max_restarts = "),
    ({"serve_watchdog_window": [3600]}, "serve_watchdog_window = [3600] (list) must be a whole number from 60"),
    ({"serve_watchdog_window": 60, "serve_watchdog_interval": 30},
     "serve_watchdog_window = 60 is shorter than one count of failures (serve_watchdog_interval 30 x "
     "serve_watchdog_failures 3 = 90 s), so the restart limit could never hold: set serve_watchdog_window to at least 90."),
])
def test_each_bad_watchdog_setting_is_named_with_its_range(changes, expected):
    errors = validate(spec_with(watchdog=dict(WATCHDOG, **changes)))
    assert len(errors) == 1, errors
    assert expected in errors[0]


def test_the_watchdog_s_settings_are_not_read_when_it_is_off():
    assert validate(spec_with(watchdog=dict(WATCHDOG, serve_watchdog=False, serve_watchdog_interval="x"))) == []
    assert validate(spec_with(watchdog=WATCHDOG)) == []


@pytest.mark.parametrize("changes, expected", [
    ({"llm_cluster_fetch_retries": -1}, "llm_cluster_fetch_retries = -1 (integer) must be a whole number from 0 to 20 "
     "(tries after the first of each package, wheel, image, hub or rsync fetch), e.g. llm_cluster_fetch_retries: 3."),
    ({"llm_cluster_fetch_retries": "3 || reboot"}, "llm_cluster_fetch_retries = '3 || reboot' must be a whole number"),
    ({"llm_cluster_fetch_delay": 86400}, "llm_cluster_fetch_delay = 86400 (integer) must be a whole number from 0 to 600"),
    ({"llm_cluster_fetch_delay": 1.5}, "llm_cluster_fetch_delay = 1.5 (number) must be a whole number"),
])
def test_each_bad_fetch_retry_setting_is_named_with_its_range(changes, expected):
    errors = validate(spec_with(fetch=dict({"llm_cluster_fetch_retries": 3, "llm_cluster_fetch_delay": 10}, **changes)))
    assert len(errors) == 1, errors
    assert expected in errors[0]


@pytest.mark.parametrize("environment, expected", [
    ({"HF_TOKEN": "hf_abc"}, "model_distribution_hub_environment.HF_TOKEN: a secret does not go in an environment; "
     "give it to model_distribution_hub_token"),
    ({"MODELSCOPE_API_TOKEN": "x"}, "model_distribution_hub_environment.MODELSCOPE_API_TOKEN: a secret"),
    ({"HF ENDPOINT": "x"}, "model_distribution_hub_environment has the key 'HF ENDPOINT'"),
])
def test_the_hub_s_environment_takes_names_and_no_secret(environment, expected):
    errors = validate(spec_with(env_maps={"model_distribution_hub_environment": environment}))
    assert len(errors) == 1 and expected in errors[0], errors
    mirror = {"HF_ENDPOINT": "https://hf-mirror.example", "HTTPS_PROXY": "http://10.0.0.9:3128"}
    assert validate(spec_with(env_maps={"model_distribution_hub_environment": mirror})) == []


def test_fetch_retry_settings_in_range_pass():
    assert validate(spec_with(fetch={"llm_cluster_fetch_retries": 0, "llm_cluster_fetch_delay": "600"})) == []
    assert validate(spec_with(fetch={})) == []


def test_all_problems_reported_at_once():
    spec = spec_with(node_num=5, backend_type="x", model_type="y", model_path="rel",
                     ports={"ray_port": 1, "llm_port": 1, "dp_port": 99999})
    errors = validate(spec)
    assert len(errors) == 6, errors


def test_missing_groups_are_reported_not_raised():
    errors = validate(spec_with(groups={}, node_num=1, interfaces={}, addresses={}))
    assert any("group 'masters' has 0 hosts" in e for e in errors)
    assert any("node_num = 1 but the inventory has 0 host(s)" in e for e in errors)


@given(st.integers(min_value=1, max_value=64))
def test_node_num_must_match_host_count(count):
    workers = ["worker%d" % i for i in range(1, count)]
    hosts = ["master1"] + workers
    spec = spec_with(groups={"masters": ["master1"], "workers": workers}, node_num=count,
                     interfaces={h: "eth0" for h in hosts}, addresses={h: "10.0.%d.%d" % (i // 250, i % 250)
                                                                       for i, h in enumerate(hosts)})
    assert validate(spec) == []
    spec["node_num"] = count + 1
    assert len(validate(spec)) == 1


# --- Hostile values: a verdict naming the variable, never a traceback -------------------------------------------

HUGE = 10 ** 5000 - 1


@pytest.mark.parametrize("changes, expected", [
    ({"node_num": "\u00b2"}, "node_num = '\u00b2': must be a positive integer; set node_num: 3"),
    ({"node_num": HUGE}, "node_num = an integer of 5000 digits: must be a positive integer"),
    ({"node_num": "9" * 5000}, "node_num = '99999"),
    ({"ports": {"ray_port": HUGE, "llm_port": 8000, "dp_port": 12570}}, "ray_port = an integer of 5000 digits"),
    ({"ports": {"ray_port": "\u0666\u0663\u0667\u0669", "llm_port": 8000, "dp_port": 12570}},
     "ray_port = '\u0666\u0663\u0667\u0669': a port must be an integer"),
    ({"addresses": {"master1": ["192.0.2.1"], "worker1": "192.0.2.2", "worker2": "192.0.2.3"}},
     "ansible_host = ['192.0.2.1'] (list) on host master1 is not an address"),
    ({"addresses": {"master1": "192.0.2.1", "worker1": "192.0.2.2\n-oProxyCommand=x", "worker2": "192.0.2.3"}},
     "ansible_host = '192.0.2.2\\n-oProxyCommand=x' on host worker1 contains a newline"),
    ({"model_path": "/data/my model"}, "model_path = '/data/my model' contains a space"),
    ({"model_path": "/data/m\nExecStartPre=/bin/sh"}, "contains a newline"),
    ({"model_path": "/data/$(reboot)\t"}, "contains a tab"),
    ({"model_path": "//"}, "model_path = '//' is the root directory"),
    ({"model_path": "//data/m"}, "model_path = '//data/m' is the root directory"),
    ({"model_path": "/data/m/"}, "model_path = '/data/m/' is not a normalised path: write /data/m"),
    ({"model_path": "/data/./m"}, "is not a normalised path: write /data/m"),
    ({"model_path": "/data/\u202em"}, "contains the character \\u202e"),
    ({"paths": {"prepare_env_dir": "/etc/llm cluster"}}, "prepare_env_dir = '/etc/llm cluster' contains a space"),
    ({"interfaces": {"master1": "eth0\n", "worker1": "eth0", "worker2": "eth0"}},
     "ray_device = 'eth0\\n' on host master1 is not a network interface name"),
    ({"container": {"container_name": "ds\n"}}, "container_name = 'ds\\n' is not a valid container name"),
    ({"container": {"image_tag": "v1\n"}}, "image_tag = 'v1\\n' is not a valid image tag"),
    ({"container": {"image_tag": 1.1}}, "image_tag = 1.1 (number): YAML read the tag as a number, so a tag such as 1.10"),
    ({"container": {"image_tag": True}}, "image_tag = True (boolean) is not a valid image tag: quote the tag"),
    ({"container": {"image_name": "hub.example/My Image"}}, "image_name = 'hub.example/My Image' is not an image repository"),
    ({"ports": {"ray_port": 6379, "llm_port": 20010, "dp_port": 12570},
      "port_ranges": {"ray_cluster_worker_port_min/ray_cluster_worker_port_max": [20000, 20999]}},
     "llm_port = 20010 lies inside ray_cluster_worker_port_min/ray_cluster_worker_port_max (20000-20999)"),
    ({"cluster_ports": {"ray_cluster_node_manager_port": 12570}},
     "ray_cluster_node_manager_port = 12570 clashes with dp_port = 12570"),
    ({"cluster_ports": {"model_distribution_rsync_port": 8000}}, "model_distribution_rsync_port = 8000 clashes with llm_port"),
    ({"cidr_lists": {"llm_cluster_client_cidrs": "10.0.0.0/8"}},
     "llm_cluster_client_cidrs = '10.0.0.0/8' must be a list of CIDRs: write llm_cluster_client_cidrs: [10.0.0.0/8]"),
    ({"cidr_lists": {"llm_cluster_client_cidrs": ["2001:db8::/32"]}},
     "llm_cluster_client_cidrs = '2001:db8::/32' is an IPv6 network"),
    ({"cidr_lists": {"llm_cluster_client_cidrs": ["10.0.0.1/8"]}}, "has host bits set: did you mean 10.0.0.0/8?"),
    ({"groups": {"masters": ["master1"], "workers": ["Master1", "worker2"]},
      "interfaces": {"master1": "eth0", "Master1": "eth0", "worker2": "eth0"},
      "addresses": {"master1": "192.0.2.1", "Master1": "192.0.2.7", "worker2": "192.0.2.3"}},
     "hosts master1, Master1 differ only in case"),
    ({"addresses": {"master1": "2001:db8::1", "worker1": "2001:DB8:0:0::1", "worker2": "192.0.2.3"}},
     "hosts master1, worker1 have ansible_host '2001:DB8:0:0::1', '2001:db8::1', which are one address written"),
    ({"addresses": {"master1": "Node1.example.", "worker1": "node1.example", "worker2": "192.0.2.3"}},
     "which are one address written differently"),
    ({"env_maps": {"prepare_env_extra": {"A B": "1"}}}, "prepare_env_extra has the key 'A B': environment variable names"),
    ({"accounts": {"llm_cluster_user": "llm\nExecStartPre=/bin/sh"}},
     "llm_cluster_user = 'llm\\nExecStartPre=/bin/sh' is not a user name"),
    ({"accounts": {"llm_cluster_user": "Admin"}}, "llm_cluster_user = 'Admin' is not a user name"),
    ({"accounts": {"llm_cluster_user": "x" * 33}}, "is not a user name: use lowercase letters"),
    ({"accounts": {"llm_cluster_user": ["root"]}}, "llm_cluster_user = ['root'] (list) is not a user name"),
    ({"accounts": {"llm_cluster_user": ""}}, "or root to run Ray and the engine as root"),
    ({"tls": {"serve_tls_names": "api.example.com"}}, "serve_tls_names = 'api.example.com' must be a list"),
    ({"tls": {"serve_tls_names": ["api.example.com", "bad name"]}},
     "serve_tls_names has 'bad name', which is neither a DNS name nor an IP address"),
    ({"tls": {"serve_tls_names": ["api.example.com\nDNS:evil.example"]}}, "which is neither a DNS name nor an IP address"),
    ({"tls": {"serve_tls_names": ["-api.example.com"]}}, "which is neither a DNS name nor an IP address"),
    ({"tls": {"serve_tls_names": ["10.0.0.256"]}}, "which is neither a DNS name nor an IP address"),
    ({"tls": {"serve_tls_names": [8000]}}, "serve_tls_names has 8000"),
    ({"tls": {"serve_tls_cert_file": "/etc/site/api.crt"}}, "set both (the site certificate and its key"),
    ({"tls": {"serve_tls_key_file": "/etc/site/api.key\n"}}, "serve_tls_key_file = '/etc/site/api.key\\n' contains a control"),
])
def test_hostile_value_is_reported_with_variable_and_fix(changes, expected):
    errors = validate(spec_with(**changes))
    assert any(expected in e for e in errors), errors


def test_a_crashing_value_does_not_hide_the_other_errors():
    spec = spec_with(node_num="\u00b2", model_path="rel", backend_type=["x"],
                     addresses={"master1": ["a"], "worker1": {"b": 1}, "worker2": None})
    errors = validate(spec)
    assert any(e.startswith("node_num = '\u00b2'") for e in errors)
    assert any(e.startswith("model_path = 'rel' is relative") for e in errors)
    assert any(e.startswith("backend_type = ['x'] (list) is not supported") for e in errors)
    assert any("on host worker1 is not an address" in e for e in errors)


def test_warnings_are_separate_from_errors():
    spec = spec_with(all_hosts=["bastion", "master1", "worker1", "worker2", "mon1"],
                     cleartext_secrets={"master1": ["ansible_password"]},
                     variables={"every node": ["model_weight_path"]},
                     known_variables=["model_path", "model_type", "ray_port"])
    result = verdict(spec)
    assert result["errors"] == []
    assert len(result["warnings"]) == 3, result
    assert any("bastion, mon1 are in neither 'masters' nor 'workers'" in w for w in result["warnings"])
    assert any("ansible_password is set in clear text for master1" in w and "Vault" in w for w in result["warnings"])
    assert any("model_weight_path (every node) is not a variable this collection knows: did you mean model_path?" in w
               for w in result["warnings"])


def test_play_hosts_outside_the_named_groups_fail():
    spec = spec_with(head_group="heads", worker_group="workers", play_hosts=["master1", "worker1", "worker2"],
                     groups={"heads": ["master1"], "workers": ["worker1"]})
    errors = validate(spec)
    assert any(e.startswith("host(s) worker2 run this play but are in neither 'heads' nor 'workers'")
               and "llm_cluster_head_group" in e for e in errors), errors
    assert validate(spec_with(play_hosts=["master1", "worker1", "worker2"])) == []


@pytest.mark.parametrize("changes, message", [
    ({"head_group": ["masters"]}, "llm_cluster_head_group (or a role's own *_head_group) = ['masters']: must be the name"),
    ({"worker_group": "work-ers"}, "llm_cluster_worker_group (or a role's own *_worker_group) = 'work-ers': must be the name"),
    ({"worker_group": 7}, "llm_cluster_worker_group (or a role's own *_worker_group) = 7: must be the name"),
    ({"head_group": "workers"}, "llm_cluster_head_group and llm_cluster_worker_group are both 'workers'"),
])
def test_group_names_that_are_no_group_names_fail_alone(changes, message):
    errors = validate(spec_with(**changes))
    assert errors and errors[0].startswith(message), errors
    # node_num is not compared with the members of groups that could not be read.
    assert not any(e.startswith("node_num") for e in errors), errors


def test_good_spec_with_real_cluster_ports_passes():
    spec = spec_with(cluster_ports={"ray_cluster_node_manager_port": 6380, "model_distribution_rsync_port": 8730},
                     port_ranges={"ray_cluster_worker_port_min/ray_cluster_worker_port_max": [20000, 20999]},
                     cidr_lists={"llm_cluster_client_cidrs": ["10.0.0.0/8"]},
                     addresses={"master1": "2001:db8::1", "worker1": "2001:db8::2", "worker2": "192.0.2.3"})
    assert validate(spec) == []


@pytest.mark.parametrize("spec", [None, [], "masters", 5, {"groups": "masters"}, {"groups": {"masters": "m1"}},
                                  {"head_group": ["x"], "groups": {}}])
def test_any_shape_gets_a_verdict(spec):
    result = verdict(spec)
    assert result["errors"], result


YAML_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
                | st.integers(0, 2).map(lambda k: (HUGE, -HUGE, 2 ** 64)[k])
                | st.sampled_from(["9" * 5000, "\u00b2", "//", "/", "0", "1.10", "auto",
                                   "fe80::/10", "10.0.0.0/8", "\n", "$(id)", "\u202e", "eth0"]))
YAML_VALUES = st.recursive(YAML_SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=4), max_leaves=8)
SPEC_KEYS = sorted(GOOD) + ["all_hosts", "play_hosts", "cluster_ports", "port_ranges", "paths", "cidr_lists", "env_maps", "accounts", "tls",
                            "cleartext_secrets", "host_key_checking_off", "variables", "known_variables"]


@settings(deadline=None, max_examples=300)
@given(st.dictionaries(st.sampled_from(SPEC_KEYS), YAML_VALUES))
def test_arbitrary_yaml_shaped_values_get_a_verdict(changes):
    result = verdict(spec_with(**changes))
    assert isinstance(result["errors"], list) and isinstance(result["warnings"], list)
    assert all(isinstance(m, str) and m for m in result["errors"] + result["warnings"])
    # Each check reads hostile values itself; the safety net around the checks is never needed.
    assert not any("could not be checked" in m for m in result["errors"]), result


@settings(deadline=None)
@given(YAML_VALUES)
def test_arbitrary_whole_inventory_gets_a_verdict(value):
    result = verdict(value)
    assert all(isinstance(m, str) for m in result["errors"])
    if not isinstance(value, dict):
        assert result["errors"]


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(["node_num", "model_path", "backend_type", "model_type"]), YAML_SCALARS,
                       min_size=1))
def test_every_bad_scalar_names_its_variable(changes):
    spec = spec_with(**changes)
    errors = validate(spec)
    for name, value in changes.items():
        if validate(spec_with(**{name: value})):
            assert any(e.startswith(name + " = ") for e in errors), (name, errors)


@pytest.mark.parametrize("image, tag", [
    # Image references in the form MindIE and vllm-ascend use for their Atlas 300I Duo (310P) builds.
    ("swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie", "2.0.RC1-300I-Duo-py311-openeuler24.03-lts"),
    ("quay.io/ascend/vllm-ascend", "v0.9.1-310p"),
    ("hub.oepkgs.net/oedeploy/openeuler/aarch64/mindspore", 20250717),
    ("localhost:5000/llm/vllm", "latest"),
])
def test_published_images_and_tags_are_recognised(image, tag):
    assert validate(spec_with(container={"image_name": image, "image_tag": tag, "container_name": "openeuler_ds"})) == []


def test_tls_names_and_a_site_certificate_pair_pass():
    assert validate(spec_with(tls={"serve_tls_names": ["api.example.com", "llm-1.internal.", "192.0.2.10", "2001:db8::1"],
                                   "serve_tls_cert_file": "/etc/site/api chain.pem", "serve_tls_key_file": "/etc/site/api.key"})) == []


@pytest.mark.parametrize("value, expected", [
    # llm_solution's config.yaml, as shipped.
    ("-o StrictHostKeyChecking=no", ["StrictHostKeyChecking=no"]),
    ("-oStrictHostKeyChecking=off -o 'UserKnownHostsFile /dev/null'", ["StrictHostKeyChecking=off", "UserKnownHostsFile=/dev/null"]),
    ('-o "stricthostkeychecking = No" -o ProxyJump=bastion', ["StrictHostKeyChecking=No"]),
    ("-o UserKnownHostsFile='~/.ssh/a /dev/null'", ["UserKnownHostsFile=~/.ssh/a /dev/null"]),
    # Checking stays on: new keys accepted, changed ones refused; or nothing about keys at all.
    ("-o StrictHostKeyChecking=accept-new", []),
    ("-o ControlMaster=auto -o ControlPersist=60s -o ConnectTimeout=30", []),
    ("-o UserKnownHostsFile=/etc/ssh/cluster_known_hosts", []),
    # Not an ssh option: a value, a dangling -o, unbalanced quotes, not a string.
    ("StrictHostKeyChecking=no", []),
    ("-o", []),
    ("-o 'StrictHostKeyChecking=no", ["StrictHostKeyChecking=no"]),
    (None, []), (["-o", "StrictHostKeyChecking=no"], []), (0, []),
])
def test_ssh_options_that_switch_host_key_checking_off(value, expected):
    assert host_key_checking_off(value) == expected


def test_host_key_checking_off_is_a_warning_naming_the_variable_the_hosts_and_the_fix():
    found = verdict(spec_with(host_key_checking_off={
        "ansible_ssh_common_args": {"StrictHostKeyChecking=no": ["master1", "worker1", "worker2"]}}))
    assert found["errors"] == []
    assert found["warnings"] == [
        "ansible_ssh_common_args turns SSH host key checking off with 'StrictHostKeyChecking=no' for master1, worker1, "
        "worker2: a node's changed key would go unnoticed. Remove the option and collect the nodes' keys once "
        "(ssh-keyscan -H <address> >> ~/.ssh/known_hosts, after checking their fingerprints)."]


MONITORING = {"standalone": False, "group": "monitoring", "hosts": ["mon1"], "thresholds": {"kv_cache_ratio": -1},
              "engine": "tgi", "monitoring_npu_exporter_src": "/nonexistent/npu-exporter", "monitoring_dcgm_exporter_src": ""}


def test_monitoring_inputs_are_checked_only_when_the_step_runs(tmp_path):
    assert validate(spec_with(monitoring=MONITORING)) == []
    errors = validate(spec_with(monitoring=MONITORING, booleans={"llm_cluster_monitoring": True}))
    assert [e.split(" ")[0] for e in errors] == ["monitoring", "monitoring_alert_thresholds.kv_cache_ratio",
                                                 "monitoring_engine", "monitoring_npu_exporter_src"], errors
    binary = tmp_path / "npu-exporter"
    binary.write_text("#!/bin/sh\n")
    good = dict(MONITORING, standalone=True, hosts=["master1"], thresholds={}, engine="auto",
                monitoring_npu_exporter_src=str(binary))
    assert validate(spec_with(monitoring=good)) == []
