# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""Reading processes and threads from procfs, and setting thread affinities.

``ProcTable`` caches the reads of ``<proc_root>/<pid>/...`` for one scan (stat,
comm, cmdline, environ, cgroup, threads and their ``Cpus_allowed_list``); a
file that cannot be read means the process or thread is gone. ``proc_root``
can be a fake tree in tests; affinities are always read and set through the
real kernel (``sched_getaffinity``/``sched_setaffinity``).
"""

from __future__ import annotations

import os

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError
from ansible_collections.aihost.llm_cluster.plugins.module_utils._cpuset import parse_cpulist
from ansible_collections.aihost.llm_cluster.plugins.module_utils._fileio import read_bytes, read_text
from ansible_collections.aihost.llm_cluster.plugins.module_utils._statefile import parse_stat


class ProcTable:
    """Cached reads of ``<proc_root>/<pid>/...`` for one scan."""

    def __init__(self, proc_root):
        self.root = proc_root
        self._stat = {}
        self._comm = {}

    def path(self, *parts):
        return os.path.join(self.root, *[str(part) for part in parts])

    def pids(self):
        try:
            names = os.listdir(self.root)
        except OSError as exc:
            raise ChangeError("cannot list %s: %s" % (self.root, to_native(exc)))
        return sorted(int(name) for name in names if name.isdigit())

    def stat(self, pid):
        if pid not in self._stat:
            text = read_text(self.path(pid, "stat"))
            try:
                self._stat[pid] = parse_stat(text) if text else None
            except ValueError:
                self._stat[pid] = None
        return self._stat[pid]

    def comm(self, pid):
        if pid not in self._comm:
            text = read_text(self.path(pid, "comm"))
            if text is None:
                stat = self.stat(pid)
                text = stat["comm"] if stat else ""
            self._comm[pid] = text.rstrip("\n")
        return self._comm[pid]

    def cmdline(self, pid):
        data = read_bytes(self.path(pid, "cmdline")) or b""
        return data.rstrip(b"\0").decode("utf-8", "replace")

    def environ(self, pid):
        data = read_bytes(self.path(pid, "environ"))
        if data is None:
            return None
        env = {}
        for item in data.split(b"\0"):
            key, sep, value = item.partition(b"=")
            if sep:
                env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        return env

    def cgroup_parts(self, pid):
        text = read_text(self.path(pid, "cgroup")) or ""
        parts = set()
        for line in text.splitlines():
            fields = line.split(":", 2)
            if len(fields) == 3:
                parts.update(part for part in fields[2].split("/") if part)
        return parts

    def tids(self, pid):
        try:
            return sorted(int(name) for name in os.listdir(self.path(pid, "task")) if name.isdigit())
        except OSError:
            return []

    def thread_comm(self, pid, tid):
        text = read_text(self.path(pid, "task", tid, "comm"))
        return None if text is None else text.rstrip("\n")

    def thread_start(self, pid, tid):
        text = read_text(self.path(pid, "task", tid, "stat"))
        try:
            return parse_stat(text)["start_time"] if text else None
        except ValueError:
            return None

    def allowed_list(self, pid, tid):
        """``Cpus_allowed_list`` of a thread, as a sorted list; None when the thread is gone."""
        text = read_text(self.path(pid, "task", tid, "status"))
        if text is None:
            return None
        for line in text.splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return parse_cpulist(line.split(":", 1)[1])
        return None

    def ancestors(self, pid):
        chain = []
        seen = set()
        stat = self.stat(pid)
        while stat and stat["ppid"] > 0 and stat["ppid"] not in seen:
            seen.add(stat["ppid"])
            chain.append(stat["ppid"])
            stat = self.stat(stat["ppid"])
        return chain


def get_affinity(tid):
    """Current affinity of a thread as a sorted list; None when it is gone."""
    try:
        return sorted(os.sched_getaffinity(tid))
    except (ProcessLookupError, PermissionError):
        return None
    except OSError:
        return None


def set_affinity(tid, cpus):
    """Set the affinity of a thread; returns None, "gone" or an error text."""
    try:
        os.sched_setaffinity(tid, cpus)
    except ProcessLookupError:
        return "gone"
    except OSError as exc:
        return to_native(exc)
    return None


def excluded_pids(table):
    """This module's own process and its ancestors, which rules must never bind."""
    own = os.getpid()
    excluded = set([own])
    try:
        excluded.update(table.ancestors(own))
    except ChangeError:
        pass
    return excluded
