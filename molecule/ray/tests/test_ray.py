# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The Ray cluster's life, in order: formed, closed to non-members, token-guarded, unchanged, self-healing,
restarted in order, explained, kept closed through nftables reloads, removed.

The tests run once (on ray-master1) and drive the other nodes through testinfra hosts and ansible-playbook
runs against Molecule's inventory, so they depend on the order they are written in.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest
import testinfra

testinfra_hosts = ["ansible://ray-master1"]

SCENARIO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
ARTIFACTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "artifacts")
NAMES = ["ray-master1", "ray-worker1", "ray-worker2"]
PY = "/opt/llm_cluster/ray/bin/python"
UNIT = {"ray-master1": "llm-cluster-ray-head", "ray-worker1": "llm-cluster-ray-worker", "ray-worker2": "llm-cluster-ray-worker"}
AUTH_ENV = "/etc/llm_cluster/ray-auth.env"
TOKEN = "/etc/llm_cluster/ray-auth-token"
COLLECTIONS = os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep)[0]
# The perimeter checks the scenarios share (molecule/shared/perimeter.py).
_SPEC = importlib.util.spec_from_file_location("perimeter", os.path.join(os.path.dirname(SCENARIO), "shared", "perimeter.py"))
perimeter = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(perimeter)
# The node replacement the scenarios share (molecule/shared/replace.py).
_SPEC = importlib.util.spec_from_file_location("replace", os.path.join(os.path.dirname(SCENARIO), "shared", "replace.py"))
replace = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(replace)
# A node's boot as systemd saw it (molecule/shared/boot.py), shared with the container scenario's reboot test.
_SPEC = importlib.util.spec_from_file_location("boot", os.path.join(os.path.dirname(SCENARIO), "shared", "boot.py"))
boot = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(boot)

# The snippets print their answer on a line of its own after MARK: Ray's driver prints the cluster's own
# messages on standard output too, even after that line (a raylet just killed: "The node ... has been marked
# dead ... (2) raylet has lagging heartbeats due to slow network or busy workload.").
MARK = "llm_cluster-result: "
READ = r'''
import json, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
alive = [n for n in ray.nodes() if n["Alive"]]
print("llm_cluster-result: " + json.dumps({"alive": sorted(n["NodeManagerAddress"] for n in alive),
                                           "npu": ray.cluster_resources().get("NPU", 0)}))
'''
# Three tasks that each need all 8 NPU of a node, overlapping in time: one runs on every node.
SPREAD = r'''
import json, socket, sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
@ray.remote(num_cpus=0, resources={"NPU": 8})
def where():
    time.sleep(2)
    return socket.gethostname()
print("llm_cluster-result: " + json.dumps(sorted(ray.get([where.remote() for _ in range(3)], timeout=120))))
'''


@pytest.fixture(scope="module")
def nodes():
    return {name: testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY)) for name in NAMES}


@pytest.fixture(scope="module")
def addresses(nodes):
    return {name: node.check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0] for name, node in nodes.items()}


def python(node, code, *args):
    """Run code under Ray's Python on a node, with the cluster token settings the node's Ray units use, as the
    account Ray runs as (a driver run as root could leave root's directories in Ray's session)."""
    return node.run("set -a; . %s; set +a; runuser -u llm-cluster -- %s - %s <<'EOF'\n%s\nEOF"
                    % (AUTH_ENV, PY, " ".join(args), code))


def answer(out):
    """The JSON a snippet printed after MARK (the last such line), whatever Ray printed around it."""
    lines = [line[len(MARK):] for line in out.stdout.splitlines() if line.startswith(MARK)]
    assert lines, (out.stdout[-2000:], out.stderr[-2000:])
    return json.loads(lines[-1])


def cluster(nodes, addresses, port=6379, want=3, wait=60):
    """Alive node addresses and NPU total seen from ray-master1, waiting up to `wait` s for `want` nodes."""
    deadline, last = time.time() + wait, None
    while time.time() < deadline:
        out = python(nodes["ray-master1"], READ, "%s:%d" % (addresses["ray-master1"], port))
        if out.rc == 0:
            last = answer(out)
            if len(last["alive"]) == want:
                break
        time.sleep(2)
    return last


def unit(node, name):
    props = node.check_output("systemctl show %s -p MainPID -p ActiveState -p ActiveEnterTimestampMonotonic -p NRestarts" % name)
    return dict(line.split("=", 1) for line in props.splitlines())


def pids(nodes):
    return {name: unit(node, UNIT[name])["MainPID"] for name, node in nodes.items()}


def playbook(path, *extra):
    return replace.playbook(INVENTORY, path, *extra)


def ray_step(*extra):
    return playbook(os.path.join(SCENARIO, "ray.yml"), *extra)


def settled(node, *names, wait=120):
    """ActiveState of each unit once systemd has no job left (a propagated restart or reload is a job too)."""
    deadline = time.time() + wait
    while node.check_output("systemctl list-jobs --no-legend") and time.time() < deadline:
        time.sleep(1)
    return [node.check_output("systemctl show -p ActiveState --value %s" % name) for name in names]


def perimeter_state(node, ray_unit):
    guard, ray = settled(node, "llm-cluster-firewall", ray_unit)
    table = node.run("nft list table inet llm_cluster").rc == 0
    ray_processes = node.run("pgrep -f '[/]opt/llm_cluster/ray/'").rc == 0
    return {"guard": guard, "ray": ray, "table": table, "ray_processes": ray_processes}


def never_open(state):
    """The table is loaded, or nothing of Ray runs."""
    return state["table"] or (state["ray"] == "inactive" and not state["ray_processes"])


# One ray.init, as a member's driver or a ray:// client would; prints the alive nodes.
CONNECT = r'''
import sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
print("ALIVE", sum(1 for n in ray.nodes() if n["Alive"]))
'''


def test_cluster_has_3_nodes_and_24_npu(nodes, addresses):
    seen = cluster(nodes, addresses)
    assert seen == {"alive": sorted(addresses.values()), "npu": 24.0}


def test_a_task_runs_on_every_node(nodes, addresses):
    out = python(nodes["ray-master1"], SPREAD, "%s:6379" % addresses["ray-master1"])
    assert out.rc == 0, out.stderr
    assert answer(out) == NAMES


def test_units_enabled_and_pinned(nodes, addresses):
    for name, node in nodes.items():
        svc = node.service(UNIT[name])
        assert svc.is_running and svc.is_enabled, name
        text = node.file("/etc/systemd/system/%s.service" % UNIT[name]).content_string
        assert "--node-ip-address=%s " % addresses[name] in text
        assert "'--resources={\"NPU\": 8}'" in text
        assert "--min-worker-port=20000" in text and "--max-worker-port=20999" in text
    head = nodes["ray-master1"].file("/etc/systemd/system/llm-cluster-ray-head.service").content_string
    assert "--include-dashboard=false" in head


def test_ray_runs_as_the_cluster_account_not_root(nodes):
    for name, node in nodes.items():
        # Every process of Ray (raylet, GCS, agents, workers) belongs to the system account, none to root.
        owners = node.check_output("ps -eo user:32,args | awk '/[/]opt[/]llm_cluster[/]ray[/]/ {print $1}' | sort -u")
        assert owners.split() == ["llm-cluster"], (name, owners)
        assert node.check_output("getent passwd llm-cluster").split(":")[6] == "/usr/sbin/nologin"
        token = node.file(TOKEN)
        assert (token.user, token.group, token.mode) == ("root", "llm-cluster", 0o640)
        temp = node.file("/var/lib/llm_cluster/ray")
        assert (temp.user, temp.group, temp.mode) == ("root", "llm-cluster", 0o770)


def test_ray_ports_refuse_non_members(nodes, addresses):
    # The controller is not a member: its SYN to the GCS port is dropped.
    with pytest.raises(OSError):
        socket.create_connection((addresses["ray-master1"], 6379), timeout=2).close()
    probe = nodes["ray-worker1"].run(
        "python3 -c 'import socket; socket.create_connection((\"%s\", 6379), timeout=2)'" % addresses["ray-master1"])
    assert probe.rc == 0, probe.stderr
    table = nodes["ray-master1"].check_output("nft list table inet llm_cluster")
    for address in addresses.values():
        assert address in table


def test_listener_audit_finds_every_socket_of_ours_guarded(nodes, addresses):
    for name, node in nodes.items():
        rows = perimeter.listener_audit(node, addresses[name])
        print(perimeter.audit_lines(name, rows))
        ours = [r for r in rows if r["ours"]]
        # Ray listens beyond loopback on every node (raylet, object manager); the audit has something to judge.
        assert any(not r["address"].startswith("127.") for r in ours), (name, rows)
        assert [r for r in ours if not r["guarded"]] == [], name
    head = {r["port"] for r in perimeter.listener_audit(nodes["ray-master1"], addresses["ray-master1"]) if r["ours"]}
    # The GCS, Ray's client server and the node manager listen beyond loopback on the head.
    assert {6379, 10001, 6380} <= head


def test_listener_audit_catches_a_listener_the_table_does_not_cover(nodes, addresses):
    worker = nodes["ray-worker2"]
    # A second interface, and a listener of ours on every address on a port outside the cluster's own.
    # A veth pair: Docker's own networking needs the veth driver, while a container cannot load the
    # dummy driver where the host has not.
    worker.check_output("ip link add llmcaudit0 type veth peer name llmcaudit1 && ip addr add 10.254.0.1/24 dev llmcaudit0 && "
                        "ip link set llmcaudit0 up && ip link set llmcaudit1 up")
    worker.check_output("systemd-run --unit=llm-cluster-audit-probe python3 -m http.server 18080 --bind 0.0.0.0")
    try:
        deadline = time.time() + 30
        while time.time() < deadline and ":18080 " not in worker.check_output("ss -Htln"):
            time.sleep(0.5)
        flagged = [r for r in perimeter.listener_audit(worker, addresses["ray-worker2"]) if r["ours"] and not r["guarded"]]
        assert [(r["port"], r["units"]) for r in flagged] == [(18080, ["llm-cluster-audit-probe.service"])]
    finally:
        worker.run("systemctl stop llm-cluster-audit-probe; ip link del llmcaudit0")
    assert [r for r in perimeter.listener_audit(worker, addresses["ray-worker2"]) if r["ours"] and not r["guarded"]] == []


def test_ray_refuses_a_member_without_the_token(nodes, addresses):
    worker, gcs, client = nodes["ray-worker1"], "%s:6379" % addresses["ray-master1"], "ray://%s:10001" % addresses["ray-master1"]
    for name, node in nodes.items():
        token = node.file(TOKEN)
        assert (token.mode, token.user, token.group, token.size) == (0o640, "root", "llm-cluster", 64), name
        # The token is in no process's command line or environment (its path is, in RAY_AUTH_TOKEN_PATH).
        found = node.run("grep -slFf %s /proc/[0-9]*/cmdline /proc/[0-9]*/environ" % TOKEN)
        assert found.rc != 0 and found.stdout.strip() == "", (name, found.stdout)
    # With the token: a driver through the GCS, and a client through Ray's client server. The client server
    # forks a server per client and that fork sometimes dies in grpc ("Check failed: next_worker->state ==
    # KICKED", Ray's own log): up to three tries.
    out = python(worker, CONNECT, gcs)
    assert out.rc == 0 and "ALIVE 3" in out.stdout, out.stderr[-2000:]
    for dummy in range(3):
        out = python(worker, CONNECT, client)
        if out.rc == 0:
            break
    assert out.rc == 0 and "ALIVE 3" in out.stdout, out.stderr[-2000:]
    # Without it, and with a wrong one: refused, from a member the firewall lets through.
    worker.check_output("printf %s 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef > /root/wrong-token")
    # A driver tries the GCS about once a second for 20 s by default, and Ray's client retries a refused
    # login three times, sleeping 5, 10 and 15 s in between; two tries and one second are enough to see
    # the refusal.
    # env's options (-u) come before its assignments.
    run = ("timeout 150 env %s RAY_gcs_server_port_wait_time_s=2 RAY_CLIENT_INITIAL_CONNECTION_TIMEOUT_S=1 "
           "RAY_CLIENT_MAX_CONNECTION_TIMEOUT_S=1 %s - %s <<'EOF'\n%s\nEOF")
    for env in ("-u RAY_AUTH_MODE -u RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/root/wrong-token"):
        out = worker.run(run % (env, PY, gcs, CONNECT))
        assert out.rc == 1 and "ALIVE" not in out.stdout, out.stdout[-1000:]
        assert "Unauthenticated: RPC error: InvalidAuthToken: Authentication token is missing or incorrect" in out.stderr
        assert "ConnectionError: Failed to connect to Ray cluster at %s" % gcs in out.stderr
        out = worker.run(run % (env, PY, client, CONNECT))
        assert out.rc == 1 and "ALIVE" not in out.stdout, out.stdout[-1000:]
        assert "ConnectionError: ray client connection timeout" in out.stderr, out.stderr[-2000:]
    log = nodes["ray-master1"].check_output("cat /var/lib/llm_cluster/ray/session_latest/logs/ray_client_server.err")
    assert "Authentication required but no authorization header provided" in log


def test_systemd_reads_escaped_values_back_unchanged(nodes):
    """The escaping of the unit templates, judged by systemd itself: every hostile word stays one argument."""
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _perimeter
    words = ["a b", "x\nExecStartPre=/bin/touch /run/pwned", "$(id)", "${HOME}", "$HOME", "50%", "%n", "it's", 'q"q',
             "back\\slash", ";", "tab\there", "{\"NPU\": 8}"]
    code = "import json, os, sys; json.dump([sys.argv[1:], os.environ['V']], open('/run/llmc-escape.json', 'w'))"
    unit = "[Service]\nType=oneshot\nEnvironment=%s\nExecStart=%s\n" % (
        _perimeter.systemd_environment("V", "x\ny$Z%n'\""), _perimeter.systemd_exec_args(["/usr/bin/python3", "-c", code] + words))
    node = nodes["ray-master1"]
    node.check_output("cat > /etc/systemd/system/llmc-escape.service <<'UNIT'\n%sUNIT" % unit)
    try:
        node.check_output("systemctl daemon-reload && systemctl start llmc-escape.service")
        argv, value = json.loads(node.check_output("cat /run/llmc-escape.json"))
        assert argv == words and value == "x\ny$Z%n'\""
        assert not node.file("/run/pwned").exists
    finally:
        node.run("rm -f /etc/systemd/system/llmc-escape.service /run/llmc-escape.json; systemctl daemon-reload")


def test_second_run_changes_nothing_and_keeps_every_pid(nodes):
    before = pids(nodes)
    result, changed = ray_step()
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed == {name: 0 for name in NAMES}
    assert pids(nodes) == before


def test_stopped_worker_rejoins_alone(nodes, addresses):
    before = pids(nodes)
    nodes["ray-worker1"].check_output("systemctl stop llm-cluster-ray-worker")
    result, changed = ray_step()
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed == {"ray-master1": 0, "ray-worker1": 1, "ray-worker2": 0}
    after = pids(nodes)
    assert after["ray-master1"] == before["ray-master1"] and after["ray-worker2"] == before["ray-worker2"]
    assert after["ray-worker1"] != before["ray-worker1"]
    assert cluster(nodes, addresses)["npu"] == 24.0


def test_killed_raylet_is_restarted_by_systemd_alone(nodes, addresses):
    before = pids(nodes)
    restarts = int(unit(nodes["ray-worker2"], UNIT["ray-worker2"])["NRestarts"])
    nodes["ray-worker2"].check_output("pkill -9 -x raylet")
    deadline = time.time() + 60
    while time.time() < deadline and int(unit(nodes["ray-worker2"], UNIT["ray-worker2"])["NRestarts"]) == restarts:
        time.sleep(1)
    assert int(unit(nodes["ray-worker2"], UNIT["ray-worker2"])["NRestarts"]) == restarts + 1
    assert cluster(nodes, addresses)["npu"] == 24.0
    result, changed = ray_step()
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed == {name: 0 for name in NAMES}
    after = pids(nodes)
    assert after["ray-master1"] == before["ray-master1"] and after["ray-worker1"] == before["ray-worker1"]


def npu_addresses(node):
    return [node.check_output("hccn_tool -i %d -ip -g" % device) for device in range(8)]


def test_a_restarted_worker_container_comes_back_without_ansible(nodes, addresses):
    """A reboot as far as a container goes (docker restart: systemd boots again, /run is empty): the perimeter
    is up before Ray, Ray joins the head, and the NPU addresses come back from /etc/hccn.conf, which the fake
    driver loads at its boot as the real one does (its live state, which a reboot loses, is removed first)."""
    worker = nodes["ray-worker2"]
    before = npu_addresses(worker)
    worker.check_output("rm -f /var/lib/llm-cluster-fakes/state.runtime.json")
    restarted = subprocess.run(["docker", "restart", "--time", "30", "ray-worker2"], capture_output=True, text=True,
                               timeout=180, check=False)
    assert restarted.returncode == 0, restarted.stderr
    assert boot.booted(worker) in ("running", "degraded")
    # A container's /dev is new at each start: the fake driver's device nodes are made again, as the real
    # driver makes /dev/davinci* when it loads at boot (the fakes' installer skips everything else).
    archive = "/var/lib/llm-cluster-fakes/fake-root.tar"
    made = worker.check_output("tar -xOf %s var/lib/llm-cluster-fakes/install.sh | sh -s -- %s" % (archive, archive))
    assert "created /dev/davinci7" in made and "unpacked" not in made, made
    now = worker.check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0]
    assert now == addresses["ray-worker2"], "the harness gave ray-worker2 a new address: %s" % now
    assert cluster(nodes, addresses, wait=180) == {"alive": sorted(addresses.values()), "npu": 24.0}
    guard, ray = (unit(worker, name) for name in ("llm-cluster-firewall", UNIT["ray-worker2"]))
    assert guard["ActiveState"] == "active" and ray["ActiveState"] == "active"
    assert int(guard["ActiveEnterTimestampMonotonic"]) <= int(ray["ActiveEnterTimestampMonotonic"])
    assert worker.run("nft list table inet llm_cluster").rc == 0
    assert npu_addresses(worker) == before
    # The next run finds nothing to do.
    result, changed = ray_step()
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed == {name: 0 for name in NAMES}


def test_nftables_reload_restart_and_stop_never_leave_ray_open(nodes, addresses):
    worker, ray_unit = nodes["ray-worker1"], UNIT["ray-worker1"]
    assert worker.check_output("systemctl show -p ActiveState --value nftables") == "inactive"
    # A restart of nftables.service (here a first start): its config flushes the ruleset; the guard and Ray follow.
    before = unit(worker, ray_unit)["MainPID"]
    worker.check_output("systemctl restart nftables")
    state = perimeter_state(worker, ray_unit)
    assert state == {"guard": "active", "ray": "active", "table": True, "ray_processes": True}
    assert unit(worker, ray_unit)["MainPID"] != before
    # A reload (flush ruleset + its config again): the table is loaded again, Ray keeps running.
    before = unit(worker, ray_unit)["MainPID"]
    worker.check_output("systemctl reload nftables")
    state = perimeter_state(worker, ray_unit)
    assert state == {"guard": "active", "ray": "active", "table": True, "ray_processes": True}
    assert unit(worker, ray_unit)["MainPID"] == before
    # A stop: no table, and no Ray either (stopped cleanly: not "failed", which a stop past TimeoutStopSec gives).
    worker.check_output("systemctl stop nftables")
    state = perimeter_state(worker, ray_unit)
    assert state == {"guard": "inactive", "ray": "inactive", "table": False, "ray_processes": False}, (
        state, worker.check_output("systemctl show -p Result,ExecMainStatus,ExecMainCode,InactiveEnterTimestamp %s"
                                   % ray_unit),
        worker.check_output("journalctl -u %s -n 30 --no-pager -o short-precise" % ray_unit))
    assert never_open(state)
    # A start of nftables.service runs its config again: the drop-in loads the table right after; Ray stays down.
    worker.check_output("systemctl start nftables")
    state = perimeter_state(worker, ray_unit)
    assert state["table"] and state["ray"] == "inactive" and never_open(state)
    # The next run brings the guard and Ray back.
    result, changed = ray_step()
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed["ray-worker1"] > 0 and changed["ray-master1"] == 0 and changed["ray-worker2"] == 0
    assert perimeter_state(worker, ray_unit) == {"guard": "active", "ray": "active", "table": True, "ray_processes": True}
    assert cluster(nodes, addresses)["npu"] == 24.0


def test_status_reports_every_node(nodes):
    result, changed = playbook("aihost.llm_cluster.status")
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed == {name: 0 for name in NAMES}
    with open(os.path.join(ARTIFACTS, "ray-cluster.json")) as handle:
        doc = json.load(handle)
    assert doc["complete"] and doc["alive"] == 3 and doc["resources"]["NPU"] == 24
    assert [(n["host"], n["in_cluster"], n["ray_version"], n["resources"]["NPU"]) for n in doc["nodes"]] == [
        (name, "alive", "2.60.0", 8) for name in NAMES]
    assert "Ray at " in result.stdout and "3 of 3 node(s) alive" in result.stdout
    # No monitoring step ran here: its section says so, after one request to the head (status.yml never waits).
    with open(os.path.join(ARTIFACTS, "status.json"), encoding="utf-8") as handle:
        monitoring = json.load(handle)["monitoring"]
    assert monitoring["prometheus_answered"] is False and monitoring["targets"] == []
    assert "did not answer: monitoring not deployed" in result.stdout


def test_a_worker_replaced_by_new_hardware_joins_and_the_others_admit_it_without_a_restart(nodes, addresses, tmp_path):
    # ./deploy.sh replace-node ray-worker2 ray-worker2: the same name on a fresh machine (molecule/shared/replace.py:
    # a new container from the scenario's platform, prepared as at the start, recording its state for the teardown
    # test), then the replacement's prepare and Ray steps.
    old_address = addresses["ray-worker2"]
    kept = {name: unit(nodes[name], UNIT[name])["MainPID"] for name in ("ray-master1", "ray-worker1")}
    # The old machine, still alive and in the inventory, left clean first (docs/node-replacement.md): the teardown
    # limited to it stops its Ray and removes its units and table, and touches no other node.
    result, changed = playbook("aihost.llm_cluster.teardown", "--limit", "ray-worker2")
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed.get("ray-worker2", 0) > 0 and not [name for name in kept if name in changed], changed
    assert nodes["ray-worker2"].run("pgrep -f '[/]opt/llm_cluster/ray/'").rc == 1
    assert nodes["ray-worker2"].run("nft list table inet llm_cluster").rc != 0
    assert not nodes["ray-worker2"].file("/etc/systemd/system/llm-cluster-ray-worker.service").exists
    # New hardware comes with a new address: another container holds the freed one while the new one is made.
    replace.renew(SCENARIO, "ray-worker2", INVENTORY, new_address=True)
    new_address = nodes["ray-worker2"].check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0]
    assert new_address != old_address
    assert nodes["ray-worker2"].run("test -e /opt/llm_cluster/ray").rc != 0, "the new machine is not fresh"
    # On Ray's own port, which the others' llm_cluster tables guard: until the Ray step writes them again they
    # drop the new address's packets, and the preflight's reachability probe from it times out. The preflight
    # reports those peers as pending, not as a blocked firewall (docs/node-replacement.md).
    result, changed = replace.replace_node(INVENTORY, "ray-worker2", "ray-worker2", "--tags", "prepare,ray",
                                           "-e", "llm_cluster_artifacts_dir=%s" % tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "Replacing ray-worker2 by ray-worker2" in result.stdout
    with open(os.path.join(str(tmp_path), "preflight-ray-worker2.json"), encoding="utf-8") as handle:
        reachability = [c for c in json.load(handle)["checks"] if c["check"] == "reachability"]
    assert [(c["ok"], c["detail"]) for c in reachability] == [(True, (
        "reaches 0 peer(s) on port 6379; not yet ray-master1, ray-worker1, whose firewall admits this node's %s "
        "only once the Ray step writes its rules (Ray's join then proves the path)" % new_address))], reachability
    addresses["ray-worker2"] = new_address
    assert cluster(nodes, addresses) == {"alive": sorted(addresses.values()), "npu": 24.0}
    # The others' Ray kept running; their tables admit the new address and no longer the old.
    assert {name: unit(nodes[name], UNIT[name])["MainPID"] for name in kept} == kept
    for name in kept:
        members = nodes[name].check_output("nft list set inet llm_cluster members")
        assert new_address in members and old_address not in members, (name, old_address, members)
    assert changed["ray-worker2"] > 0


def test_worker_that_cannot_reach_the_head_is_named(nodes, addresses):
    worker = nodes["ray-worker2"]
    # Stopped before the block: a worker stopped while it cannot reach its GCS takes 30 s to stop.
    worker.check_output("systemctl stop llm-cluster-ray-worker")
    worker.check_output("nft add table inet harness_block")
    worker.check_output("nft 'add chain inet harness_block out { type filter hook output priority 0; }'")
    worker.check_output("nft add rule inet harness_block out ip daddr %s tcp dport 6379 drop" % addresses["ray-master1"])
    try:
        worker.check_output("systemctl start llm-cluster-ray-worker")
        result, dummy = ray_step("-e", "ray_cluster_join_timeout=20")
        output = " ".join(result.stdout.split())
        assert result.returncode != 0
        assert "Ray cluster incomplete after 20s: nodes: 2 of 3 alive" in output
        assert "ray-worker2 (%s): unit llm-cluster-ray-worker is" % addresses["ray-worker2"] in output
        assert "CANNOT reach the head's GCS %s:6379" % addresses["ray-master1"] in output
        assert "ray-worker1 (" not in output
    finally:
        worker.run("nft delete table inet harness_block")
    # The next run, the port change below, brings worker2 back and proves the cluster whole.


def test_port_change_restarts_the_head_then_the_workers(nodes, addresses):
    # Right after a failed run (the test before): the change also brings the blocked worker back.
    before = pids(nodes)
    result, changed = ray_step("-e", "ray_cluster_port=6479")
    assert result.returncode == 0, result.stdout[-3000:]
    assert all(changed[name] > 0 for name in NAMES)
    after = pids(nodes)
    assert all(after[name] != before[name] for name in NAMES)
    started = {name: int(unit(node, UNIT[name])["ActiveEnterTimestampMonotonic"]) for name, node in nodes.items()}
    assert started["ray-master1"] < started["ray-worker1"] and started["ray-master1"] < started["ray-worker2"]
    assert cluster(nodes, addresses, port=6479) == {"alive": sorted(addresses.values()), "npu": 24.0}
    # The cluster stays on 6479 for the retirement and the teardown that follow (the teardown reads no port).


# What prepare recorded before the first deploy (molecule/shared/node_state.sh), read again now.
NODE_STATE = os.path.join(os.path.dirname(SCENARIO), "shared", "node_state.sh")
# The only difference teardown + restore may leave: the venv, the packages the operator keeps unless purged.
KEPT = re.compile(r"^(file \S+ \S+ \S+ |sha256 \S+  )/opt/llm_cluster(/ray(/.*)?)?( |$)")


def docker_dns_table(lines):
    """The lines of Docker's `table ip nat` (its embedded DNS, made in each container's network namespace)."""
    found, inside = set(), False
    for line in lines:
        inside = inside or line == "nft table ip nat {"
        if inside or line.startswith(("# Warning: table ip nat", "XT target")):
            found.add(line)
        inside = inside and line != "nft }"
    return found


def node_state(node):
    with open(NODE_STATE, encoding="utf-8") as handle:
        script = handle.read()
    return node.check_output("bash -s <<'LLMC_NODE_STATE'\n%s\nLLMC_NODE_STATE" % script).splitlines()


def assert_torn_down(node):
    assert node.run("pgrep -f '[/]opt/llm_cluster/ray/'").rc == 1, node.check_output("ps -ef")
    for unit_file in ("llm-cluster-ray-head", "llm-cluster-ray-worker", "llm-cluster-firewall"):
        assert not node.file("/etc/systemd/system/%s.service" % unit_file).exists
    assert node.run("nft list table inet llm_cluster").rc != 0
    assert "llm_cluster" not in node.check_output("nft list tables")
    # The venv stays unless ray_cluster_purge=true.
    assert node.file(PY).exists


def assert_as_before_deploy(name, node, after):
    """The node's state as prepare recorded it before the first deploy (molecule/shared/node_state.sh), but for
    the venv and Docker's own DNS table."""
    before = node.check_output("cat /var/tmp/llmc-node-state-before").splitlines()
    if name == "ray-worker1":
        flushed = docker_dns_table(before)
        assert "nft table ip nat {" in flushed
        before = [line for line in before if line not in flushed]
    if name == "ray-worker2":
        # Restarted as a reboot: Docker made its embedded DNS table again, with new random ports.
        renewed = docker_dns_table(before) | docker_dns_table(after)
        assert "nft table ip nat {" in docker_dns_table(after)
        before = [line for line in before if line not in renewed]
        after = [line for line in after if line not in renewed]
    assert any(line.startswith("hccn 7 ip ipaddr:192.168.40.22") for line in before), before[-40:]
    missing = [line for line in before if line not in after]
    added = [line for line in after if line not in before]
    unexpected = [line for line in added if not KEPT.match(line)]
    assert missing == [] and unexpected == [], "%s: missing\n%s\nadded\n%s" % (
        name, "\n".join(missing[:60]), "\n".join(unexpected[:60]))
    assert any(line.startswith("file d ") and line.endswith(" /opt/llm_cluster/ray ") for line in added), added[:5]


# The parts of deploy.yml, teardown.yml and restore.yml this scenario has (no model, engine or monitoring).
RETIRE_TAGS = "prepare,npu_network,binding,tuning,ray"


@pytest.fixture(scope="module")
def shrunk(tmp_path_factory):
    """Molecule's inventory without ray-worker2 in workers (still a host) and node_num 2."""
    return replace.shrunk_inventory(INVENTORY, "ray-worker2", str(tmp_path_factory.mktemp("shrunk")))


def test_a_node_removed_with_retire_is_left_as_before_deploy_and_the_others_let_it_go(nodes, addresses, shrunk):
    # ./deploy.sh remove-node ray-worker2 --retire, the inventory keeping ray-worker2 as a host outside the groups:
    # the two members are deployed as a cluster of two (the firewall no longer admits it, Ray restarts for the new
    # node count), then teardown.yml's and restore.yml's steps run on ray-worker2 alone (docs/node-replacement.md).
    result, changed = replace.playbook(shrunk, "aihost.llm_cluster.replace_node", "-e",
                                       json.dumps({"replace_node_old": "ray-worker2", "replace_node_new": "",
                                                   "replace_node_retire": True}),
                                       "--tags", RETIRE_TAGS, "-e", "ray_cluster_port=6479")
    assert result.returncode == 0, result.stdout[-3000:]
    assert "Removing ray-worker2: deploy.yml over ray-master1, ray-worker1; then ray-worker2 is torn down" \
        in " ".join(result.stdout.split())
    assert changed["ray-worker2"] > 0
    kept = {name: addresses[name] for name in ("ray-master1", "ray-worker1")}
    assert cluster(nodes, kept, port=6479, want=2) == {"alive": sorted(kept.values()), "npu": 16.0}
    for name in kept:
        members = nodes[name].check_output("nft list set inet llm_cluster members")
        assert addresses["ray-worker2"] not in members, (name, members)
    assert_torn_down(nodes["ray-worker2"])
    assert not nodes["ray-worker2"].file("/etc/llm_cluster/env").exists
    assert_as_before_deploy("ray-worker2", nodes["ray-worker2"], node_state(nodes["ray-worker2"]))
    # A retired node is no member: the shipped teardown and restore leave it out.
    listed = subprocess.run(["ansible-playbook", "-i", shrunk, "--list-hosts", "aihost.llm_cluster.teardown"],
                            capture_output=True, text=True, check=True).stdout
    assert "ray-worker2" not in listed


def test_teardown_and_restore_return_every_node_to_its_state_before_deploy(nodes, shrunk):
    # The two members left after the retirement above (ray-worker2 is compared again below).
    members = {name: node for name, node in nodes.items() if name != "ray-worker2"}
    result, changed = replace.playbook(shrunk, "aihost.llm_cluster.teardown")
    assert result.returncode == 0, result.stdout[-3000:]
    for node in members.values():
        assert_torn_down(node)
        # The originals stay for the restore.
        assert node.file("/var/lib/llm_cluster/npu_network.json").exists
    again, changed = replace.playbook(shrunk, "aihost.llm_cluster.teardown")
    assert again.returncode == 0 and changed == {name: 0 for name in members}

    restored, changed = replace.playbook(shrunk, "aihost.llm_cluster.restore")
    assert restored.returncode == 0, restored.stdout[-3000:]
    assert all(changed[name] > 0 for name in members)
    # The nftables reload test started ray-worker1's nftables.service (Debian's own ruleset), as an operator
    # might; deploy did not, and teardown leaves the operator's firewall as it is. Stopped as before that test.
    # Its config's `flush ruleset` also removed the table Docker keeps in the container for its embedded DNS,
    # which no step of ours touches: left out of ray-worker1's comparison.
    nodes["ray-worker1"].check_output("systemctl stop nftables")
    with concurrent.futures.ThreadPoolExecutor(len(nodes)) as pool:
        states = dict(zip(nodes, pool.map(node_state, nodes.values())))
    for name, node in nodes.items():
        assert_as_before_deploy(name, node, states[name])
    again, changed = replace.playbook(shrunk, "aihost.llm_cluster.restore")
    assert again.returncode == 0 and changed == {name: 0 for name in members}
    # The retired node's steps again, on it alone: nothing left to change.
    for path in ("aihost.llm_cluster.teardown", "aihost.llm_cluster.restore"):
        again, changed = replace.playbook(shrunk, path, "-e", "llm_cluster_play_hosts=ray-worker2")
        assert again.returncode == 0, (path, again.stdout[-2000:])
        # (The members run only the inventory's validation, on the controller.)
        assert changed.get("ray-worker2") == 0 and not any(changed.values()), (path, changed)
