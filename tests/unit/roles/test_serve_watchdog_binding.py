# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The watchdog keeps an engine's threads on their CPUs after the engine restarted (binding_file).

Real processes titled as vLLM titles them (an engine core with a thread of its own and a worker child, a
DP10 engine and an API server beside them), the planner's own regular expressions, the real kernel's
affinity calls: what the watchdog binds is read back with sched_getaffinity.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _planner
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _binding, _serve
from role_files import load_role_file

watchdog = load_role_file("serve", "llm_cluster_watchdog.py")
LAYOUT = {"tp_size": 1, "dp_size": 2, "expert_parallel": False}
# An engine core: a thread of its own, and a worker child titled as vLLM titles it (argv[0]).
ENGINE_CODE = ("import subprocess, threading, time\n"
               "threading.Thread(target=time.sleep, args=(120,), daemon=True).start()\n"
               "subprocess.Popen(['VLLM::Worker', '120'], executable='/bin/sleep')\n"
               "time.sleep(120)\n")


def titled(title, code="import time; time.sleep(120)"):
    return subprocess.Popen(["bash", "-c", 'exec -a "$0" %s -c "$1"' % sys.executable, title, code])


def children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid), encoding="ascii") as handle:
        return [int(child) for child in handle.read().split()]


def title_of(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as handle:
        return handle.read().decode("utf-8", "replace")


def tids(pid):
    return sorted(int(name) for name in os.listdir("/proc/%d/task" % pid))


@pytest.fixture
def cpus():
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs to tell a binding from none")
    return allowed


@pytest.fixture
def engine(cpus):
    procs = [titled("VLLM::EngineCore_DP0", ENGINE_CODE), titled("VLLM::EngineCore_DP10"), titled("VLLM::APIServer")]
    deadline = time.monotonic() + 30
    while True:
        kids = children(procs[0].pid) if os.path.exists("/proc/%d" % procs[0].pid) else []
        # The worker once it has exec'd (until then a fork carries the engine's title) and the engine's thread.
        if kids and title_of(kids[0]).startswith("VLLM::Worker") and len(tids(procs[0].pid)) >= 2:
            break
        assert time.monotonic() < deadline, "the engine stand-in did not start its thread and worker"
        time.sleep(0.1)
    yield {"core": procs[0].pid, "worker": kids[0], "dp10": procs[1].pid, "api": procs[2].pid}
    for proc in procs:
        proc.kill()
        proc.wait()
    for kid in kids:
        try:
            os.kill(kid, 9)
        except ProcessLookupError:
            pass


def binding_file(tmp_path, engine_cores, worker_cores):
    # The rules the binding step writes: the planner's regular expressions, through the serve role's filter.
    plan = {"groups": [{"engine_match": _planner._engine_match(0, LAYOUT), "engine_cores": engine_cores,
                        "workers": [{"match": _planner._worker_match(0, LAYOUT),
                                     "parent_match": _planner._engine_match(0, LAYOUT), "cores": worker_cores}]}]}
    path = tmp_path / "engine-binding.json"
    path.write_text(json.dumps({"rules": _binding.affinity_rules(plan)}), encoding="utf-8")
    return str(path)


def PIDS(engine):  # noqa: N802 (reads as the constant it stands for)
    # Only the stand-ins: a real engine elsewhere on this machine (a test scenario's node) is not this test's.
    return list(engine.values())


def affinity(pid):
    return {tid: sorted(os.sched_getaffinity(tid)) for tid in tids(pid)}


def test_a_restarted_engine_s_threads_go_back_to_their_cpus_and_nothing_else_moves(tmp_path, engine, cpus):
    rules = watchdog.load_binding(binding_file(tmp_path, [cpus[0]], [cpus[1]]))
    untouched = {engine["dp10"]: affinity(engine["dp10"]), engine["api"]: affinity(engine["api"])}
    before = {pid: affinity(pid) for pid in (engine["core"], engine["worker"])}
    originals = {}
    moved = watchdog.rebind(rules, originals, pids=PIDS(engine))
    assert {entry["pid"] for entry in moved} == {engine["core"], engine["worker"]}
    assert affinity(engine["core"]) == {tid: [cpus[0]] for tid in tids(engine["core"])}
    assert len(affinity(engine["core"])) >= 2
    assert set(map(tuple, affinity(engine["worker"]).values())) == {(cpus[1],)}
    assert {pid: affinity(pid) for pid in untouched} == untouched
    # In place: the next check moves nothing.
    assert watchdog.rebind(rules, originals, pids=PIDS(engine)) == []
    # What each thread had before its first move, by TID, with its start time (a TID is reused).
    assert {int(tid): record["cpus"] for tid, record in originals.items()} == {
        tid: cpus_ for pid in before for tid, cpus_ in before[pid].items()}
    assert all(record["start"] > 0 for record in originals.values())
    # A thread moved off its CPUs (a new thread, or someone else's taskset) goes back; only that one.
    tid = tids(engine["core"])[-1]
    os.sched_setaffinity(tid, set(cpus))
    recorded = dict(originals)
    moved = watchdog.rebind(rules, originals, pids=PIDS(engine))
    assert originals == recorded  # the first original stays
    assert [(entry["pid"], entry["threads"], entry["cpus"]) for entry in moved] == [(engine["core"], 1, str(cpus[0]))]


def test_the_check_keeps_the_binding_only_while_the_engine_serves_and_says_what_moved(tmp_path, engine, cpus, capsys):
    config = {"name": "llm-cluster-engine.service", "binding_file": binding_file(tmp_path, [cpus[0]], [cpus[1]])}
    bind = functools.partial(watchdog.rebind, pids=PIDS(engine))
    whole = affinity(engine["core"])
    state = watchdog.keep_binding(config, {"result": "paused", "checked_at": 1.0}, bind)
    assert "last_moved" not in state["binding"] and sorted(os.sched_getaffinity(engine["core"])) == cpus
    state = watchdog.keep_binding(config, {"result": "ok", "checked_at": 2.0}, bind)
    assert state["binding"]["rules"] == 2
    assert state["binding"]["last_moved"]["at"] == 2.0
    assert {entry["pid"] for entry in state["binding"]["last_moved"]["processes"]} == {engine["core"], engine["worker"]}
    out = capsys.readouterr().out
    with open("/proc/%d/comm" % engine["core"], encoding="utf-8") as handle:
        comm = handle.read().strip()
    assert "llm-cluster-engine.service: bound %d thread(s) of %s (pid %d) back to CPUs %d" % (
        len(tids(engine["core"])), comm, engine["core"], cpus[0]) in out
    again = watchdog.keep_binding(config, dict(state, checked_at=3.0), bind)
    assert again["binding"]["last_moved"]["at"] == 2.0 and capsys.readouterr().out == ""
    # restore.yml removed the rules: the next check, whatever its result, puts every thread back, once.
    os.unlink(config["binding_file"])
    after = watchdog.keep_binding(config, dict(json.loads(json.dumps(again)), result="paused", checked_at=4.0), bind)
    assert affinity(engine["core"]) == whole
    assert after["binding"]["originals"] == {} and after["binding"]["rules"] == 0
    assert after["binding"]["last_restored"] == {"at": 4.0, "threads": len(whole) + len(tids(engine["worker"])),
                                                 "gone": 0, "errors": []}
    assert "binding rules removed: put %d thread(s) back" % after["binding"]["last_restored"]["threads"] in (
        capsys.readouterr().out)
    assert watchdog.keep_binding(config, dict(after, checked_at=5.0), bind)["binding"]["last_restored"]["at"] == 4.0


def test_a_thread_that_ended_is_not_put_back_and_its_record_goes(tmp_path, engine, cpus):
    config = {"name": "e", "binding_file": binding_file(tmp_path, [cpus[0]], [cpus[1]])}
    bind = functools.partial(watchdog.rebind, pids=PIDS(engine))
    state = watchdog.keep_binding(config, {"result": "ok"}, bind)
    assert str(engine["worker"]) in state["binding"]["originals"]
    # Killed: a zombie until its parent reaps it (this stand-in never does), which is as good as gone.
    os.kill(engine["worker"], 9)
    deadline = time.monotonic() + 10
    while watchdog.thread_start("/proc", engine["worker"], engine["worker"]) is not None:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    state = watchdog.keep_binding(config, dict(state, result="ok"), bind)
    assert str(engine["worker"]) not in state["binding"]["originals"]
    # A record whose thread ended (or whose TID now names another thread) is counted gone, never applied.
    originals = {str(engine["api"]): {"pid": engine["api"], "start": 1, "cpus": [cpus[0]]}}
    assert watchdog.unbind(originals) == (0, 1, [])
    assert sorted(os.sched_getaffinity(engine["api"])) == cpus


def test_no_binding_file_binds_nothing_and_a_broken_one_is_named(tmp_path, engine, cpus):
    config = {"name": "e", "binding_file": str(tmp_path / "absent.json")}
    bind = functools.partial(watchdog.rebind, pids=PIDS(engine))
    assert watchdog.keep_binding(config, {"result": "ok"}, bind)["binding"] == {"rules": 0}
    assert sorted(os.sched_getaffinity(engine["core"])) == cpus
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"rules": [{"cmdline": "^VLLM::", "cpus": []}]}), encoding="utf-8")
    state = watchdog.keep_binding(dict(config, binding_file=str(broken)), {"result": "ok"}, bind)
    assert state["binding"]["error"] == "%s: rule 0 has no CPUs or no selector" % broken
    broken.write_text(json.dumps({"rules": [{"cmdline": "([", "cpus": [0]}]}), encoding="utf-8")
    assert watchdog.keep_binding(dict(config, binding_file=str(broken)), {"result": "ok"}, bind)["binding"]["error"] == (
        "%s: rule 0: unterminated character set at position 1" % broken)
    assert sorted(os.sched_getaffinity(engine["core"])) == cpus


@pytest.mark.parametrize("value, expected", [(3, {3}), ("0-2,8", {0, 1, 2, 8}), ([1, "4-5"], {1, 4, 5}), ([], set())])
def test_cpu_lists_in_every_form_the_rules_take(value, expected):
    assert watchdog.cpu_numbers(value) == expected


def test_status_shows_the_binding_the_watchdog_keeps(tmp_path, engine, cpus):
    # The state a real check wrote, read the way status.yml and restore.yml read it.
    config = {"name": "e", "binding_file": binding_file(tmp_path, [cpus[0]], [cpus[1]])}
    bind = functools.partial(watchdog.rebind, pids=PIDS(engine))
    state = watchdog.keep_binding(config, {"result": "ok", "detail": "", "restarts": [], "checked_at": 7.0}, bind)
    state = json.loads(json.dumps(state))
    binding = _serve.watchdog_binding(state)
    threads = len(tids(engine["core"])) + len(tids(engine["worker"]))
    assert binding == {"rules": 2, "held": threads, "error": "", "last_moved": {"at": 7.0, "threads": threads},
                       "last_restored": {"at": None, "threads": 0, "gone": 0, "errors": []}}
    doc = _serve.watchdog_status({"enabled": True, "state": state})
    assert doc["binding"]["held"] == threads
    assert _serve._watchdog_line(doc) == ("watchdog: ok, 0 restart(s) in its window, keeps the binding (2 rule(s); "
                                          "last bound %d thread(s) back)" % threads)
    # A state from before the watchdog kept a binding, or none at all, reads as nothing held.
    assert _serve.watchdog_status({"enabled": True, "state": {"result": "ok"}})["binding"] is None
    assert _serve.watchdog_binding({})["held"] == 0 and _serve.watchdog_binding(None)["rules"] == 0
    broken = dict(state, binding={"rules": 0, "error": "x.json: rule 0 has no CPUs or no selector"})
    assert _serve._watchdog_line(_serve.watchdog_status({"enabled": True, "state": broken})) == (
        "watchdog: ok, 0 restart(s) in its window, binding not kept: x.json: rule 0 has no CPUs or no selector")


def test_a_thread_started_after_the_move_gets_its_main_thread_s_cpus_back(tmp_path, cpus):
    # An engine core that starts a thread once told to: the new thread takes its CPUs from the bound main thread.
    go = tmp_path / "go"
    code = ("import os, threading, time\n"
            "while not os.path.exists(%r): time.sleep(0.05)\n"
            "threading.Thread(target=time.sleep, args=(120,), daemon=True).start()\n"
            "time.sleep(120)\n" % str(go))
    proc = titled("VLLM::EngineCore_DP0", code)
    try:
        deadline = time.monotonic() + 30
        while not title_of(proc.pid).startswith("VLLM::EngineCore_DP0"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        rules = watchdog.load_binding(binding_file(tmp_path, [cpus[0]], [cpus[1]]))
        originals = {}
        assert [entry["pid"] for entry in watchdog.rebind(rules, originals, pids=[proc.pid])] == [proc.pid]
        go.write_text("", encoding="utf-8")
        while len(tids(proc.pid)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        late = tids(proc.pid)[-1]
        assert str(late) not in originals and sorted(os.sched_getaffinity(late)) == [cpus[0]]
        assert watchdog.unbind(originals) == (2, 0, [])
        assert affinity(proc.pid) == {tid: cpus for tid in tids(proc.pid)}
    finally:
        proc.kill()
        proc.wait()
