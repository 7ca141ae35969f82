# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The drop-in proof: llm_solution's own config.yaml (tests/fixtures/inventories), with only the
addresses, the device name, the model path and the image changed to the harness's, deployed through
`./deploy.sh deploy -i config.yaml` over SSH, as its users run it. It runs after test_container.py
has torn down that file's engine, on the same two nodes (Docker inside them, the engine image loaded).

What the file chooses by itself: backend_type MindFormers (the vllm_mindspore backend, started as
`vllm-mindspore serve`; the engine image answers to that name with a shim over the CPU build,
tests/images/build-engine-image.sh), the container runtime (image_name), llm_solution's data-parallel
layout (TP 4 per rank, as many ranks as the NPUs hold, --headless but on the head, expert parallel for a
model with experts: the tiny model has none),
`StrictHostKeyChecking=no` (validation warns and the run goes on), and no client CIDRs (only the
members reach the API). What the harness adds on the command line, for its 2-CPU, 6 GiB nodes and
nothing else: the engine's memory and length limits, the binding layout of two CPUs, the fake
topology's sysfs and a known_hosts file. The nodes keep one fake NPU each (dropin_fakes.yml), so the
layout is one rank of TP 1 per node.

Never asserts on generated text (random weights): status codes, token counts, finish reasons.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys

import pytest
import testinfra
import yaml

testinfra_hosts = ["ansible://ct-master1"]

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
ROOT = os.environ["MOLECULE_PROJECT_DIRECTORY"]
HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "dropin")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "inventories", "llm_solution_config.yaml")
NAMES = ["ct-master1", "ct-worker1"]
IMAGE_NAME, IMAGE_TAG = "aihost-llm-cluster/engine-vllm-cpu", "0.32.0"
CONTAINER = "openeuler_ds"
HEADER_ON_HEAD = "/root/.llmc-dropin-header"
# The harness's machine, not the operator's file.
HARNESS_VARS = {
    # vllm-cpu on 2 CPUs and 6 GiB: a short context, a small KV cache, no graph compilation,
    # float32 (its bfloat16 path dies with SIGILL on AMX hosts, docs/testing.md).
    "serve_max_model_len": 256,
    "serve_enforce_eager": True,
    "serve_extra_args": ["--dtype", "float32", "--kv-cache-memory-bytes", "33554432"],
    "serve_container_shm_size": "1g",
    # The binding on two CPUs, over the fake Atlas topology's sysfs.
    "prepare_affinity_layout": {"workqueue_cores": 0, "engine_cores": 1},
    "prepare_binding_sysfs_root": "/var/lib/llm-cluster-fakes",
}
# Sent by python3 on the head (the image has no curl): the header from a 0600 file, never in argv.
REQUEST = """
import json, sys, urllib.error, urllib.request
url, header, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
headers = {"Content-Type": "application/json"}
if header:
    with open(header) as handle:
        headers["Authorization"] = handle.read().strip()
body = json.dumps({"model": "tiny", "prompt": "The cluster", "max_tokens": tokens, "temperature": 0,
                   "ignore_eos": True}).encode()
try:
    with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers), timeout=120) as resp:
        print(json.dumps({"status": resp.status, "body": json.loads(resp.read())}))
except urllib.error.HTTPError as exc:
    print(json.dumps({"status": exc.code, "body": None}))
"""


@pytest.fixture(scope="module")
def nodes():
    return {name: testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY)) for name in NAMES}


@pytest.fixture(scope="module")
def addresses(nodes):
    return {name: node.check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0] for name, node in nodes.items()}


def run(argv, **kwargs):
    kwargs.setdefault("timeout", 300)
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False,
                          **kwargs)


def leaves(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, path + (key,))
    else:
        yield path, value


@pytest.fixture(scope="module")
def config(addresses):
    """The fixture's text with the harness's addresses, device, model path and image: nothing else."""
    with open(FIXTURE, encoding="utf-8") as handle:
        text = handle.read()
    for old, new in (("192.0.2.10", addresses["ct-master1"]), ("192.0.2.11", addresses["ct-worker1"]),
                     ("enp67s0f0np0", "eth0"), ("/path/to/model", "/srv/models/tiny"),
                     ("hub.oepkgs.net/oedeploy/openeuler/aarch64/mindspore", IMAGE_NAME),
                     ("image_tag: 20250717", 'image_tag: "%s"' % IMAGE_TAG)):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    os.makedirs(WORK, mode=0o700, exist_ok=True)
    path = os.path.join(WORK, "config.yaml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


@pytest.fixture(scope="module")
def ssh_access(nodes, addresses):
    """The controller's key in root's authorized_keys on each node, the nodes' host keys in a known_hosts."""
    key = os.path.join(WORK, "id_ed25519")
    if not os.path.exists(key):
        assert run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "llmc-dropin", "-f", key]).returncode == 0
    with open(key + ".pub", encoding="utf-8") as handle:
        public = handle.read().strip()
    for node in nodes.values():
        node.check_output("systemctl start ssh && install -d -m 0700 /root/.ssh && "
                          "{ grep -qxF '%s' /root/.ssh/authorized_keys 2>/dev/null || echo '%s' >> /root/.ssh/authorized_keys; } && "
                          "chmod 0600 /root/.ssh/authorized_keys" % (public, public))
    scan = run(["ssh-keyscan", "-T", "10", "-t", "ed25519"] + sorted(addresses.values()))
    known = [line for line in scan.stdout.splitlines() if line and not line.startswith("#")]
    assert len(known) == len(addresses), scan.stdout
    known_hosts = os.path.join(WORK, "known_hosts")
    with open(known_hosts, "w", encoding="utf-8") as handle:
        handle.write("\n".join(known) + "\n")
    return key, known_hosts


@pytest.fixture(scope="module")
def dropin(nodes, config, ssh_access):
    """One fake NPU per node, then ./deploy.sh deploy -i config.yaml with the harness's -e file."""
    fakes = run(["ansible-playbook", "-i", INVENTORY, os.path.join(HERE, "..", "dropin_fakes.yml")], timeout=600)
    assert fakes.returncode == 0, fakes.stdout[-3000:]
    key, known_hosts = ssh_access
    harness = os.path.join(WORK, "harness.yml")
    with open(harness, "w", encoding="utf-8") as handle:
        yaml.safe_dump(dict(HARNESS_VARS, ansible_ssh_extra_args="-o UserKnownHostsFile=%s" % known_hosts), handle)
    # An operator's shell: none of Molecule's settings (its inventory, Mitogen, its collection path).
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("ANSIBLE_", "MOLECULE_", "LLM_CLUSTER_"))}
    env.update(HOME=WORK, LLM_CLUSTER_VENV=sys.prefix, LLM_CLUSTER_ARTIFACTS=os.path.join(WORK, "artifacts"),
               ANSIBLE_PRIVATE_KEY_FILE=key)
    result = run([os.path.join(ROOT, "deploy.sh"), "deploy", "-i", config, "-e", "@" + harness], cwd=WORK, env=env,
                 timeout=1800)
    with open(os.path.join(WORK, "deploy.log"), "w", encoding="utf-8") as handle:
        handle.write(result.stdout)
    return result


def recap(output):
    return {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
            for m in re.finditer(r"^(\S+)\s+:\s+(ok=.*)$", output, re.M)}


def inspect(node, name):
    result = node.run("docker inspect %s" % name)
    return json.loads(result.stdout)[0] if result.rc == 0 else None


def head_request(nodes, addresses, tokens, with_key):
    url = "http://%s:8000/v1/completions" % addresses["ct-master1"]
    script = base64.b64encode(REQUEST.encode()).decode()
    out = nodes["ct-master1"].check_output("echo %s | base64 -d | python3 - %s '%s' %d" % (
        script, url, HEADER_ON_HEAD if with_key else "", tokens))
    return json.loads(out)


def test_only_the_addresses_device_model_path_and_image_differ_from_llm_solution_s_file(config):
    with open(FIXTURE, encoding="utf-8") as handle:
        before = dict(leaves(yaml.safe_load(handle)))
    with open(config, encoding="utf-8") as handle:
        after = dict(leaves(yaml.safe_load(handle)))
    assert set(before) == set(after)
    changed = sorted(path[-1] for path in before if before[path] != after[path])
    assert changed == ["ansible_host", "ansible_host", "image_name", "image_tag", "model_path", "ray_device"]


def test_deploy_sh_deploys_it_with_a_warning_about_host_keys(dropin):
    out = " ".join(dropin.stdout.split())
    assert dropin.returncode == 0, dropin.stdout[-5000:]
    assert ("ansible_ssh_common_args turns SSH host key checking off with 'StrictHostKeyChecking=no' for master1, "
            "worker1") in out, out[-5000:]
    hosts = recap(dropin.stdout)
    assert set(hosts) == {"master1", "worker1"}, dropin.stdout[-3000:]
    assert all(h["failed"] == 0 and h["unreachable"] == 0 for h in hosts.values()), hosts


def test_the_engines_run_the_mindformers_data_parallel_lines_in_containers(dropin, nodes):
    head, worker = inspect(nodes["ct-master1"], CONTAINER), inspect(nodes["ct-worker1"], CONTAINER)
    for container in (head, worker):
        assert container is not None and container["State"]["Running"] is True
        assert container["Config"]["Image"] == "%s:%s" % (IMAGE_NAME, IMAGE_TAG)
        assert container["Config"]["Entrypoint"] == ["vllm-mindspore"]
        assert container["Config"]["Cmd"][:2] == ["serve", "/srv/models/tiny"]
        assert "vLLM_MODEL_BACKEND=MindFormers" in container["Config"]["Env"]
        args = container["Config"]["Cmd"]
        assert args[args.index("--data-parallel-size") + 1] == "2"
        assert args[args.index("--data-parallel-size-local") + 1] == "1"
        assert args[args.index("--data-parallel-rpc-port") + 1] == "12570"
        # llm_solution's layout asks for expert parallel; the tiny model is dense, which vLLM refuses with it.
        assert "--enable-expert-parallel" not in args
        assert container["RestartCount"] == 0
        devices = sorted(d["PathOnHost"] for d in container["HostConfig"]["Devices"])
        assert "/dev/davinci0" in devices and "/dev/davinci1" not in devices
    assert "--headless" in worker["Config"]["Cmd"] and "--headless" not in head["Config"]["Cmd"]


def test_a_completion_through_the_head_with_the_key(dropin, nodes, addresses):
    header = os.path.join(WORK, "header")
    with open(os.path.join(WORK, "credentials", "serve_api_key"), encoding="utf-8") as handle:
        key = handle.read().strip()
    fd = os.open(header, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("Bearer %s\n" % key)
    # docker cp: the key in no command line, on the controller or the node.
    assert run(["docker", "cp", header, "ct-master1:" + HEADER_ON_HEAD]).returncode == 0
    answer = head_request(nodes, addresses, 8, True)
    assert answer["status"] == 200, answer
    assert answer["body"]["usage"]["completion_tokens"] == 8
    assert answer["body"]["choices"][0]["finish_reason"] == "length"
    assert head_request(nodes, addresses, 8, False)["status"] == 401


def test_the_api_refuses_the_controller_which_is_no_member(dropin, nodes, addresses):
    # No llm_cluster_client_cidrs in llm_solution's file: only the members reach the API port. The head, a
    # member, gets an answer on it at the same moment (401 without the key): the port is open, not absent.
    assert head_request(nodes, addresses, 1, False)["status"] == 401
    with pytest.raises(OSError):
        socket.create_connection((addresses["ct-master1"], 8000), timeout=5).close()
