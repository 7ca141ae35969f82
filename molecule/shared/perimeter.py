# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The perimeter checks the Molecule scenarios share: a non-member's TCP scan and the listener audit.

Loaded by molecule/<scenario>/tests/test_*.py with importlib from its path. Nothing here
asserts; the tests do.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
SCAN = os.path.join(HERE, "tcp_scan.py")
IMAGE = os.environ.get("IMAGE", "aihost-llm-cluster/debian-systemd:bookworm")


def docker(*args, check=True):
    return subprocess.run(["docker"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=900, check=check)


class Outsider:
    """A container on a node's Docker network that is in no inventory: no play can touch it."""

    def __init__(self, name, beside):
        self.name, self.beside = name, beside

    def __enter__(self):
        networks = json.loads(docker("inspect", "-f", "{{json .NetworkSettings.Networks}}", self.beside).stdout)
        docker("rm", "-f", self.name, check=False)
        docker("run", "-d", "--rm", "--name", self.name, "--network", [n for n in sorted(networks) if n != "bridge"][0],
               "--entrypoint", "sleep", IMAGE, "infinity")
        docker("cp", SCAN, self.name + ":/root/tcp_scan.py")
        return self

    def __exit__(self, *exc):
        docker("rm", "-f", self.name, check=False)

    def scan(self, addresses, timeout=1, concurrency=16000):
        """{address: {"open": [...], "refused": [...], "reset": [...], "unreachable": {...}, "silent": N,
        "errors": {...}}} for ports 1-65535 (tcp_scan.py: ``reset`` are the refusals no ICMP answered).

        A handshake on the Docker bridge completes in well under a millisecond, also with both cores busy; one
        second is the kernel's first SYN retransmission. 16,000 at a time with 1 s: 3 addresses in about 15 s,
        against 52 s with 8,000 and 2 s (docs/benchmarks.md), with the same ports found.
        """
        out = docker("exec", self.name, "python3", "/root/tcp_scan.py", str(timeout), str(concurrency), *sorted(addresses))
        return json.loads(out.stdout.strip().splitlines()[-1])


def listener_audit(node, address, interface="eth0"):
    """Every listening TCP/UDP socket with its process and unit, and whether the perimeter guards it.

    Ours (a process in an llm-cluster-* unit) must be on loopback, or behind the table: bound to the cluster
    address, or to every address while the cluster interface is the only one besides loopback, or on a port
    the table drops on the other interfaces.
    """
    table = node.run("nft list table inet llm_cluster")
    dropped = []
    if table.rc == 0:
        line = next((l for l in table.stdout.splitlines() if "dport {" in l and l.strip().endswith("drop")), "")
        for item in line.split("{", 1)[-1].split("}", 1)[0].replace(" ", "").split(","):
            if item:
                low, dummy, high = item.partition("-")
                dropped.append((int(low), int(high or low)))
    # Interfaces with an address, besides loopback: where a socket on every address can be reached.
    interfaces = sorted({line.split()[1] for line in node.check_output("ip -o addr show").splitlines()} - {"lo"})
    rows = []
    for line in node.check_output("ss -Htlnup").splitlines():
        fields = line.split()
        proto, local = fields[0], fields[4]
        host, port = local.rsplit(":", 1)
        host = host.strip("[]").split("%")[0]
        pids = re.findall(r"pid=(\d+)", line)
        names = re.findall(r'\("([^"]+)"', line)
        units = sorted({u for pid in pids for u in re.findall(r"/([^/]+\.service)",
                                                              node.run("cat /proc/%s/cgroup" % pid).stdout)})
        ours = any(u.startswith("llm-cluster-") for u in units)
        loopback = host.startswith("127.") or host == "::1"
        wildcard = host in ("0.0.0.0", "*", "::")
        guarded = loopback or (table.rc == 0 and (
            host == address or (wildcard and interfaces == [interface])
            or any(low <= int(port) <= high for low, high in dropped)))
        rows.append({"proto": proto, "address": host, "port": int(port), "process": ",".join(sorted(set(names))),
                     "units": units, "ours": ours, "guarded": guarded})
    return rows


def audit_lines(name, rows):
    lines = []
    for r in rows:
        lines.append("%s %s %s:%d %s %s %s" % (name, r["proto"], r["address"], r["port"], r["process"],
                                               ",".join(r["units"]) or "-", "guarded" if r["guarded"] else "OPEN"))
    return "\n".join(lines)
