# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The serve role's inference watchdog (roles/serve/files/llm_cluster_watchdog.py), on the API node
(leader: completions) and on a headless data-parallel node (follower: the API node's /health).

The completions go to a real HTTP server on 127.0.0.1 that answers like vLLM's /v1/completions, or with
an error, or not at all within the timeout (a hung engine core behind a live API front). systemctl and
docker are a recording runner that answers like ``systemctl show`` and ``docker inspect`` do.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
import time

import pytest

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _serve
from role_files import load_role_file

KEY = "Kq7vT2mX9pL4sW8nB3cF6hJ1dG5yR0aZeU2iO4kN"
# The container runtime restarts its container through this unit (templates/engine-container.service.j2).
UNIT = "llm-cluster-engine-container.service"


watchdog = load_role_file("serve", "llm_cluster_watchdog.py")


class Engine(http.server.BaseHTTPRequestHandler):
    mode = "ok"
    health = 200
    hung_rank = None
    seen = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        Engine.seen.append({"path": self.path, "auth": self.headers.get("Authorization")})
        self.send_response(Engine.health)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        rank = self.headers.get("X-data-parallel-rank")
        Engine.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body, "rank": rank})
        if Engine.mode == "hang" or (rank is not None and rank == Engine.hung_rank):
            time.sleep(2)
        if Engine.mode == "error":
            self.send_response(500)
            self.end_headers()
            return
        answer = {"usage": {"prompt_tokens": 1, "completion_tokens": 0 if Engine.mode == "empty" else 1},
                  "choices": [{"finish_reason": "length"}]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()


class Runner:
    """systemctl/docker: answers show/inspect from ``props``, records every command."""

    def __init__(self, props=None, container=None, restart_rc=0):
        self.props = props or {}
        self.container = container
        self.restart_rc = restart_rc
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv)
        if argv[:2] == ["systemctl", "show"]:
            out = "".join("%s=%s\n" % item for item in self.props.items())
            return subprocess.CompletedProcess(argv, 0, out, "")
        if argv[:2] == ["docker", "inspect"]:
            if self.container is None:
                return subprocess.CompletedProcess(argv, 1, "", "Error: No such object: llm_cluster_engine\n")
            return subprocess.CompletedProcess(argv, 0, json.dumps(self.container) + "\n", "")
        return subprocess.CompletedProcess(argv, self.restart_rc, "", "" if self.restart_rc == 0 else "Job failed.\n")

    @property
    def restarts(self):
        return [c for c in self.calls if "restart" in c]


def config(url, **extra):
    base = {"url": url, "model": "tiny", "api_key": KEY, "runtime": "host", "name": "llm-cluster-engine.service",
            "state_file": "/unused", "failures": 3, "timeout": 1, "start_grace": 600, "max_restarts": 2, "window": 3600,
            "ca_path": ""}
    base.update(extra)
    return base


def running(invocation="a1", entered_s=1000.0):
    return {"ActiveState": "active", "SubState": "running", "InvocationID": invocation,
            "ActiveEnterTimestampMonotonic": str(int(entered_s * 1e6))}


def step(conf, state, runner, at, mono):
    return watchdog.check(conf, state, runner=runner, now=lambda: at, monotonic=lambda: mono)


def test_a_one_token_completion_with_the_key_proves_the_engine(server):
    Engine.mode, Engine.seen[:] = "ok", []
    runner = Runner(running())
    state = step(config(server), {}, runner, 100.0, 2000.0)
    assert state["result"] == "ok" and state["failures"] == 0 and state["answered"] is True
    assert Engine.seen == [{"path": "/v1/completions", "auth": "Bearer " + KEY, "rank": None,
                            "body": {"model": "tiny", "prompt": "ping", "max_tokens": 1, "temperature": 0, "ignore_eos": True}}]
    assert runner.restarts == []


def test_a_hung_engine_is_restarted_after_three_timeouts_in_a_row(server):
    Engine.mode = "hang"
    runner = Runner(running())
    state = step(config(server), {}, runner, 100.0, 2000.0)
    # Up for 1,000 s and never seen answering: past the grace (600 s), so it counts.
    assert state["result"] == "failing" and state["failures"] == 1 and state["last_error"] == "no answer within 1s"
    state = step(config(server), state, runner, 130.0, 2030.0)
    assert state["failures"] == 2 and runner.restarts == []
    state = step(config(server), state, runner, 160.0, 2060.0)
    assert runner.restarts == [["systemctl", "restart", "llm-cluster-engine.service"]]
    assert state["result"] == "restarted" and state["failures"] == 0
    assert state["restarts"][0]["reason"] == "3 failed completion(s) in a row, the last: no answer within 1s"
    assert state["restarts"][0]["at"] == 160.0 and state["restarts"][0]["ok"] is True


def test_with_data_parallelism_every_rank_is_asked_and_a_hung_one_is_found(server):
    # The least loaded rank would take a plain completion: only asking rank 1 by name finds it hung.
    Engine.mode, Engine.hung_rank, Engine.seen[:] = "ok", "1", []
    runner = Runner(running())
    conf = config(server, ranks=2, failures=2)
    state = step(conf, {}, runner, 100.0, 2000.0)
    assert sorted(seen["rank"] for seen in Engine.seen) == ["0", "1"]
    assert state["result"] == "failing" and state["last_error"] == "rank 1: no answer within 1s"
    state = step(conf, state, runner, 130.0, 2030.0)
    assert runner.restarts == [["systemctl", "restart", "llm-cluster-engine.service"]]
    Engine.hung_rank = None
    runner.props = running("new", entered_s=1000.0)
    assert step(conf, state, runner, 160.0, 2060.0)["result"] == "ok"


def test_an_engine_inside_its_start_grace_is_not_counted_until_it_first_answers(server):
    Engine.mode = "error"
    runner = Runner(running("b2", entered_s=1990.0))
    state = step(config(server), {}, runner, 100.0, 2000.0)
    assert state["result"] == "starting" and state["failures"] == 0 and "HTTP 500" in state["detail"]
    # It answers once; from then on a failure counts even inside the grace.
    Engine.mode = "ok"
    state = step(config(server), state, runner, 130.0, 2030.0)
    Engine.mode = "error"
    state = step(config(server), state, runner, 160.0, 2060.0)
    assert state["result"] == "failing" and state["failures"] == 1 and state["last_error"] == "HTTP 500 Internal Server Error"


def test_an_engine_that_is_not_running_is_left_to_systemd(server):
    Engine.mode, Engine.seen[:] = "ok", []
    runner = Runner({"ActiveState": "activating", "SubState": "auto-restart", "InvocationID": "",
                     "ActiveEnterTimestampMonotonic": "0"})
    state = step(config(server), {"failures": 2, "instance": "a1"}, runner, 100.0, 2000.0)
    assert state["result"] == "engine down" and state["failures"] == 0 and runner.restarts == []
    assert "llm-cluster-engine.service is activating/auto-restart" in state["detail"]
    assert Engine.seen == []


class Exiting(Runner):
    """The container runs when the check starts and has stopped, or been started again, when it looks again."""

    def __init__(self, after, **kwargs):
        super().__init__(**kwargs)
        self.after = after

    def __call__(self, argv):
        if argv[:2] == ["docker", "inspect"] and any(c[:2] == ["docker", "inspect"] for c in self.calls):
            self.calls.append(argv)
            return subprocess.CompletedProcess(argv, 0, json.dumps(self.after) + "\n", "")
        return super().__call__(argv)


@pytest.mark.parametrize("after, gone", [
    ({"Status": "exited", "StartedAt": "2026-12-03T05:00:00Z"}, "stopped (container llm_cluster_engine is exited)"),
    ({"Status": "running", "StartedAt": "2026-12-03T05:20:00Z"}, "started again"),
])
def test_a_failure_of_a_run_that_ended_while_it_was_asked_is_not_counted(server, after, gone):
    # An API front whose core was killed answers 500, then exits some seconds later; Docker starts it again.
    Engine.mode = "error"
    started = "2026-12-03T05:00:00Z"
    runner = Exiting(after, container={"Status": "running", "StartedAt": started})
    conf = config(server, runtime="container", name="llm_cluster_engine", unit=UNIT, failures=1)
    state = step(conf, {"instance": started, "answered": True, "failures": 0}, runner, watchdog.parse_docker_time(started) + 1000, 0.0)
    assert state["result"] == "engine down" and state["failures"] == 0 and runner.restarts == []
    assert state["detail"].startswith("%s while it was asked (HTTP 500 Internal Server Error)" % gone), state["detail"]
    # Still running the same run: the failure counts, and with failures=1 it restarts.
    runner = Runner(container={"Status": "running", "StartedAt": started})
    state = step(conf, {"instance": started, "answered": True}, runner, watchdog.parse_docker_time(started) + 1000, 0.0)
    assert runner.restarts == [["systemctl", "restart", UNIT]]


def test_a_new_run_of_the_engine_starts_counting_afresh(server):
    Engine.mode = "error"
    runner = Runner(running("c3", entered_s=1995.0))
    state = step(config(server), {"instance": "old", "failures": 2, "answered": True}, runner, 100.0, 2000.0)
    assert state["result"] == "starting" and state["failures"] == 0 and runner.restarts == []


def test_restarts_are_rate_limited_and_the_watchdog_holds(server):
    Engine.mode = "empty"
    runner = Runner(running())
    conf = config(server, failures=1, max_restarts=2, window=3600)
    state = step(conf, {}, runner, 100.0, 2000.0)
    assert state["last_error"] == "the answer has no completion token" and len(runner.restarts) == 1
    runner.props = running("d4", entered_s=1000.0)
    state = step(conf, state, runner, 200.0, 2100.0)
    assert len(runner.restarts) == 2
    runner.props = running("e5", entered_s=1000.0)
    state = step(conf, state, runner, 300.0, 2200.0)
    assert len(runner.restarts) == 2 and state["result"] == "held" and state["held"] is True
    assert "not restarting: 2 restarts in the last 3600s (serve_watchdog_max_restarts)" in state["detail"]
    # An hour after the first restart, one slot is free again.
    state = step(conf, state, runner, 3701.0, 5601.0)
    assert len(runner.restarts) == 3 and state["result"] == "restarted" and len(state["restarts"]) == 2


def test_a_failed_restart_is_recorded_with_systemd_s_words(server):
    Engine.mode = "error"
    runner = Runner(running(), restart_rc=1)
    state = step(config(server, failures=1), {}, runner, 100.0, 2000.0)
    assert state["result"] == "restart failed" and state["restarts"][0]["ok"] is False
    assert state["restarts"][0]["output"] == "Job failed."


def test_the_container_runtime_restarts_the_container(server):
    Engine.mode = "hang"
    started = "2026-12-03T05:00:00.123456789Z"
    runner = Runner(container={"Status": "running", "StartedAt": started, "Pid": 42})
    conf = config(server, runtime="container", name="llm_cluster_engine", unit=UNIT, failures=1)
    at = watchdog.parse_docker_time(started) + 1000
    state = step(conf, {}, runner, at, 0.0)
    assert state["engine"]["age_s"] == pytest.approx(1000, abs=0.01)
    assert runner.restarts == [["systemctl", "restart", UNIT]]
    gone = Runner(container=None)
    state = step(conf, {}, gone, at, 0.0)
    assert state["result"] == "engine down" and "No such object" in state["detail"]


def test_an_unreachable_endpoint_counts_with_the_socket_s_reason():
    runner = Runner(running())
    state = step(config("http://127.0.0.1:9"), {}, runner, 100.0, 2000.0)
    assert state["result"] == "failing" and "refused" in state["last_error"].lower()


def follower(url, **extra):
    return config(url, mode="follower", api_key="", model="", **extra)


def test_a_follower_reads_the_api_node_s_health_without_the_key(server):
    Engine.health, Engine.seen[:] = 200, []
    state = step(follower(server), {}, Runner(running()), 100.0, 2000.0)
    assert state["result"] == "ok" and state["last_ok_at"] == 100.0
    assert Engine.seen == [{"path": "/health", "auth": None}]


def test_a_follower_that_joined_the_engine_that_went_away_restarts_once(server):
    # The headless rank started at 1,000 s (monotonic 1000 of 2000), the API node was healthy at 100.
    runner = Runner(running("r1", entered_s=1000.0))
    Engine.health = 200
    state = step(follower(server, failures=2), {}, runner, 100.0, 2000.0)
    Engine.health = 503
    state = step(follower(server, failures=2), state, runner, 130.0, 2030.0)
    assert state["result"] == "failing" and state["last_error"] == "the API node's /health: HTTP 503 Service Unavailable"
    state = step(follower(server, failures=2), state, runner, 160.0, 2060.0)
    assert runner.restarts == [["systemctl", "restart", "llm-cluster-engine.service"]] and state["result"] == "restarted"
    assert state["restarts"][0]["reason"].endswith(
        "this engine ran while the API node was last seen healthy and had joined the engine that went away")
    # Before the restart it read its engine's log of the last 30 s for the waiting line (none: it had joined).
    assert ["journalctl", "--unit", "llm-cluster-engine.service", "--since", "@130", "--output", "cat", "--no-pager",
            "--quiet"] in runner.calls
    # The restarted rank started after the API node was last seen healthy: it joins the new engine, and is
    # never restarted again in this outage.
    runner.props = running("r2", entered_s=2065.0)
    for at in (190.0, 220.0, 250.0, 280.0):
        state = step(follower(server, failures=2), state, runner, at, at + 1900.0)
    assert len(runner.restarts) == 1 and state["result"] == "waiting"
    assert "this engine started after the API node was last seen healthy" in state["detail"]


class Logging(Runner):
    """A runner whose engine log (journalctl or docker logs) holds ``log``."""

    def __init__(self, log, **kwargs):
        super().__init__(**kwargs)
        self.log = log

    def __call__(self, argv):
        if argv[0] == "journalctl" or argv[:2] == ["docker", "logs"]:
            self.calls.append(argv)
            # docker logs writes the container's stderr to its own stderr: vLLM's lines may come on either.
            return subprocess.CompletedProcess(argv, 0, "", self.log)
        return super().__call__(argv)


# vLLM 0.32's line while a headless rank waits to be taken in (the container scenario's engine log).
WAITING_LINE = "(EngineCore_DP1 pid=23) INFO 12-07 08:15:32 [core.py:1247] Waiting for READY message from DP Coordinator...\n"


@pytest.mark.parametrize("runtime", ["host", "container"])
def test_a_follower_whose_rank_waits_to_be_taken_in_is_not_restarted(server, runtime):
    # Started alone (its node rebooted) while the API node served: it saw /health answer, but its log says it
    # waits for the DP coordinator. When the API node's engine restarts, it joins the new one by itself.
    container = {"Status": "running", "StartedAt": "2026-12-07T08:00:00.000000000Z"}
    runner = Logging(WAITING_LINE, props=running("w1", entered_s=1000.0), container=container)
    conf = follower(server, failures=2, runtime=runtime, name="openeuler_llm" if runtime == "container" else
                    "llm-cluster-engine.service", unit=UNIT if runtime == "container" else "")
    started = watchdog.parse_docker_time(container["StartedAt"])
    Engine.health = 200
    state = step(conf, {}, runner, started + 100.0, 2000.0)
    Engine.health = 503
    for at in (130.0, 160.0, 190.0):
        state = step(conf, state, runner, started + at, 1900.0 + at)
    assert runner.restarts == [] and state["result"] == "waiting" and state["failures"] == 3
    assert state["detail"].endswith("not restarting: this rank waits for the DP coordinator (its log within 30s: "
                                    "Waiting for READY message from DP Coordinator...), so it joins the API node's "
                                    "next engine by itself")
    logs = [call for call in runner.calls if call[0] == "journalctl" or call[:2] == ["docker", "logs"]]
    assert logs[-1] == (["docker", "logs", "--since", "30s", "openeuler_llm"] if runtime == "container" else
                        ["journalctl", "--unit", "llm-cluster-engine.service", "--since", "@%d" % (started + 160.0),
                         "--output", "cat", "--no-pager", "--quiet"])
    # Once it stopped waiting (joined) and the engine goes away again, it is restarted as a joined rank.
    Engine.health = 200
    state = step(conf, state, runner, started + 220.0, 2120.0)
    runner.log = "(EngineCore_DP1 pid=23) INFO 12-07 08:20:02 [core.py:1032] EngineCore started.\n"
    Engine.health = 503
    for at in (250.0, 280.0):
        state = step(conf, state, runner, started + at, 1900.0 + at)
    assert len(runner.restarts) == 1 and state["result"] == "restarted"


def test_a_follower_whose_rank_started_while_the_api_node_served_is_not_restarted(server):
    # The API node serves from 100 on (seen at 100 and 130); the rank restarts alone at 140 (its node rebooted),
    # its engine not running yet at 145, and is seen with the API node healthy at 160. When the API node's engine goes away (190, 220), this rank
    # never joined it: it is left alone, without reading its log, and joins the next engine by itself.
    runner = Runner(running("a1", entered_s=500.0))
    Engine.health = 200
    state = step(follower(server, failures=2), {}, runner, 100.0, 2000.0)
    state = step(follower(server, failures=2), state, runner, 130.0, 2030.0)
    assert state["healthy_since"] == 100.0
    # Its own engine down for a check on the way (the node booting): that says nothing about the API node.
    runner.props = {"ActiveState": "activating", "SubState": "start", "InvocationID": "", "ActiveEnterTimestampMonotonic": "0"}
    state = step(follower(server, failures=2), state, runner, 145.0, 2045.0)
    assert state["result"] == "engine down"
    runner.props = running("a2", entered_s=2040.0)
    state = step(follower(server, failures=2), state, runner, 160.0, 2060.0)
    assert state["healthy_since"] == 100.0 and state["last_ok_at"] == 160.0
    # One read that fails on a loaded host (fewer than the count) says nothing either.
    Engine.health = 503
    state = step(follower(server, failures=2), state, runner, 170.0, 2070.0)
    Engine.health = 200
    state = step(follower(server, failures=2), state, runner, 175.0, 2075.0)
    assert state["healthy_since"] == 100.0 and state["last_ok_at"] == 175.0 and runner.restarts == []
    Engine.health = 503
    for at in (190.0, 220.0, 250.0):
        state = step(follower(server, failures=2), state, runner, at, at + 1900.0)
    assert runner.restarts == [] and state["result"] == "waiting" and state["failures"] == 3
    assert "not restarting: this engine started while the API node's engine was serving (answering since " in state["detail"]
    assert [call for call in runner.calls if call[0] == "journalctl"] == []
    # The next engine answers: the rank has joined it, and is restarted when that one goes away.
    Engine.health = 200
    state = step(follower(server, failures=2), state, runner, 280.0, 2180.0)
    assert state["healthy_since"] == 280.0
    Engine.health = 503
    for at in (310.0, 340.0):
        state = step(follower(server, failures=2), state, runner, at, at + 1900.0)
    assert len(runner.restarts) == 1 and state["result"] == "restarted"


def test_a_follower_restarted_with_the_api_node_by_a_deploy_is_left_alone(server):
    # A deploy restarts the API node's engine, then this one: the API node is still loading (no /health),
    # and this rank started after it was last seen healthy.
    Engine.health = 200
    runner = Runner(running("d1", entered_s=500.0))
    state = step(follower(server, failures=2), {}, runner, 100.0, 2000.0)
    Engine.health = 503
    runner.props = running("d2", entered_s=2010.0)
    for at in (130.0, 160.0, 190.0):
        state = step(follower(server, failures=2), state, runner, at, at + 1900.0)
    assert runner.restarts == [] and state["result"] == "waiting"


def test_a_follower_that_never_saw_the_api_node_healthy_does_not_restart():
    runner = Runner(running())
    state = {}
    for at in (100.0, 130.0, 160.0, 190.0):
        state = step(follower("http://127.0.0.1:9", failures=2), state, runner, at, at + 1900.0)
    assert runner.restarts == [] and state["result"] == "waiting"
    assert "not restarting: no check has seen the API node healthy yet" in state["detail"]
    assert "refused" in state["last_error"].lower()


def test_a_deploy_s_pause_holds_both_modes_and_runs_out_by_itself(server, tmp_path):
    pause = tmp_path / "watchdog.pause"
    pause.write_text("600\n")
    mtime = pause.stat().st_mtime
    Engine.mode, Engine.health, Engine.seen[:] = "error", 503, []
    runner = Runner(running())
    for conf in (config(server, failures=1, pause_file=str(pause)), follower(server, failures=1, pause_file=str(pause))):
        state = step(conf, {"last_ok_at": 1.0, "failures": 5}, runner, mtime + 10, 2000.0)
        assert state["result"] == "paused" and state["failures"] == 0
        assert state["detail"] == "a deploy holds the engine (%s), 590s left" % pause
    # Nothing sent to the engine; the follower only read the API node's open /health (503: nothing recorded).
    assert Engine.seen == [{"path": "/health", "auth": None}] and runner.calls == []
    assert state["last_ok_at"] == 1.0
    # 600 s after the file's time the pause is over: a run that died midway leaves the engine watched.
    state = step(config(server, failures=1, pause_file=str(pause)), {}, runner, mtime + 601, 2000.0)
    assert state["result"] == "restarted"
    pause.write_text("not a number")
    assert watchdog.paused({"pause_file": str(pause)}, mtime) == 0
    assert watchdog.paused({"pause_file": str(tmp_path / "absent")}, mtime) == 0


def test_a_follower_that_sees_the_api_node_serve_while_held_counts_it_as_seen(server, tmp_path):
    # Its engine restarted (and joined the new API engine) just before a pause; the API node served during the
    # pause; then the API node's engine went away. Its rank belongs to that engine: restart it.
    pause = tmp_path / "watchdog.pause"
    pause.write_text("600\n")
    mtime = pause.stat().st_mtime
    conf = follower(server, failures=2, pause_file=str(pause))
    runner = Runner(running("e1", entered_s=1950.0))
    Engine.health = 200
    # Before the deploy the API node had served since mtime - 500: its new engine serves from the pause's answer.
    state = step(conf, {"result": "ok", "last_ok_at": mtime - 100, "healthy_since": mtime - 500}, runner, mtime + 10, 2000.0)
    assert state["result"] == "paused" and state["last_ok_at"] == mtime + 10 and runner.restarts == []
    assert state["healthy_since"] == mtime + 10
    pause.unlink()
    Engine.health = 503
    for at in (mtime + 40, mtime + 70):
        state = step(conf, state, runner, at, at - mtime + 1990.0)
    assert len(runner.restarts) == 1 and state["result"] == "restarted", state


@pytest.mark.parametrize("content, message", [
    ({"url": "http://x", "model": "m", "api_key": "k", "runtime": "host", "name": "u"}, "missing state_file"),
    ({"url": "http://x", "model": "m", "api_key": "", "runtime": "host", "name": "u", "state_file": "/s"}, "missing api_key"),
    ({"url": "http://x", "model": "m", "api_key": "k", "runtime": "podman", "name": "u", "state_file": "/s"},
     "runtime must be host or container, not 'podman'"),
    ({"url": "http://x", "model": "m", "api_key": "k", "runtime": "container", "name": "c", "state_file": "/s"},
     "missing unit (the container runtime restarts its container through the unit that binds it to the perimeter)"),
    ({"url": "http://x", "runtime": "host", "name": "u", "state_file": "/s", "mode": "observer"},
     "mode must be leader or follower, not 'observer'"),
    ({"runtime": "host", "name": "u", "state_file": "/s", "mode": "follower"}, "missing url"),
])
def test_a_bad_configuration_is_named_and_exits_2(tmp_path, capsys, content, message):
    path = tmp_path / "watchdog.json"
    path.write_text(json.dumps(content))
    assert watchdog.main(["--config", str(path)]) == 2
    assert message in capsys.readouterr().out


def test_the_state_file_is_replaced_whole_and_a_broken_one_is_a_fresh_start(tmp_path):
    path = tmp_path / "state.json"
    watchdog.save_state(str(path), {"result": "ok"})
    assert json.loads(path.read_text()) == {"result": "ok"} and oct(path.stat().st_mode & 0o777) == "0o644"
    path.write_text("{truncated")
    assert watchdog.load_state(str(path)) == {}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_status_shows_the_watchdog_s_state_and_its_restarts():
    state = {"result": "restarted", "detail": "systemctl restart llm-cluster-engine.service: 3 failed", "failures": 0,
             "restarts": [{"at": 160.0, "reason": "3 failed completion(s) in a row", "ok": True, "command": "x",
                           "output": ""}], "checked_at": 160.0}
    doc = _serve.watchdog_status({"enabled": True, "state": state})
    assert doc["result"] == "restarted" and doc["restarts"] == [{"at": 160.0, "reason": "3 failed completion(s) in a row",
                                                                 "ok": True}]
    assert _serve._watchdog_line(doc) == ("watchdog: restarted, 1 restart(s) in its window; "
                                          "systemctl restart llm-cluster-engine.service: 3 failed")
    assert _serve.watchdog_status({"enabled": True, "state": None})["result"] == "not run yet"
    assert _serve.watchdog_status({"enabled": False}) is None
    assert _serve._watchdog_line(None) == "watchdog: off (serve_watchdog)"


def test_the_endpoint_document_carries_the_api_node_s_watchdog_and_each_headless_node_s():
    plan = _serve.plan([{"host": "n%d" % i, "address": "10.0.0.%d" % (i + 1), "accelerator": "cpu", "count": 0}
                        for i in range(2)], {"topology": "dp", "model_path": "/m", "model_name": "tiny"})
    leader = {"result": "ok", "restarts": [], "failures": 0}
    follower = {"result": "waiting", "detail": "2 failed read(s) in a row", "restarts": [{"at": 1.0, "reason": "r", "ok": True}]}
    doc = _serve.status([{"host": "n0", "state": "", "watchdog": {"enabled": True, "state": leader}},
                         {"host": "n1", "state": "", "watchdog": {"enabled": True, "state": follower}}],
                        plan, {"url": "http://10.0.0.1:8000", "probe": {}})
    assert doc["watchdog"]["result"] == "ok" and doc["nodes"][1]["watchdog"]["result"] == "waiting"
    lines = _serve.status_table(doc)
    assert "watchdog: ok, 0 restart(s) in its window" in lines
    assert "  n1 (headless): watchdog: waiting, 1 restart(s) in its window; 2 failed read(s) in a row" in lines
