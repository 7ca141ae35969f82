# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Who listens on which TCP port, read from /proc (no ss/netstat needed)."""

from __future__ import annotations

import os
import re

TCP_LISTEN = "0A"
_SOCKET_RE = re.compile(r"^socket:\[(\d+)\]$")
_UNIT_RE = re.compile(r"/([^/]+\.(?:service|scope))(?:/|$)")
# A Docker container's cgroup: /docker/<id> (cgroupfs driver) or docker-<id>.scope (systemd driver).
_CONTAINER_RE = re.compile(r"(?:/docker/|/docker-)([0-9a-f]{64})(?:\.scope)?(?:/|$)")


def parse_proc_net_tcp(text):
    """Map listening port -> set of socket inodes from the text of /proc/net/tcp or tcp6."""
    listeners = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != TCP_LISTEN:
            continue
        port = int(fields[1].rsplit(":", 1)[1], 16)
        listeners.setdefault(port, set()).add(fields[9])
    return listeners


def _search_cgroup(text, pattern):
    """The first group of ``pattern`` in the paths of /proc/<pid>/cgroup text, or None."""
    for line in text.splitlines():
        match = pattern.search(line.split(":", 2)[-1])
        if match:
            return match.group(1)
    return None


def unit_of_cgroup(text):
    """Return the systemd unit (name.service or name.scope) found in /proc/<pid>/cgroup text, or None."""
    return _search_cgroup(text, _UNIT_RE)


def container_of_cgroup(text):
    """Return the Docker container ID found in /proc/<pid>/cgroup text, or None."""
    return _search_cgroup(text, _CONTAINER_RE)


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ""


def listening_ports(proc_root="/proc"):
    """Return {port: [ {pid, comm, unit}, ... ]} for every TCP port in LISTEN state."""
    inodes = {}
    for name in ("tcp", "tcp6"):
        for port, found in parse_proc_net_tcp(_read(os.path.join(proc_root, "net", name))).items():
            inodes.setdefault(port, set()).update(found)
    by_inode = {}
    for pid in os.listdir(proc_root):
        if not pid.isdigit():
            continue
        fd_dir = os.path.join(proc_root, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except (IOError, OSError):
            continue
        for fd in fds:
            try:
                match = _SOCKET_RE.match(os.readlink(os.path.join(fd_dir, fd)))
            except (IOError, OSError):
                continue
            if match:
                by_inode.setdefault(match.group(1), set()).add(int(pid))
    result = {}
    for port, found in inodes.items():
        owners = []
        for pid in sorted(set().union(*[by_inode.get(i, set()) for i in found])):
            cgroup = _read(os.path.join(proc_root, str(pid), "cgroup"))
            owners.append({
                "pid": pid,
                "comm": _read(os.path.join(proc_root, str(pid), "comm")).strip(),
                "unit": unit_of_cgroup(cgroup),
                "container": container_of_cgroup(cgroup),
            })
        result[port] = owners
    return result


def foreign_owners(owners, prefix="llm-cluster-", containers=()):
    """The owners of a port that run neither in one of this collection's units (named with prefix) nor in one
    of its containers (``containers``: full IDs, the serve role's engine containers)."""
    return [owner for owner in owners or [] if not (owner.get("unit") or "").startswith(prefix)
            and not (owner.get("container") and owner["container"] in containers)]


def describe_owners(owners):
    """'pid 77 (redis-server, unit redis.service), ...' for messages."""
    return ", ".join("pid %s (%s%s%s)" % (o.get("pid"), o.get("comm") or "?", ", unit " + o["unit"] if o.get("unit") else "",
                                          ", container " + o["container"][:12] if o.get("container") else "")
                     for o in owners)
