# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""deploy.yml against 3, 5 and 8 fake Atlas 800I A2 containers: first run, second run, check mode.

For each node count the script starts that many systemd containers on their own Docker network, with
the options of the Molecule scenarios (``molecule/default/molecule.yml``, ``.config/molecule/config.yml``),
installs the fake servers with the harness's prepare (``molecule/shared/prepare.yml``), puts a small
synthetic model on the head, then times ``playbooks/deploy.yml --skip-tags serve`` three times: the first
run (prepare, Ray from the wheelhouse, the model to every worker), a second run with nothing changed, and
``--check --diff`` on the converged cluster. Every run has ``ansible.posix.profile_tasks`` with all tasks
listed; its table is kept, summed per role, and written with the wall times to a JSON file beside it.
The containers and the network are removed at the end, whatever happens::

    make bench-deploy
    python3 tests/bench/bench_deploy_scale.py --nodes 3 5 8 --out .cache/bench/deploy-scale

Run it through the Molecule lock (``flock /tmp/llmc-molecule.lock``): it needs the machine to itself.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PREFIX = "llmc-bench-"
IMAGE = os.environ.get("IMAGE", "aihost-llm-cluster/debian-systemd:bookworm")
MODEL = "/srv/models/tiny"
# The variables of the Molecule ray/default scenarios, less the engine's.
GROUP_VARS = {
    "ansible_connection": "community.docker.docker",
    "ansible_python_interpreter": "/usr/bin/python3",
    "llm_cluster_fake_profile": "atlas-800i-a2",
    "llm_cluster_fake_topology": "atlas-800i-a2",
    "prepare_binding_sysfs_root": "/var/lib/llm-cluster-fakes",
    "ray_port": 6379,
    "llm_port": 8000,
    "dp_port": 12570,
    "ray_device": "eth0",
    "model_path": MODEL,
    "model_type": "safetensors",
    "backend_type": "MindFormers",
    "is_stop_other_container": 0,
    "ray_cluster_wheelhouse": "/wheelhouse",
}
# What the harness's prepare does not make: a small checkpoint on the head (four 8 MiB shards and the
# json files), for the model step to copy to every worker.
MAKE_MODEL = r"""set -e
mkdir -p {m}
for i in 1 2 3 4; do
  [ -e {m}/model-0000$i-of-00004.safetensors ] || dd if=/dev/urandom of={m}/model-0000$i-of-00004.safetensors bs=1M count=8 status=none
done
printf '%s\n' '{{"architectures": ["LlamaForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2}}' > {m}/config.json
printf '%s\n' '{{"max_new_tokens": 16}}' > {m}/generation_config.json
printf '%s\n' '{{"metadata": {{"total_size": 33554432}}, "weight_map": {{}}}}' > {m}/model.safetensors.index.json
""".format(m=MODEL)
RECAP = re.compile(r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
                   r"\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)")


def log(message):
    print("[bench-deploy %s] %s" % (time.strftime("%H:%M:%S"), message), file=sys.stderr, flush=True)


def docker(*argv, check=True):
    return subprocess.run(["docker"] + list(argv), check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True).stdout


def names(count):
    return [PREFIX + "master1"] + [PREFIX + "worker%d" % index for index in range(1, count)]


def git(*argv):
    return subprocess.run(["git"] + list(argv), cwd=ROOT, check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout


def loadavg():
    with open("/proc/loadavg") as handle:
        return [float(value) for value in handle.read().split()[:3]]


def start_cluster(count, network, fabric, memory):
    docker("network", "create", network)
    os.makedirs(fabric, exist_ok=True)
    wheelhouse = os.path.join(ROOT, ".cache", "wheelhouse")
    for name in names(count):
        docker("run", "--detach", "--name", name, "--hostname", name, "--network", network,
               "--cgroupns", "private", "--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN",
               "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
               "--stop-signal", "SIGRTMIN+3", "--shm-size", "1g", "--memory", memory,
               "--volume", "%s:/var/lib/llm-cluster-fabric" % fabric, "--volume", "%s:/wheelhouse:ro" % wheelhouse,
               IMAGE, "/sbin/init")


def remove_cluster(count, network):
    for name in names(count):
        docker("rm", "--force", "--volumes", name, check=False)
    docker("network", "rm", network, check=False)


def node_cpu_seconds(count):
    """CPU time used so far by the benchmark's containers, summed."""
    return container_cpu_seconds(names(count))


def container_cpu_seconds(containers):
    """CPU time used so far by these containers (cgroup v1 cpuacct, else v2 cpu.stat), summed."""
    total = 0.0
    for name in containers:
        ident = docker("inspect", "--format", "{{.Id}}", name).strip()
        v1 = "/sys/fs/cgroup/cpuacct/docker/%s/cpuacct.usage" % ident
        v2 = "/sys/fs/cgroup/system.slice/docker-%s.scope/cpu.stat" % ident
        if os.path.exists(v1):
            with open(v1) as handle:
                total += int(handle.read()) / 1e9
        elif os.path.exists(v2):
            with open(v2) as handle:
                total += int(dict(line.split() for line in handle)["usage_usec"]) / 1e6
    return total


def controller_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def write_inventory(path, count, build_dir, connection="community.docker.docker"):
    hosts = names(count)
    lines = ["all:", "  vars:"]
    variables = dict(GROUP_VARS, node_num=count, llm_cluster_fake_build_dir=build_dir, ansible_connection=connection)
    lines += ["    %s: %s" % (key, json.dumps(value)) for key, value in variables.items()]
    lines += ["  children:", "    masters:", "      hosts:", "        %s: {}" % hosts[0], "    workers:", "      hosts:"]
    lines += ["        %s: {}" % host for host in hosts[1:]]
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def profile(text):
    """The per-task table of profile_tasks: [(task, seconds)], in the order printed."""
    tasks, inside = [], False
    for line in text.splitlines():
        if line.startswith("TASKS RECAP"):
            inside = True
            continue
        if not inside or not line.strip() or line.startswith("=") or re.match(r"^\w+day \d", line):
            continue
        head, seconds = (line.rstrip().rsplit(" ", 1) + [""])[:2]
        if not seconds.endswith("s"):
            continue
        try:
            tasks.append((head.rstrip("-").rstrip(), float(seconds[:-1])))
        except ValueError:
            continue
    return tasks


def by_role(tasks):
    roles = {}
    for name, seconds in tasks:
        role = name.split(" : ", 1)[0].rsplit(".", 1)[-1] if " : " in name else "(playbook)"
        roles[role] = round(roles.get(role, 0.0) + seconds, 2)
    return dict(sorted(roles.items(), key=lambda item: -item[1]))


def recap(text):
    hosts = {}
    for line in text.splitlines():
        match = RECAP.match(line.strip())
        if match:
            hosts[match.group("host")] = {key: int(value) for key, value in match.groupdict().items() if key != "host"}
    return hosts


def playbook(name, inventory, env, args, out, tag):
    argv = ["ansible-playbook", "-i", inventory, os.path.join(ROOT, name)] + args
    log("%s: %s" % (tag, " ".join(argv[1:])))
    started = time.monotonic()
    result = subprocess.run(argv, cwd=ROOT, env=env, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True)
    seconds = round(time.monotonic() - started, 1)
    with open(os.path.join(out, tag + ".log"), "w") as handle:
        handle.write(result.stdout)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-6000:])
        raise SystemExit("%s failed (rc=%d); the log is %s" % (tag, result.returncode, os.path.join(out, tag + ".log")))
    return seconds, result.stdout


def bench_nodes(count, args, out, env, rows):
    """Adds one row per finished run to rows, so that a run stopped halfway keeps what it measured."""
    network = "%s%d" % (PREFIX, count)
    work = os.path.join(out, "n%d" % count)
    fabric = os.path.join(ROOT, ".cache", "fabric", "bench-deploy-%d" % count)
    os.makedirs(work, exist_ok=True)
    shutil.rmtree(fabric, ignore_errors=True)
    inventory = os.path.join(work, "hosts.yml")
    write_inventory(inventory, count, os.path.join(work, "fakes"))
    env = dict(env, LLM_CLUSTER_ARTIFACTS=os.path.join(work, "artifacts"))
    try:
        log("%d containers" % count)
        start_cluster(count, network, fabric, args.memory)
        playbook("molecule/shared/prepare.yml", inventory, env, [], work, "n%d-harness-prepare" % count)
        docker("exec", names(count)[0], "sh", "-c", MAKE_MODEL)
        deploy = ["--skip-tags", args.skip_tags] if args.skip_tags else []
        first = None
        # The second run once per transport and trial, the transports taking turns, so that the load touches
        # them alike; then check mode.
        runs = [("first", "first", "docker", [])]
        for trial in range(args.trials if "second" in args.runs else 0):
            for transport in args.transports:
                name = "second" if args.transports == ["docker"] and args.trials == 1 else "second-%s-%d" % (transport, trial + 1)
                runs.append(("second", name, transport, []))
        if "check" in args.runs:
            runs.append(("check", "check", "docker", ["--check", "--diff"]))
        # One inventory and environment per transport, written once.
        transports = {}
        for transport in {run[2] for run in runs}:
            connection, run_env = transport_options(transport, env)
            path = os.path.join(work, "hosts-%s.yml" % transport)
            write_inventory(path, count, os.path.join(work, "fakes"), connection)
            transports[transport] = (connection, path, run_env)
        for run, name, transport, extra in runs:
            tag = "n%d-%s" % (count, name)
            connection, run_inventory, run_env = transports[transport]
            cpu_nodes, cpu_controller = node_cpu_seconds(count), controller_cpu_seconds()
            seconds, text = playbook("playbooks/deploy.yml", run_inventory, run_env, deploy + extra, work, tag)
            cpu_nodes, cpu_controller = node_cpu_seconds(count) - cpu_nodes, controller_cpu_seconds() - cpu_controller
            tasks = profile(text)
            with open(os.path.join(out, tag + ".profile.txt"), "w") as handle:
                handle.write("".join("%8.2f  %s\n" % (sec, name) for name, sec in sorted(tasks, key=lambda t: -t[1])))
            hosts = recap(text)
            first = seconds if run == "first" else first
            row = {"nodes": count, "run": run, "name": name, "tag": tag, "connection": connection,
                   "seconds": seconds, "share_of_first": round(seconds / first, 3),
                   "changed": sum(host["changed"] for host in hosts.values()), "recap": hosts,
                   "cpu_nodes_s": round(cpu_nodes, 1), "cpu_controller_s": round(cpu_controller, 1),
                   "roles": by_role(tasks), "tasks_total_s": round(sum(task[1] for task in tasks), 2),
                   "tasks": [{"task": name, "seconds": sec} for name, sec in tasks]}
            rows.append(row)
            log("%s: %.1f s, changed=%d, CPU nodes %.0f s controller %.0f s, roles %s"
                % (tag, seconds, row["changed"], cpu_nodes, cpu_controller, row["roles"]))
    finally:
        remove_cluster(count, network)
        shutil.rmtree(fabric, ignore_errors=True)


def transport_options(transport, env):
    """The connection name and the environment of a run over one transport.

    docker: the Docker CLI, one ``docker exec`` process per module (Molecule's default). docker_api: the same
    exec through the Engine API, no CLI process. mitogen: Mitogen's strategy, one Python per node kept for the
    whole run (its ``docker`` method, which still starts it with the Docker CLI).
    """
    if transport == "docker":
        return "community.docker.docker", env
    if transport == "docker_api":
        return "community.docker.docker_api", env
    if transport == "mitogen":
        import ansible_mitogen  # pylint: disable=import-outside-toplevel
        plugins = os.path.join(os.path.dirname(ansible_mitogen.__file__), "plugins", "strategy")
        return "docker", dict(env, ANSIBLE_STRATEGY_PLUGINS=plugins, ANSIBLE_STRATEGY="mitogen_linear")
    raise SystemExit("unknown transport %r" % transport)


def summary(rows):
    first = {row["nodes"]: row["seconds"] for row in rows if row["run"] == "first"}
    base = min(first) if first else None
    result = {"first_s": first}
    if base:
        result["ratio_to_%d" % base] = {str(count): round(seconds / first[base], 3) for count, seconds in first.items()}
    for run in ("second", "check"):
        # Keyed by the node count, and the run's name where several runs of that kind were timed.
        result[run + "_share"] = {"%d %s" % (row["nodes"], row["name"]) if row["name"] != run else str(row["nodes"]):
                                  row["share_of_first"] for row in rows if row["run"] == run}
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[3, 5, 8])
    parser.add_argument("--memory", default="2560m", help="memory limit of each container")
    parser.add_argument("--skip-tags", default="serve", help="deploy.yml tags not run (default: the engine)")
    parser.add_argument("--transports", nargs="+", default=["docker"], choices=["docker", "docker_api", "mitogen"],
                        help="connections the second run is timed over (mitogen: the package importable)")
    parser.add_argument("--trials", type=int, default=1, help="second runs per transport")
    parser.add_argument("--runs", nargs="+", default=["first", "second", "check"], choices=["first", "second", "check"],
                        help="which runs to time (the first always runs: the others need a converged cluster)")
    parser.add_argument("--out", default=os.path.join(ROOT, ".cache", "bench", "deploy-scale"))
    args = parser.parse_args()
    if any(count < 2 for count in args.nodes):
        parser.error("--nodes: a cluster has at least 2 nodes")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    # SIGTERM (make, a timeout) ends the run through the finally blocks, which remove the containers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    env = dict(os.environ,
               ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks",
               PROFILE_TASKS_TASK_OUTPUT_LIMIT="all",
               PROFILE_TASKS_SORT_ORDER="none",
               ANSIBLE_PIPELINING="True",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               LLM_CLUSTER_FAKES=os.path.join(ROOT, "tests", "fakes"),
               PY_COLORS="0", ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    report = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count(),
              "loadavg_start": loadavg(), "memory_per_node": args.memory, "skip_tags": args.skip_tags,
              "image": IMAGE, "git": git("rev-parse", "--short", "HEAD").strip(),
              "git_uncommitted": len(git("status", "--porcelain", "--untracked-files=no").splitlines()),
              "runs": []}
    path = os.path.join(out, "deploy-scale.json")
    try:
        for count in args.nodes:
            bench_nodes(count, args, out, env, report["runs"])
            report["summary"] = summary(report["runs"])
            with open(path, "w") as handle:
                json.dump(report, handle, indent=1)
    finally:
        report["loadavg_end"] = loadavg()
        report["summary"] = summary(report["runs"])
        with open(path, "w") as handle:
            json.dump(report, handle, indent=1)
            handle.write("\n")
    print(json.dumps(dict(report["summary"], loadavg_start=report["loadavg_start"], loadavg_end=report["loadavg_end"])))
    log("JSON and per-task tables in %s" % out)


if __name__ == "__main__":
    main()
