# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""Versioned state files that record what a module changed, so it can be put back.

One JSON file per module (``kind``) under ``/var/lib/llm_cluster/``::

    {"version": 1, "kind": "npu_bind", "boot_id": "<boot of the last write>",
     "entries": {"<key>": {...original value and identity...}}}

* ``load_state`` tolerates a missing file (empty document) and refuses files
  written by a newer format version, of another kind or that are not JSON.
* ``record_original`` stores an entry only when its key is not there yet, so a
  second apply never replaces the recorded original with a value the module
  wrote itself.
* ``drop_entry`` removes an entry once it has been restored; ``remove_state``
  removes the file once its last entry is gone, so a complete restore leaves
  no file behind.
* ``save_state`` writes atomically (``_fileio.atomic_write``: a temporary file
  in the same directory, ``fsync``, ``os.replace``, then an ``fsync`` of the
  directory). Files are
  mode 0600 (only root reads what root may restore); the directory is created
  with mode 0755.

Entries that describe runtime kernel state (affinities, IRQs, sysctls) carry
the ``boot_id`` they were recorded in; ``drop_other_boots`` discards them after
a reboot, when the kernel has already forgotten the change. A process is
identified by PID, start time (field 22 of ``/proc/<pid>/stat``, in clock
ticks since boot) and boot id, so a restore never touches a reused PID.
"""

from __future__ import annotations

import errno
import json
import os

from ansible_collections.aihost.llm_cluster.plugins.module_utils._fileio import atomic_write, read_text

STATE_VERSION = 1
DEFAULT_STATE_DIR = "/var/lib/llm_cluster"
FILE_MODE = 0o600
DIR_MODE = 0o755


class StateFileError(Exception):
    """A state file that cannot be read, understood or written."""


# ---------------------------------------------------------------------------
# Identity: boot id, process start time
# ---------------------------------------------------------------------------

def read_boot_id(proc_root="/proc"):
    """Return the boot id from ``<proc_root>/sys/kernel/random/boot_id``, or None."""
    value = read_text(os.path.join(proc_root, "sys/kernel/random/boot_id"), encoding="ascii", errors="strict")
    return (value or "").strip() or None


def parse_stat(text):
    """Parse ``/proc/<pid>/stat`` (or ``task/<tid>/stat``).

    Returns a dict with ``pid``, ``comm``, ``state``, ``ppid`` and
    ``start_time`` (field 22). ``comm`` may hold spaces and parentheses, so
    it is taken between the first ``(`` and the last ``)``.
    Raises ValueError on malformed text.
    """
    open_at = text.find("(")
    close_at = text.rfind(")")
    if open_at < 0 or close_at < open_at:
        raise ValueError("malformed stat line: %r" % text[:80])
    pid = text[:open_at].strip()
    rest = text[close_at + 1:].split()
    # rest[0] is field 3 (state), so field N is rest[N - 3].
    if not pid.isdigit() or len(rest) < 20:
        raise ValueError("malformed stat line: %r" % text[:80])
    return {
        "pid": int(pid),
        "comm": text[open_at + 1:close_at],
        "state": rest[0],
        "ppid": int(rest[1]),
        "start_time": int(rest[19]),
    }


def read_stat(pid, proc_root="/proc", tid=None):
    """Parsed ``<proc_root>/<pid>/stat`` (or ``task/<tid>/stat``), None when gone."""
    if tid is None:
        path = os.path.join(proc_root, str(pid), "stat")
    else:
        path = os.path.join(proc_root, str(pid), "task", str(tid), "stat")
    text = read_text(path)
    if text is None:
        return None
    try:
        return parse_stat(text)
    except ValueError:
        return None


def read_start_time(pid, proc_root="/proc", tid=None):
    """Start time (clock ticks after boot) of a process or thread, None when gone."""
    stat = read_stat(pid, proc_root, tid)
    return None if stat is None else stat["start_time"]


def process_identity(pid, proc_root="/proc", boot_id=None):
    """``{"pid", "start_time", "boot_id"}`` of a live process, None when it is gone."""
    start_time = read_start_time(pid, proc_root)
    if start_time is None:
        return None
    return {"pid": int(pid), "start_time": start_time, "boot_id": boot_id}


def identity_mismatch(recorded, proc_root="/proc", boot_id=None, tid=None):
    """Why ``recorded`` no longer names the same process (or thread); None when it does.

    ``recorded`` holds ``pid``, ``start_time`` and ``boot_id`` (and, for a
    thread, ``tid`` and ``tid_start_time``).
    """
    if recorded.get("boot_id") != boot_id:
        return "recorded in another boot (%s)" % recorded.get("boot_id")
    pid = recorded["pid"]
    start_time = read_start_time(pid, proc_root)
    if start_time is None:
        return "process %s has exited" % pid
    if start_time != recorded.get("start_time"):
        return "PID %s was reused by another process (start time %s, recorded %s)" % (
            pid, start_time, recorded.get("start_time"))
    if tid is not None:
        tid_start = read_start_time(pid, proc_root, tid)
        if tid_start is None:
            return "thread %s has exited" % tid
        if recorded.get("tid_start_time") is not None and tid_start != recorded["tid_start_time"]:
            return "TID %s was reused by another thread" % tid
    return None


# ---------------------------------------------------------------------------
# The document
# ---------------------------------------------------------------------------

def state_path(state_dir, kind):
    """Path of the state file of ``kind`` in ``state_dir``."""
    return os.path.join(state_dir or DEFAULT_STATE_DIR, "%s.json" % kind)


def new_state(kind, boot_id=None):
    """An empty state document."""
    return {"version": STATE_VERSION, "kind": kind, "boot_id": boot_id, "entries": {}}


def parse_state(text, kind, path="state file"):
    """Validate and return a state document read from ``text``."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise StateFileError("%s is not valid JSON (%s); move it away to start afresh" % (path, exc))
    if not isinstance(doc, dict) or not isinstance(doc.get("version"), int):
        raise StateFileError("%s has no integer 'version'; move it away to start afresh" % path)
    if doc["version"] > STATE_VERSION:
        raise StateFileError(
            "%s has format version %d, newer than the version %d this collection understands; "
            "it was written by a newer aihost.llm_cluster: run that version (or restore with it) "
            "instead of overwriting its records" % (path, doc["version"], STATE_VERSION))
    if doc["version"] < 1:
        raise StateFileError("%s has unknown format version %d" % (path, doc["version"]))
    if doc.get("kind") != kind:
        raise StateFileError("%s holds %r records, expected %r" % (path, doc.get("kind"), kind))
    entries = doc.get("entries")
    if not isinstance(entries, dict):
        raise StateFileError("%s has no 'entries' object" % path)
    doc.setdefault("boot_id", None)
    return doc


def load_state(state_dir, kind, boot_id=None):
    """Load the state document of ``kind``; an empty one when the file does not exist."""
    path = state_path(state_dir, kind)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return new_state(kind, boot_id)
        raise StateFileError("cannot read %s: %s" % (path, exc))
    return parse_state(text, kind, path)


def save_state(state_dir, kind, doc, boot_id=None):
    """Write ``doc`` atomically; returns the path. A ``boot_id`` given is stored as the writer's boot."""
    path = state_path(state_dir, kind)
    doc = dict(doc)
    doc["version"] = STATE_VERSION
    doc["kind"] = kind
    if boot_id is not None:
        doc["boot_id"] = boot_id
    data = json.dumps(doc, indent=1, sort_keys=True).encode("utf-8") + b"\n"
    try:
        atomic_write(path, data, mode=FILE_MODE, prefix=".%s." % kind, suffix=".tmp", dir_mode=DIR_MODE)
    except OSError as exc:
        raise StateFileError("cannot write %s: %s" % (path, exc))
    return path


def remove_state(state_dir, kind):
    """Remove the state file of ``kind`` (nothing left to restore); a missing file is fine."""
    path = state_path(state_dir, kind)
    try:
        os.unlink(path)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise StateFileError("cannot remove %s: %s" % (path, exc))
    return path


def record_original(doc, key, entry):
    """Store ``entry`` under ``key`` unless the key is recorded already; True when stored."""
    entries = doc["entries"]
    if key in entries:
        return False
    entries[key] = entry
    return True


def get_entry(doc, key):
    """The entry recorded under ``key``, or None."""
    return doc["entries"].get(key)


def drop_entry(doc, key):
    """Remove ``key``; returns the removed entry or None."""
    return doc["entries"].pop(key, None)


def drop_other_boots(doc, boot_id):
    """Remove entries recorded in another boot (those with a different ``boot_id``).

    Entries without a ``boot_id`` (persistent files) are kept. Returns the
    removed keys, sorted.
    """
    stale = sorted(key for key, entry in doc["entries"].items()
                   if isinstance(entry, dict) and "boot_id" in entry and entry["boot_id"] != boot_id)
    for key in stale:
        del doc["entries"][key]
    return stale
