# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Time the harness's fake-tool installation: the task-per-file installer against the archive.

Starts N systemd containers as the Molecule scenarios do (the base image, the
harness's capabilities), then, alternately, installs the fakes of an Atlas 800I
A2 (with its recorded topology) with the old installer (tests/fakes/install_fakes.yml
at --old-ref, one task per file) and with the current one (one archive), each
into a fresh directory tree of the same containers (llm_cluster_fake_root), over
the Docker connection with pipelining as Molecule runs it. Prints the median
of each and their ratio; writes JSON with every trial.

    python tests/bench/bench_fake_install.py --nodes 3 --trials 2 --json .cache/timing/bench-fake-install.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("IMAGE", "aihost-llm-cluster/debian-systemd:bookworm")
PLAY = """\
- name: Install the fakes
  hosts: all
  gather_facts: false
  tasks:
    - name: Include the installer
      ansible.builtin.include_tasks: {tasks}
"""
# The old prepare unpacked the recorded topology in a task of its own (molecule/shared/prepare.yml).
OLD_TOPOLOGY = """\
    - name: Unpack the recorded sysfs topology
      ansible.builtin.unarchive:
        src: {topology}
        dest: "{{{{ llm_cluster_fake_root }}}}/var/lib/llm-cluster-fakes"
        extra_opts: [--strip-components=1]
        creates: "{{{{ llm_cluster_fake_root }}}}/var/lib/llm-cluster-fakes/sys/devices/system/cpu/online"
"""


def sh(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, **kw)


def start(names: list[str]) -> None:
    for name in names:
        sh("docker", "run", "-d", "--name", name, "--hostname", name, "--cgroupns", "private",
           "--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN", "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
           "--stop-signal", "SIGRTMIN+3", "--label", "org.aihost.llm_cluster.bench=fake-install", IMAGE, "/sbin/init")
    for name in names:
        subprocess.run(["docker", "exec", name, "systemctl", "is-system-running", "--wait"], capture_output=True, check=False)


def install(work: Path, names: list[str], fakes: Path, tasks: Path, root: str) -> float:
    inventory = work / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {name: {} for name in names}, "vars": {
        "ansible_connection": "community.docker.docker",
        "ansible_python_interpreter": "/usr/bin/python3",
        "llm_cluster_fake_profile": "atlas-800i-a2",
        "llm_cluster_fake_topology": "atlas-800i-a2",
        "llm_cluster_fake_src": str(fakes),
        "llm_cluster_fake_root": root,
        "llm_cluster_fake_build_dir": str(work / "build"),
    }}}))
    playbook = work / "play.yml"
    text = PLAY.format(tasks=tasks)
    if not (fakes / "build_fake_root.py").exists():
        text += OLD_TOPOLOGY.format(topology=fakes.parent / "fixtures" / "topologies" / "atlas-800i-a2.tar.gz")
    playbook.write_text(text)
    env = dict(os.environ, ANSIBLE_PIPELINING="True", ANSIBLE_FORKS="8", ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".cache" / "collections"))
    started = time.monotonic()
    result = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook)],
                            env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        sys.exit(result.stdout[-3000:] + result.stderr[-2000:])
    return seconds


def old_installer(work: Path, ref: str) -> Path:
    """The fakes directory as of `ref` (its installer and the tools it copies)."""
    old = work / "old-fakes"
    old.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "tests/fakes", "tests/fixtures/topologies"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    return old / "tests" / "fakes"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--old-ref", default="9c6bda6", help="a commit with the task-per-file installer")
    parser.add_argument("--json", help="write every trial here")
    args = parser.parse_args()

    names = [f"llmc-bench-fake{i}" for i in range(1, args.nodes + 1)]
    load_start = os.getloadavg()
    times: dict[str, list[float]] = {"task per file": [], "one archive": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        old = old_installer(work, args.old_ref)
        try:
            start(names)
            for trial in range(args.trials):
                for label, fakes in (("task per file", old), ("one archive", ROOT / "tests" / "fakes")):
                    run_dir = work / f"{trial}-{label.replace(' ', '-')}"
                    run_dir.mkdir()
                    seconds = install(run_dir, names, fakes, fakes / "install_fakes.yml", f"/var/tmp/fakes-{trial}-{label[0]}")
                    times[label].append(round(seconds, 2))
                    print(f"trial {trial + 1}: {label}: {seconds:.1f} s", flush=True)
        finally:
            subprocess.run(["docker", "rm", "-f", *names], capture_output=True, check=False)
    old_median = statistics.median(times["task per file"])
    new_median = statistics.median(times["one archive"])
    print(f"{args.nodes} nodes, median: task per file {old_median:.1f} s, one archive {new_median:.1f} s, "
          f"{old_median / new_median:.1f}x faster")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({
            "nodes": args.nodes, "trials": times, "median_seconds": {"task per file": old_median, "one archive": new_median},
            "ratio": round(old_median / new_median, 2), "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
        }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
