# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Inference watchdog of the aihost.llm_cluster serve role.

Run by llm-cluster-watchdog.timer, one check per run.

On the API node (mode ``leader``) it sends a one-token completion through the
endpoint. An engine can answer /health with 200 while it serves nothing (its
core hung, a collective stuck); only a completion proves inference. After
``failures`` failed completions in a row it restarts the engine (the unit, or
the container); at most ``max_restarts`` times in ``window`` seconds, then it
holds and says so. It never counts a failure while the engine is not running
(systemd's Restart=always or Docker's restart policy is already bringing it
back), nor one of a run that stopped or was replaced while it was asked (it
looks again after a failed completion: an API front exits some seconds after
its core died, and a loaded host stretches those seconds), nor while a freshly started engine is inside its start grace and has
not answered yet (loading weights).

On a headless data-parallel node (mode ``follower``) it reads the API node's
/health (open without the key). A headless rank joins the API node's engine
once, when both start; when that engine restarts, the new one waits for every
rank to join it again. So after ``failures`` failed reads in a row, a follower
restarts its own engine if that engine started before the API node was last
seen healthy (it belongs to the engine that went away), and never an engine
that started after (it has joined the new one, or is joining it). A rank that
started alone and waits for an API node's engine that never takes it in (its
node rebooted) also saw that /health answer, which cannot tell it from a rank
that had joined. Two things can: an engine takes in its ranks when it starts,
so a rank that started after the API node's engine began answering (the first
answer after ``failures`` failed reads in a row, ``healthy_since``) never joined it; and vLLM logs
"Waiting for READY message from DP Coordinator..." every 10 s while a rank
waits (a rank that logged it within the last WAITING_WINDOW seconds). Either
way the rank is left alone: it joins the API node's next engine by itself. A third needs neither a
timing nor vLLM's wording: a rank that was taken in holds TCP connections to the API node (the data-parallel
engine's sockets, which its processes connect to once it joins), and a rank waiting to be taken in holds
none. At every check that sees the API node healthy a follower counts its engine's established connections
to the API node's address (``api_address``, from /proc: the engine's processes' sockets in its own network
namespace); a rank that held none at the last such check is left alone when the API node goes away.
Restarting it instead raced that engine's start: a rank killed after it had
joined took the new engine down again, and one started just before the new
API front lost its handshake and waited five minutes.

While a deploy restarts the engines in its own order it writes a pause file
(``pause_file``: the seconds the pause lasts, counted from the file's mtime, so
a deploy that dies midway does not switch the watchdog off for good): nothing
counts and nothing restarts until it is removed or runs out.

On every node it runs on, while the engine serves, it also keeps the engine's threads on the CPUs the
last deploy bound them to (``binding_file``, written by the binding step: its rules, each a set of
regular expressions on the process title, the parent's title or the unit, and the CPUs). The kernel
forgets a thread's affinity when the process ends: after the engine restarts (by systemd, Docker, a
reboot or this watchdog) its new threads would run anywhere until the next deploy. Each check binds
what matches and is not on its CPUs yet, threads started since included; it never touches a thread
already in place, and nothing while a deploy holds the engine. The CPUs each thread had before its
first move are kept in the state; once the rules are gone (restore.yml removes them, then runs a check)
the threads that still run are put back on them.

Every decision is one line in the journal and the whole state is in
``state_file`` (JSON), which status.yml reads. Where the monitoring step made
node_exporter's textfile directory, the state is also written there as
Prometheus gauges (``textfile``: llm_cluster_watchdog_serving, _failures,
_restarts, _held, _last_check_timestamp_seconds, _result), which the
monitoring role's alerts read. Standard library only;
configuration in a root-only JSON file (on the API node it holds the API key),
given with --config.
"""

import argparse
import concurrent.futures
import datetime
import ipaddress
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

# What a headless vLLM rank logs every 10 s while it waits to be taken in (vllm/v1/engine/core.py), and how far
# back a follower reads its engine's log for it.
WAITING = "Waiting for READY message from DP Coordinator"
WAITING_WINDOW = 30

REQUIRED = {"leader": ("url", "model", "api_key", "runtime", "name", "state_file"),
            "follower": ("url", "runtime", "name", "state_file")}
DEFAULTS = {"mode": "leader", "ranks": 0, "failures": 3, "timeout": 60, "start_grace": 900, "max_restarts": 3, "window": 3600,
            "ca_path": "", "pause_file": "", "binding_file": "", "textfile": "", "api_address": ""}


def log(message):
    print(message, flush=True)


def load_config(path):
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    mode = config.get("mode", "leader")
    if mode not in REQUIRED:
        raise ValueError("%s: mode must be leader or follower, not %r" % (path, mode))
    missing = [key for key in REQUIRED[mode] if not config.get(key)]
    if missing:
        raise ValueError("%s: missing %s" % (path, ", ".join(missing)))
    if config["runtime"] not in ("host", "container"):
        raise ValueError("%s: runtime must be host or container, not %r" % (path, config["runtime"]))
    if config["runtime"] == "container" and not config.get("unit"):
        raise ValueError("%s: missing unit (the container runtime restarts its container through the unit that binds "
                         "it to the perimeter)" % path)
    merged = dict(DEFAULTS)
    merged.update(config)
    return merged


def load_state(path):
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def save_state(path, state):
    directory = os.path.dirname(path) or "."
    handle, temp = tempfile.mkstemp(dir=directory, prefix=".watchdog-")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(state, out, indent=2, sort_keys=True)
        out.write("\n")
    os.chmod(temp, 0o644)
    os.replace(temp, path)


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, errors="replace", check=False)


def _label(value):
    """A Prometheus label value: backslash, double quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def metrics_text(config, state):
    """The state as Prometheus text for node_exporter's textfile collector."""
    labels = 'engine="%s",mode="%s"' % (_label(config["name"]), _label(config["mode"]))
    result = str(state.get("result") or "unknown")
    families = (
        ("serving", "1 when the last check found the engine serving: a completion answered (API node, replica) or "
                    "the API node's /health (a headless rank)", 1 if result == "ok" else 0),
        ("failures", "Failed completions (reads on a headless rank) in a row at the last check", int(state.get("failures") or 0)),
        ("restarts", "Engine restarts by the watchdog inside its window", len(state.get("restarts") or [])),
        ("held", "1 when the watchdog restarted the engine max_restarts times in its window and restarts it no more",
         1 if state.get("held") else 0),
        ("last_check_timestamp_seconds", "When the watchdog last checked (Unix time)", float(state.get("checked_at") or 0)),
    )
    lines = []
    for name, text, value in families:
        lines += ["# HELP llm_cluster_watchdog_%s %s" % (name, text), "# TYPE llm_cluster_watchdog_%s gauge" % name,
                  "llm_cluster_watchdog_%s{%s} %s" % (name, labels, repr(value) if isinstance(value, float) else value)]
    lines += ["# HELP llm_cluster_watchdog_result The last check's result, as a label (ok, starting, paused, failing, "
              "restarted, restart failed, engine down, held, waiting)",
              "# TYPE llm_cluster_watchdog_result gauge",
              'llm_cluster_watchdog_result{%s,result="%s"} 1' % (labels, _label(result))]
    return "\n".join(lines) + "\n"


def write_metrics(config, state):
    """The state for node_exporter (config ``textfile``), where the monitoring step made its textfile directory;
    nothing without it. Written whole and renamed, as the collector reads it at any moment."""
    path = config.get("textfile") or ""
    directory = os.path.dirname(path)
    if not path or not os.path.isdir(directory):
        return False
    handle, temp = tempfile.mkstemp(dir=directory, prefix=".llm_cluster_watchdog-")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(metrics_text(config, state))
    os.chmod(temp, 0o644)
    os.replace(temp, path)
    return True


def parse_docker_time(text):
    """Docker's StartedAt: RFC 3339 with nanoseconds and Z."""
    text = text.strip().replace("Z", "+00:00")
    if "." in text:
        head, rest = text.split(".", 1)
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits):]
        text = "%s.%s%s" % (head, (digits + "000000")[:6], zone)
    return datetime.datetime.fromisoformat(text).timestamp()


def engine_state(config, runner=run, now=time.time, monotonic=time.monotonic):
    """(running, instance, age in seconds, description, main PID or 0) of the engine."""
    if config["runtime"] == "host":
        unit = config["name"]
        result = runner(["systemctl", "show", unit,
                         "--property=ActiveState,SubState,InvocationID,ActiveEnterTimestampMonotonic,MainPID"])
        props = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
        running = props.get("ActiveState") == "active" and props.get("SubState") == "running"
        entered = int(props.get("ActiveEnterTimestampMonotonic") or 0)
        age = max(0.0, monotonic() - entered / 1e6) if entered else 0.0
        described = "%s is %s/%s" % (unit, props.get("ActiveState", "unknown"), props.get("SubState", "unknown"))
        return running, props.get("InvocationID", ""), age, described, _pid(props.get("MainPID"))
    name = config["name"]
    result = runner(["docker", "inspect", "--format", "{{json .State}}", name])
    if result.returncode != 0:
        return False, "", 0.0, "container %s: %s" % (name, (result.stderr or result.stdout).strip() or "not found"), 0
    state = json.loads(result.stdout)
    started = state.get("StartedAt", "")
    age = max(0.0, now() - parse_docker_time(started)) if started else 0.0
    return (state.get("Status") == "running", started, age, "container %s is %s" % (name, state.get("Status", "unknown")),
            _pid(state.get("Pid")))


def _pid(value):
    """A process ID from systemctl's MainPID or Docker's State.Pid, 0 when there is none."""
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def fetch(config, request, opener=urllib.request.urlopen):
    """(body, '') or (None, why) for one request within the configured timeout."""
    context = ssl.create_default_context(cafile=config["ca_path"]) if config["ca_path"] else None
    try:
        with opener(request, timeout=config["timeout"], context=context) as response:
            return response.read(), ""
    except urllib.error.HTTPError as err:
        return None, "HTTP %s %s" % (err.code, err.reason)
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        if isinstance(reason, TimeoutError) or isinstance(err, TimeoutError):
            return None, "no answer within %ss" % config["timeout"]
        return None, str(reason)


def complete(config, opener=urllib.request.urlopen, rank=None):
    """One one-token completion (to one data-parallel rank when rank is given): (True, '') or (False, why)."""
    body = json.dumps({"model": config["model"], "prompt": "ping", "max_tokens": 1, "temperature": 0,
                       "ignore_eos": True}).encode()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + config["api_key"]}
    if rank is not None:
        # vLLM's API server sends a request with this header to that rank's engine, not the least loaded one.
        headers["X-data-parallel-rank"] = str(rank)
    request = urllib.request.Request(config["url"].rstrip("/") + "/v1/completions", data=body, method="POST",
                                     headers=headers)
    raw, why = fetch(config, request, opener)
    if raw is None:
        return False, why
    try:
        answer = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return False, "the answer is not JSON"
    tokens = (answer.get("usage") or {}).get("completion_tokens") or 0 if isinstance(answer, dict) else 0
    if tokens < 1:
        return False, "the answer has no completion token"
    return True, ""


def complete_all(config, opener=urllib.request.urlopen):
    """A completion to every data-parallel rank at once (one without a rank when ``ranks`` < 2).

    With data parallelism the API server sends a request to the least loaded rank; a hung rank keeps its
    requests, so it looks loaded and gets no new ones, and a plain completion would mostly succeed while
    every request that rank still holds hangs. Asking each rank by name finds it.
    """
    ranks = list(range(config.get("ranks") or 0)) if (config.get("ranks") or 0) > 1 else [None]
    with concurrent.futures.ThreadPoolExecutor(len(ranks)) as pool:
        results = list(pool.map(lambda rank: complete(config, opener, rank), ranks))
    failed = ["%s%s" % ("" if rank is None else "rank %d: " % rank, why)
              for rank, (ok, why) in zip(ranks, results) if not ok]
    return not failed, "; ".join(failed)


def healthy(config, opener=urllib.request.urlopen):
    """The API node's /health (open without the key): (True, '') or (False, why)."""
    raw, why = fetch(config, config["url"].rstrip("/") + "/health", opener)
    return raw is not None, "" if raw is not None else "the API node's /health: " + why


def restart(config, runner=run):
    # The container runtime: the unit that binds the container to the perimeter (engine-container.service.j2).
    # Its restart stops and starts the container, and starts the firewall guard first when it is down: the
    # engine never runs again without the table, as a docker restart would have it.
    argv = ["systemctl", "restart", config["name"] if config["runtime"] == "host" else config["unit"]]
    result = runner(argv)
    return result.returncode == 0, " ".join(argv), (result.stderr or result.stdout).strip()


def paused(config, at):
    """Seconds left of a pause a deploy set (the pause file: its mtime plus the seconds it holds), else 0."""
    path = config.get("pause_file")
    if not path:
        return 0
    try:
        with open(path, encoding="utf-8") as handle:
            seconds = float(handle.read().strip() or 0)
        left = os.stat(path).st_mtime + seconds - at
    except (OSError, ValueError):
        return 0
    return max(0, left)


def check(config, state, runner=run, opener=urllib.request.urlopen, now=time.time, monotonic=time.monotonic,
          proc_root="/proc"):
    """One watchdog step: returns the new state."""
    at = now()
    left = paused(config, at)
    if left:
        # A deploy is restarting the engines in its own order: nothing counts, nothing restarts.
        state = dict(state)
        if state.get("result") != "paused":
            # The deploy may start the API node's engine again: when it serves is known from its next answer.
            state.pop("healthy_since", None)
        state.update(checked_at=at, result="paused", failures=0,
                     detail="a deploy holds the engine (%s), %ds left" % (config["pause_file"], left))
        if config.get("mode") == "follower":
            if not healthy(config, opener)[0]:
                state["api_failed_reads"] = state.get("api_failed_reads", 0) + 1
            else:
                state["api_failed_reads"] = 0
                # Seen serving while held: every rank has joined the API node's engine, this one included, so once
                # that engine goes away this one belongs to it. Without this, a node restarted just before a pause
                # kept "waiting" for good (it had never seen the API node healthy since).
                state["last_ok_at"] = at
                state.setdefault("healthy_since", at)
                # What the last count of this engine's connections said is out of date: it has joined since.
                state.pop("api_connections", None)
        return state
    running, instance, age, described, pid = engine_state(config, runner, now, monotonic)
    state = dict(state)
    state["checked_at"] = at
    state["engine"] = {"running": running, "instance": instance, "age_s": round(age, 1), "state": described}
    restarts = [r for r in state.get("restarts", []) if at - r.get("at", 0) < config["window"]]
    state["restarts"] = restarts
    if instance != state.get("instance"):
        # A new run of the engine (started, restarted by systemd, Docker or us): it has not answered yet.
        state["instance"] = instance
        state["answered"] = False
        state["failures"] = 0
    if not running:
        state.update(result="engine down", failures=0,
                     detail="%s; not counted: its unit or container restarts it" % described)
        log("%s: not counted, the engine is not running (%s)" % (config["name"], described))
        return state
    if config.get("mode") == "follower":
        return follow(config, state, runner, opener, at, age, restarts, pid, proc_root)
    ok, why = complete_all(config, opener)
    if ok:
        return serving(config, state, at, "a completion answered; the engine serves", answered=True)
    state["last_error"] = why
    gone = ended(config, runner, now, monotonic, instance)
    if gone:
        # The engine went away while it was asked (an API front exits once its core died; systemd or Docker
        # starts it again): its failure is not counted, and nothing restarts what is already restarting.
        state.update(result="engine down", failures=0, detail="%s while it was asked (%s); not counted: its unit "
                     "or container restarts it" % (gone, why))
        log("%s: not counted, the engine %s while it was asked" % (config["name"], gone))
        return state
    if not state.get("answered") and age < config["start_grace"]:
        state.update(result="starting", detail="no completion yet (%s), %ds into a start grace of %ss"
                     % (why, age, config["start_grace"]))
        log("%s: starting, not counted: %s" % (config["name"], state["detail"]))
        return state
    state["failures"] = state.get("failures", 0) + 1
    reason = "%d failed completion(s) in a row, the last: %s" % (state["failures"], why)
    return escalate(config, state, runner, at, reason, restarts)


def ended(config, runner, now, monotonic, instance):
    """After a failed check, how the run that was asked ended ('stopped', 'started again'), or '' when it runs on."""
    running, again, _age, described, _pid_now = engine_state(config, runner, now, monotonic)
    if not running:
        return "stopped (%s)" % described
    return "" if again == instance else "started again"


def follow(config, state, runner, opener, at, age, restarts, pid=0, proc_root="/proc"):
    """A headless rank: restart it when the API node's engine went away after this one joined it."""
    ok, why = healthy(config, opener)
    if ok:
        if state.get("api_failed_reads", 0) >= config["failures"] or "healthy_since" not in state:
            # The API node's first answer after it was gone (as many failed reads in a row as count): its engine
            # serves from about now. Not after a read or two that failed on a loaded host, nor after this node's
            # own engine was down: the API node may have served all along, as while this node rebooted.
            state["healthy_since"] = at
        state["api_failed_reads"] = 0
        count = api_connections(config, pid, proc_root)
        if count is None:
            state.pop("api_connections", None)
        else:
            state["api_connections"] = {"instance": state.get("instance"), "count": count, "at": at}
        return serving(config, state, at, "the API node answers /health")
    state["api_failed_reads"] = state.get("api_failed_reads", 0) + 1
    state["last_error"] = why
    state["failures"] = state.get("failures", 0) + 1
    reason = "%d failed read(s) in a row, the last: %s" % (state["failures"], why)
    started = at - age
    last_ok = state.get("last_ok_at")
    if last_ok is None or started > last_ok:
        why_not = ("no check has seen the API node healthy yet" if last_ok is None else
                   "this engine started after the API node was last seen healthy")
        return waiting(config, state, reason, "%s, so it joins the API node's engine as that starts" % why_not)
    seen = state.get("api_connections") or {}
    if seen.get("count") == 0 and seen.get("instance") == state.get("instance"):
        # The API node's engine served and this run of the rank held no connection to it: it was never taken in
        # (it started alone, or just after that engine began answering, which healthy_since cannot tell apart).
        return waiting(config, state, reason, "at the last check that saw the API node healthy (%s) this engine held "
                       "no connection to it (%s), so it was never taken in by that engine; it joins the next one by "
                       "itself" % (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seen.get("at", 0))),
                                   config["api_address"]))
    since = state.get("healthy_since")
    if since is not None and started > since:
        # A data-parallel engine takes in its ranks when it starts: one that was already serving when this rank
        # started never took it in (the rank started alone: its node rebooted, or it was restarted by hand).
        return waiting(config, state, reason, "this engine started while the API node's engine was serving (answering "
                       "since %s), so it never joined that engine; it joins the next one by itself"
                       % time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)))
    if state["failures"] >= config["failures"] and waits_to_be_taken_in(config, runner, at):
        return waiting(config, state, reason, "this rank waits for the DP coordinator (its log within %ds: %s...), so "
                       "it joins the API node's next engine by itself" % (WAITING_WINDOW, WAITING))
    return escalate(config, state, runner, at, reason, restarts,
                    "; this engine ran while the API node was last seen healthy and had joined the engine that "
                    "went away")


def descendants(proc_root, pid):
    """``pid`` and every process below it, as strings (from each process's parent in /proc/<pid>/stat)."""
    children = {}
    try:
        names = os.listdir(str(proc_root))
    except OSError:
        names = []
    for name in names:
        if name.isdigit():
            fields = stat_fields(proc_read(proc_root, name, "stat"))
            if fields and len(fields) > 1:
                children.setdefault(fields[1], []).append(name)
    found, todo = [], [str(pid)]
    while todo:
        current = todo.pop()
        if current not in found:
            found.append(current)
            todo.extend(children.get(current, []))
    return found


def socket_inodes(proc_root, pids):
    """The inodes of the sockets the processes hold ("socket:[N]" file descriptors); None when the first
    process's descriptors cannot be listed (it is gone, or this is not root)."""
    inodes = set()
    for index, pid in enumerate(pids):
        directory = os.path.join(str(proc_root), pid, "fd")
        try:
            names = os.listdir(directory)
        except OSError:
            if index == 0:
                return None
            continue
        for name in names:
            try:
                target = os.readlink(os.path.join(directory, name))
            except OSError:
                continue
            if target.startswith("socket:[") and target.endswith("]"):
                inodes.add(target[8:-1])
    return inodes


def proc_net_address(text, byteorder=sys.byteorder):
    """(address, port) of an address of /proc/net/tcp or tcp6: hexadecimal 32-bit words, each in the host's byte
    order ("0200A8C0:1F90" is 192.168.0.2:8080 on a little-endian host); an IPv4-mapped IPv6 address as IPv4."""
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    if byteorder == "little":
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(raw)
    if address.version == 6 and address.ipv4_mapped:
        address = address.ipv4_mapped
    return address, int(port, 16)


# The state column of /proc/net/tcp for an established connection (include/net/tcp_states.h: TCP_ESTABLISHED).
TCP_ESTABLISHED = "01"


def established(table, inodes, address, byteorder=sys.byteorder):
    """How many connections of a /proc/net/tcp or tcp6 table are established, to ``address``, on one of ``inodes``."""
    count = 0
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != TCP_ESTABLISHED or fields[9] not in inodes:
            continue
        if proc_net_address(fields[2], byteorder)[0] == address:
            count += 1
    return count


def api_connections(config, pid, proc_root="/proc"):
    """How many established TCP connections the engine's processes (``pid``, its main process, and those below
    it) hold to the API node, None when unknown."""
    if not config.get("api_address"):
        return None
    try:
        address = ipaddress.ip_address(config["api_address"])
    except ValueError:
        return None
    if pid <= 0:
        return None
    inodes = socket_inodes(proc_root, descendants(proc_root, pid))
    if inodes is None:
        return None
    count = 0
    # The engine's own network namespace (a container's, or the host's).
    for name in ("tcp", "tcp6"):
        table = proc_read(proc_root, pid, "net", name)
        if table is not None:
            count += established(table, inodes, address)
    return count


def waiting(config, state, reason, why_not):
    """A failed read that restarts nothing: the rank joins the API node's next engine (logged once per outage)."""
    state.update(result="waiting", detail="%s; not restarting: %s" % (reason, why_not))
    if state["failures"] == config["failures"]:
        log("%s: %s" % (config["name"], state["detail"]))
    return state


def waits_to_be_taken_in(config, runner, at):
    """Whether the engine logged WAITING within the last WAITING_WINDOW seconds (a rank not taken in yet)."""
    if config["runtime"] == "host":
        argv = ["journalctl", "--unit", config["name"], "--since", "@%d" % int(at - WAITING_WINDOW), "--output", "cat",
                "--no-pager", "--quiet"]
    else:
        argv = ["docker", "logs", "--since", "%ds" % WAITING_WINDOW, config["name"]]
    result = runner(argv)
    return result.returncode == 0 and WAITING in (result.stdout or "") + (result.stderr or "")


def serving(config, state, at, message, **extra):
    """The check passed: the count starts again (the journal line only when the state changes)."""
    if state.get("result") != "ok":
        log("%s: %s" % (config["name"], message))
    state.update(result="ok", failures=0, last_ok_at=at, detail="", **extra)
    state.pop("held", None)
    return state


def escalate(config, state, runner, at, reason, restarts, why_restart=""):
    """A counted failure: failing below the count, held at the rate limit, else a restart."""
    if state["failures"] < config["failures"]:
        state.update(result="failing", detail=reason)
        log("%s: %s (restart at %d)" % (config["name"], reason, config["failures"]))
        return state
    if len(restarts) >= config["max_restarts"]:
        state.update(result="held", held=True,
                     detail="%s; not restarting: %d restarts in the last %ss (serve_watchdog_max_restarts)"
                     % (reason, len(restarts), config["window"]))
        log("%s: %s" % (config["name"], state["detail"]))
        return state
    return restart_engine(config, state, runner, at, reason + why_restart, restarts)


def restart_engine(config, state, runner, at, reason, restarts):
    done, command, output = restart(config, runner)
    restarts.append({"at": at, "reason": reason, "command": command, "ok": done, "output": output[-500:]})
    state.update(result="restarted" if done else "restart failed", failures=0, answered=False,
                 detail="%s: %s" % (command, reason if done else output or "failed"))
    log("%s: restarted (%s): %s%s" % (config["name"], command, reason, "" if done else "; it failed: " + output))
    return state


# The rule keys that are regular expressions (the unit is a name, the CPUs a list).
SELECTORS = ("comm", "cmdline", "parent_comm", "parent_cmdline", "threads")


def load_binding(path):
    """[(selectors, unit, cpus)] from the binding step's rules; [] when it wrote none (binding off)."""
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    except FileNotFoundError:
        return []
    rules = []
    for number, rule in enumerate(doc.get("rules") or []):
        try:
            selectors = {key: re.compile(rule[key]) for key in SELECTORS if rule.get(key) is not None}
        except re.error as err:
            raise ValueError("%s: rule %d: %s" % (path, number, err)) from None
        cpus = frozenset(cpu_numbers(rule.get("cpus") or []))
        if not cpus or not (selectors.keys() - {"threads"} or rule.get("unit")):
            raise ValueError("%s: rule %d has no CPUs or no selector" % (path, number))
        unit = rule.get("unit")
        if unit and "." not in unit:
            unit += ".service"
        rules.append((selectors, unit, cpus))
    return rules


def proc_read(*parts, raw=False):
    try:
        with open(os.path.join(*[str(part) for part in parts]), "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return data if raw else data.decode("utf-8", "replace")


def stat_fields(stat):
    """The fields of a /proc stat line after the command name (state first), or None for no line."""
    if not stat or ")" not in stat:
        return None
    return stat[stat.rindex(")") + 2:].split()


def proc_title(proc_root, pid):
    """(comm, command line with its NULs, parent PID) of a process; None when it is gone."""
    stat = proc_read(proc_root, pid, "stat")
    fields = stat_fields(stat)
    if fields is None:
        return None
    comm = (proc_read(proc_root, pid, "comm") or stat[stat.index("(") + 1:stat.rindex(")")]).rstrip("\n")
    cmdline = (proc_read(proc_root, pid, "cmdline", raw=True) or b"").rstrip(b"\0").decode("utf-8", "replace")
    return comm, cmdline, int(fields[1]) if len(fields) > 1 else 0


def rule_for(rules, proc_root, pid, titles):
    """The last rule every selector of which the process matches (as the binding step decides), else None."""
    own = titles.get(pid)
    if own is None:
        return None
    comm, cmdline, ppid = own
    parent = titles.get(ppid) or ("", "", 0)
    chosen = None
    for rule in rules:
        selectors, unit, _cpus = rule
        checks = (("comm", comm), ("cmdline", cmdline), ("parent_comm", parent[0]), ("parent_cmdline", parent[1]))
        if any(key in selectors and not selectors[key].search(text) for key, text in checks):
            continue
        if unit and unit not in cgroup_parts(proc_root, pid):
            continue
        chosen = rule
    return chosen


def cgroup_parts(proc_root, pid):
    """Every name in the process's cgroup paths (its unit among them)."""
    parts = set()
    for line in (proc_read(proc_root, pid, "cgroup") or "").splitlines():
        parts.update(part for part in line.split(":", 2)[-1].split("/") if part)
    return parts


def cpu_numbers(value):
    """CPU numbers from an int, a kernel cpulist ("0-3,8") or a list of either."""
    if isinstance(value, bool):
        raise ValueError("%r is not a CPU list" % value)
    if isinstance(value, int):
        return {value}
    if isinstance(value, list):
        return set().union(*[cpu_numbers(item) for item in value]) if value else set()
    cpus = set()
    for part in str(value).split(","):
        first, _dash, last = part.strip().partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def thread_start(proc_root, pid, tid):
    """A thread's start time (clock ticks since boot): with the TID, what tells it from a later thread.
    None when it is gone or a zombie (it ended; its parent has not reaped it yet)."""
    fields = stat_fields(proc_read(proc_root, pid, "task", tid, "stat"))
    if fields is None:
        return None
    return int(fields[19]) if len(fields) > 19 and fields[0] not in ("Z", "X") else None


def rebind(rules, originals, proc_root="/proc", pids=None, getaffinity=os.sched_getaffinity,
           setaffinity=os.sched_setaffinity):
    """Bind every thread of a matched process (of ``pids``, default all) that is off its CPUs, recording in
    ``originals`` ({tid: {pid, start, cpus}}) the CPUs a thread had before its first move.
    Returns [{pid, comm, cpus, threads, errors}] of what moved."""
    if pids is None:
        pids = [int(name) for name in os.listdir(proc_root) if name.isdigit()]
    titles = {pid: title for pid, title in ((pid, proc_title(proc_root, pid)) for pid in pids) if title}
    for ppid in {title[2] for title in titles.values()} - set(titles):
        parent = proc_title(proc_root, ppid) if ppid > 0 else None
        if parent:
            titles[ppid] = parent
    own = os.getpid()
    moved = []
    for pid in sorted(set(pids) & set(titles)):
        rule = rule_for(rules, proc_root, pid, titles) if pid != own else None
        if rule is None:
            continue
        selectors, _unit, cpus = rule
        entry = {"pid": pid, "comm": titles[pid][0], "cpus": ",".join(str(cpu) for cpu in sorted(cpus)), "threads": 0,
                 "errors": []}
        try:
            names = os.listdir(os.path.join(proc_root, str(pid), "task"))
            main = {"pid": pid, "start": thread_start(proc_root, pid, pid), "cpus": sorted(getaffinity(pid))}
        except OSError:
            continue
        for tid in sorted(int(name) for name in names if name.isdigit()):
            if "threads" in selectors and not selectors["threads"].search(
                    (proc_read(proc_root, pid, "task", tid, "comm") or "").rstrip("\n")):
                continue
            try:
                before = set(getaffinity(tid))
                if before == cpus:
                    continue
                start = thread_start(proc_root, pid, tid)
                setaffinity(tid, cpus)
                entry["threads"] += 1
            except ProcessLookupError:
                continue
            except OSError as err:
                entry["errors"].append("thread %d: %s" % (tid, err))
                continue
            if str(tid) not in originals or originals[str(tid)].get("start") != start:
                originals[str(tid)] = {"pid": pid, "start": start, "cpus": sorted(before)}
        if entry["threads"] or entry["errors"]:
            moved.append(entry)
            # The main thread's CPUs as well, moved or not: a thread started later gets them back.
            if originals.get(str(pid), {}).get("start") != main["start"]:
                originals[str(pid)] = main
    return moved


def unbind(originals, proc_root="/proc", setaffinity=os.sched_setaffinity):
    """Put every thread that still runs back on the CPUs it had; a thread of such a process that started after
    its move (it took the bound CPUs from the thread that made it) gets its main thread's, as the binding
    step's restore does. Returns (threads put back, recorded threads gone, errors)."""
    back, gone, errors = 0, 0, []
    targets = {}
    for tid, record in originals.items():
        if thread_start(proc_root, record["pid"], tid) == record["start"]:
            targets[int(tid)] = record["cpus"]
        else:
            gone += 1
    for pid in {record["pid"] for record in originals.values()}:
        main = originals.get(str(pid))
        if not main or thread_start(proc_root, pid, pid) != main["start"]:
            continue
        try:
            names = os.listdir(os.path.join(proc_root, str(pid), "task"))
        except OSError:
            continue
        for name in names:
            if name.isdigit():
                targets.setdefault(int(name), main["cpus"])
    for tid, cpus in sorted(targets.items()):
        try:
            setaffinity(tid, set(cpus))
            back += 1
        except ProcessLookupError:
            continue
        except OSError as err:
            errors.append("thread %d: %s" % (tid, err))
    return back, gone, errors


def keep_binding(config, state, bind=rebind, undo=unbind, proc_root="/proc"):
    """The engine's threads on their CPUs while it serves; the CPUs they had put back once the rules are gone
    (restore.yml removes them). The state says what moved and keeps what to put back."""
    if not config.get("binding_file"):
        return state
    binding = dict(state.get("binding") or {})
    originals = dict(binding.get("originals") or {})
    binding.pop("error", None)
    state["binding"] = binding
    try:
        rules = load_binding(config["binding_file"])
    except (OSError, ValueError) as err:
        binding["error"] = str(err)
        log("%s: binding not kept: %s" % (config["name"], err))
        return state
    binding["rules"] = len(rules)
    if not rules:
        if originals:
            back, gone, errors = undo(originals, proc_root)
            binding["originals"] = {}
            binding["last_restored"] = {"at": state.get("checked_at"), "threads": back, "gone": gone, "errors": errors}
            log("%s: binding rules removed: put %d thread(s) back on the CPUs they had, %d gone%s" % (
                config["name"], back, gone, "; " + "; ".join(errors) if errors else ""))
        return state
    if state.get("result") != "ok":
        return state
    # Threads that ended (an engine restart ends them all) are no longer anyone's to put back.
    originals = {tid: record for tid, record in originals.items()
                 if thread_start(proc_root, record["pid"], tid) == record["start"]}
    moved = bind(rules, originals, proc_root=proc_root)
    binding["originals"] = originals
    if moved:
        binding["last_moved"] = {"at": state.get("checked_at"), "processes": moved}
        for entry in moved:
            log("%s: bound %d thread(s) of %s (pid %d) back to CPUs %s%s" % (
                config["name"], entry["threads"], entry["comm"], entry["pid"], entry["cpus"],
                "; " + "; ".join(entry["errors"]) if entry["errors"] else ""))
    return state


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except (OSError, ValueError) as err:
        log("llm-cluster-watchdog: %s" % err)
        return 2
    state = keep_binding(config, check(config, load_state(config["state_file"])))
    save_state(config["state_file"], state)
    try:
        write_metrics(config, state)
    except OSError as err:
        log("%s: metrics not written to %s: %s" % (config["name"], config.get("textfile"), err))
    return 0


if __name__ == "__main__":
    sys.exit(main())
