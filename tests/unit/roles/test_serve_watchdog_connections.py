# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A follower's watchdog tells a headless rank the API node's engine took in from one that waits to be taken in
by the TCP connections the rank's processes hold to the API node (roles/serve/files/llm_cluster_watchdog.py).

The table parser reads the kernel's own tables, captured byte-exact on the demo's worker with its rank alone and
then taken in (tests/fixtures/system/README.md); the whole reader runs on real processes here (a listener, an
engine process whose child connects to it, one that connects nowhere); the follower's decision runs on a /proc
tree made of those captures.
"""

from __future__ import annotations

import http.server
import ipaddress
import json
import os
import socket
import subprocess
import sys
import threading

import pytest

from role_files import load_role_file

watchdog = load_role_file("serve", "llm_cluster_watchdog.py")
HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEM = os.path.join(HERE, "..", "..", "fixtures", "system")
API = ipaddress.ip_address("172.18.0.2")


def fixture(name):
    with open(os.path.join(SYSTEM, name), encoding="ascii") as handle:
        return handle.read()


def inodes(name):
    return {line.strip()[8:-1] for line in fixture(name).splitlines() if line.startswith("socket:[")}


def test_the_kernel_s_address_words_are_read_in_the_host_s_byte_order():
    assert watchdog.proc_net_address("020012AC:3120", "little") == (API, 12576)
    assert watchdog.proc_net_address("AC120002:3120", "big") == (API, 12576)
    # tcp6: four words, and an IPv4-mapped address (a dual-stack socket) read as the IPv4 one.
    assert watchdog.proc_net_address("0000000000000000FFFF0000020012AC:0050", "little") == (API, 80)
    assert watchdog.proc_net_address("00000000000000000000000001000000:0016", "little") == (ipaddress.ip_address("::1"), 22)


def test_a_rank_taken_in_holds_connections_to_the_api_node_and_a_lone_one_none_beside_ray_s():
    joined, lone = fixture("proc-net-tcp-headless-rank-joined.txt"), fixture("proc-net-tcp-headless-rank-lone.txt")
    # Every connection to the API node, whoever holds it: Ray's six in both captures, the engine's six more once
    # it was taken in (ss -tanp of the same moments agrees).
    everyone = {line.split()[9] for table in (joined, lone) for line in table.splitlines()[1:]}
    assert watchdog.established(lone, everyone, API, "little") == 6
    assert watchdog.established(joined, everyone, API, "little") == 12
    assert fixture("ss-tanp-headless-rank-joined.txt").count("users:((\"VLLM::EngineCor\"") == 6
    # The engine's own sockets only.
    assert watchdog.established(joined, inodes("proc-fd-sockets-headless-rank-joined.txt"), API, "little") == 6
    assert watchdog.established(lone, inodes("proc-fd-sockets-headless-rank-lone.txt"), API, "little") == 0
    # Not to another address: the worker's own.
    assert watchdog.established(joined, everyone, ipaddress.ip_address("172.18.0.3"), "little") == 0


CONNECTOR = ("import socket, subprocess, sys, time\n"
             "child = subprocess.Popen([sys.executable, '-c', 'import socket, sys, time; "
             "s = socket.create_connection((sys.argv[1], int(sys.argv[2]))); print(1, flush=True); time.sleep(60)', "
             "sys.argv[1], sys.argv[2]], stdout=sys.stdout)\n"
             "time.sleep(60)\n")


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True)
    thread.start()
    yield server.getsockname()
    server.close()
    for conn, _peer in accepted:
        conn.close()


def test_the_reader_counts_what_an_engine_s_child_holds_on_a_real_kernel(listener):
    if not os.access("/proc/self/fd", os.R_OK):
        pytest.skip("no /proc here")
    engine = subprocess.Popen([sys.executable, "-c", CONNECTOR, listener[0], str(listener[1])],
                              stdout=subprocess.PIPE, text=True)
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert engine.stdout.readline().strip() == "1"
        host = {"runtime": "host", "name": "llm-cluster-engine.service", "api_address": "127.0.0.1"}
        # Held by the child (as vLLM's engine core, below the unit's main process), read in the main process's
        # network namespace.
        assert watchdog.api_connections(host, engine.pid) == 1
        assert watchdog.api_connections(dict(host, api_address="127.0.0.2"), engine.pid) == 0
        assert watchdog.api_connections(host, idle.pid) == 0
        # Unknown, not 0: no address, no main process, a process that is gone.
        assert watchdog.api_connections(dict(host, api_address=""), engine.pid) is None
        assert watchdog.api_connections(host, 0) is None
        gone = subprocess.Popen(["true"])
        gone.wait()
        assert watchdog.api_connections(host, gone.pid) is None
        # The main PID as systemd and Docker report it, read with the engine's state in one command each.
        for runtime in ("host", "container"):
            conf = {"runtime": runtime, "name": "openeuler_llm" if runtime == "container" else host["name"]}
            assert watchdog.engine_state(conf, Runner(engine.pid))[4] == engine.pid
    finally:
        for process in (engine, idle):
            process.kill()
            process.wait()


class Runner:
    """systemctl show / docker inspect answering with ``pid`` as the engine's main process."""

    def __init__(self, pid, entered_s=1000.0, invocation="j1"):
        self.pid, self.entered_s, self.invocation = pid, entered_s, invocation
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv)
        if argv[:2] == ["systemctl", "show"]:
            props = {"ActiveState": "active", "SubState": "running", "InvocationID": self.invocation,
                     "ActiveEnterTimestampMonotonic": str(int(self.entered_s * 1e6)), "MainPID": str(self.pid)}
            return subprocess.CompletedProcess(argv, 0, "".join("%s=%s\n" % item for item in props.items()), "")
        if argv[:2] == ["docker", "inspect"]:
            state = {"Status": "running", "StartedAt": "2026-12-07T22:24:36.000000000Z", "Pid": self.pid}
            return subprocess.CompletedProcess(argv, 0, json.dumps(state) + "\n", "")
        return subprocess.CompletedProcess(argv, 0, "", "")

    @property
    def restarts(self):
        return [call for call in self.calls if "restart" in call]


def fake_proc(root, capture, main=2393):
    """A /proc with the worker's engine as captured: its processes, their sockets, its network table."""
    pids = {main: 1, main + 16: main, main + 17: main}
    for pid, parent in pids.items():
        os.makedirs(os.path.join(root, str(pid), "fd"))
        with open(os.path.join(root, str(pid), "stat"), "w", encoding="ascii") as handle:
            handle.write("%d (python3) S %d %d 0 0 -1 4194560 0 0 0 0\n" % (pid, parent, pid))
    for index, inode in enumerate(sorted(inodes("proc-fd-sockets-headless-rank-%s.txt" % capture))):
        os.symlink("socket:[%s]" % inode, os.path.join(root, str(main + 17), "fd", str(50 + index)))
    os.symlink("/dev/null", os.path.join(root, str(main), "fd", "0"))
    os.makedirs(os.path.join(root, str(main), "net"))
    with open(os.path.join(root, str(main), "net", "tcp"), "w", encoding="ascii") as handle:
        handle.write(fixture("proc-net-tcp-headless-rank-%s.txt" % capture))
    return root


class Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(Health.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def api():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()


def follower(url):
    return {"mode": "follower", "url": url, "runtime": "host", "name": "llm-cluster-engine.service",
            "state_file": "/unused", "failures": 2, "timeout": 1, "start_grace": 600, "max_restarts": 3,
            "window": 3600, "ca_path": "", "api_address": "172.18.0.2", "model": "", "api_key": ""}


def outage(conf, root, runner):
    """The API node serves (read at 100), this rank starts again alone at 130 (the monotonic clock's 2030: its node
    rebooted) and is read with the API node serving at 140, then the API node's engine goes away (160, 190, 220):
    the state after it."""
    Health.status = 200
    state = watchdog.check(conf, {}, runner=runner, now=lambda: 100.0, monotonic=lambda: 2000.0, proc_root=root)
    runner.entered_s, runner.invocation = 2030.0, "j2"
    state = watchdog.check(conf, state, runner=runner, now=lambda: 140.0, monotonic=lambda: 2040.0, proc_root=root)
    Health.status = 503
    for at in (160.0, 190.0, 220.0):
        state = watchdog.check(conf, state, runner=runner, now=lambda at=at: at, monotonic=lambda at=at: at + 1900.0,
                               proc_root=root)
    return state


def test_a_rank_with_no_connection_to_the_serving_api_node_is_left_alone_when_it_goes_away(api, tmp_path):
    # The rank as captured alone: the API node's engine went away after it started, and it never held a
    # connection to it. (healthy_since, 100, would leave it alone too here; the connections decide first.)
    lone = fake_proc(str(tmp_path / "lone"), "lone")
    runner = Runner(2393)
    state = outage(follower(api), lone, runner)
    assert state["api_connections"] == {"instance": "j2", "count": 0, "at": 140.0}
    assert runner.restarts == [] and state["result"] == "waiting"
    assert "at the last check that saw the API node healthy (" in state["detail"]
    assert state["detail"].endswith("this engine held no connection to it (172.18.0.2), so it was never taken in by "
                                    "that engine; it joins the next one by itself")
    # No engine log read: the connections decided.
    assert [call for call in runner.calls if call[0] == "journalctl"] == []


def test_the_race_one_check_interval_wide_is_closed(api, tmp_path):
    # The rank restarted at 130, after the API node's engine began answering but before the follower saw it
    # answer: healthy_since (140) is after the rank's start, so healthy_since alone took it for a joined rank
    # and restarted it. Its connections say it was never taken in.
    lone = fake_proc(str(tmp_path / "lone"), "lone")
    runner = Runner(2393)
    conf = follower(api)
    Health.status = 503
    state = {"last_ok_at": 50.0, "api_failed_reads": 2, "instance": "j1"}
    runner.entered_s, runner.invocation = 2030.0, "j2"
    Health.status = 200
    state = watchdog.check(conf, state, runner=runner, now=lambda: 140.0, monotonic=lambda: 2040.0, proc_root=lone)
    assert state["healthy_since"] == 140.0 and state["api_connections"]["count"] == 0
    Health.status = 503
    for at in (160.0, 190.0):
        state = watchdog.check(conf, state, runner=runner, now=lambda at=at: at, monotonic=lambda at=at: at + 1900.0,
                               proc_root=lone)
    assert runner.restarts == [] and "held no connection to it" in state["detail"]
    # Without the count (a host where it cannot be read) the same timing restarts the rank: what was open.
    runner = Runner(2393)
    state = {"last_ok_at": 50.0, "api_failed_reads": 2, "instance": "j1"}
    runner.entered_s, runner.invocation = 2030.0, "j2"
    Health.status = 200
    state = watchdog.check(dict(conf, api_address=""), state, runner=runner, now=lambda: 140.0,
                           monotonic=lambda: 2040.0, proc_root=lone)
    assert "api_connections" not in state
    Health.status = 503
    for at in (160.0, 190.0):
        state = watchdog.check(dict(conf, api_address=""), state, runner=runner, now=lambda at=at: at,
                               monotonic=lambda at=at: at + 1900.0, proc_root=lone)
    assert len(runner.restarts) == 1 and state["result"] == "restarted"


def test_a_rank_taken_in_is_restarted_once_its_api_node_s_engine_went_away(api, tmp_path):
    joined = fake_proc(str(tmp_path / "joined"), "joined")
    runner = Runner(2393, entered_s=500.0)
    conf = follower(api)
    Health.status = 200
    state = watchdog.check(conf, {}, runner=runner, now=lambda: 100.0, monotonic=lambda: 2000.0, proc_root=joined)
    assert state["api_connections"] == {"instance": "j1", "count": 6, "at": 100.0}
    Health.status = 503
    for at in (130.0, 160.0):
        state = watchdog.check(conf, state, runner=runner, now=lambda at=at: at, monotonic=lambda at=at: at + 1900.0,
                               proc_root=joined)
    assert runner.restarts == [["systemctl", "restart", "llm-cluster-engine.service"]]
    assert state["result"] == "restarted"


def test_a_count_of_an_earlier_run_of_the_rank_or_from_before_a_pause_decides_nothing(api, tmp_path):
    lone = fake_proc(str(tmp_path / "lone"), "lone")
    conf = follower(api)
    # Counted 0 for run j0; the run that goes on now (j1) joined since: the count is not this run's.
    runner = Runner(2393, entered_s=500.0)
    state = {"last_ok_at": 100.0, "healthy_since": 90.0, "instance": "j1",
             "api_connections": {"instance": "j0", "count": 0, "at": 95.0}}
    Health.status = 503
    for at in (130.0, 160.0):
        state = watchdog.check(conf, state, runner=runner, now=lambda at=at: at, monotonic=lambda at=at: at + 1900.0,
                               proc_root=lone)
    assert len(runner.restarts) == 1
    # Seen serving while a deploy held the engines: every rank joined; the count of before is dropped.
    pause = tmp_path / "watchdog.pause"
    pause.write_text("600\n")
    state = {"api_connections": {"instance": "j1", "count": 0, "at": 95.0}, "last_ok_at": 95.0}
    Health.status = 200
    state = watchdog.check(dict(conf, pause_file=str(pause)), state, runner=Runner(2393),
                           now=lambda: pause.stat().st_mtime + 5, monotonic=lambda: 2000.0, proc_root=lone)
    assert state["result"] == "paused" and "api_connections" not in state
