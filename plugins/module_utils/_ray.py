# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Ray node facts read from files: the venv, memory limits, /dev/shm, the object store size.

Pure functions over paths and texts, so the modules stay thin and the rules are unit-tested.
"""

from __future__ import annotations

import glob
import os
import re

# Ray refuses an object store below 75 MiB (ray_constants.OBJECT_STORE_MINIMUM_MEMORY_BYTES).
OBJECT_STORE_MINIMUM = 75 * 1024 * 1024
# Share of the node's memory Ray itself would give the object store.
OBJECT_STORE_MEMORY_SHARE = 0.3
# Share of /dev/shm the object store may take, leaving room for other shared memory users.
OBJECT_STORE_SHM_SHARE = 0.8
MIB = 1024 * 1024
_UNLIMITED = 1 << 60


def read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError, UnicodeDecodeError):
        return None


def parse_pyvenv_cfg(text):
    """Return the Python version a venv was made with ('3.11.2'), from pyvenv.cfg text, or None."""
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    return values.get("version_info") or values.get("version") or None


def parse_metadata_version(text):
    """Return the Version: field of a wheel's METADATA text, or None."""
    for line in (text or "").splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
        if not line.strip():
            break
    return None


def installed_version(venv, name):
    """Version of distribution ``name`` in the venv, from its wheel METADATA (no Python started), or None.

    ``name`` is the wheel's escaped project name (``ray``, ``grpcio``): a dist-info directory is
    ``<name>-<version>.dist-info``, so ``grpcio`` does not match ``grpcio_tools``.
    """
    for metadata in sorted(glob.glob(os.path.join(venv, "lib", "python*", "site-packages", name + "-*.dist-info", "METADATA"))):
        version = parse_metadata_version(read_text(metadata))
        if version:
            return version
    return None


def venv_facts(venv):
    """Describe a Ray venv: whether it exists, its Python version, and the installed Ray and grpcio.

    grpcio is what makes Ray start its client server (ray[client]); the role installs it.
    """
    python = os.path.join(venv, "bin", "python")
    return {"path": venv, "exists": os.path.isdir(venv), "python": python if os.path.exists(python) else None,
            "python_version": parse_pyvenv_cfg(read_text(os.path.join(venv, "pyvenv.cfg"))),
            "ray_version": installed_version(venv, "ray"), "grpcio_version": installed_version(venv, "grpcio")}


def minor_version(version):
    """'3.11.2' -> '3.11'; None stays None."""
    if not version:
        return None
    return ".".join(str(version).split(".")[:2])


def parse_meminfo_total(text):
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text or "", re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def parse_cgroup_limit(text):
    """A cgroup v1 limit_in_bytes or v2 memory.max value in bytes; None when unlimited or unreadable."""
    value = (text or "").strip()
    if not value or value == "max":
        return None
    try:
        number = int(value)
    except ValueError:
        return None
    return number if number < _UNLIMITED else None


def memory_limit(root="/"):
    """Memory this node's processes may use: MemTotal, lowered by the cgroup limit when there is one."""
    total = parse_meminfo_total(read_text(os.path.join(root, "proc/meminfo")))
    limits = [parse_cgroup_limit(read_text(os.path.join(root, path))) for path in (
        "sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes")]
    found = [value for value in [total] + limits if value]
    return min(found) if found else None


def object_store_size(requested, memory, shm_size):
    """Return (bytes, problem): the object store for a node, or why none fits.

    requested > 0 is taken as asked and only checked against /dev/shm; 0 means Ray's own share of the
    memory, capped to fit in /dev/shm. Ray falls back to a slow disk-backed store when /dev/shm is too
    small, so that case is an error here rather than a warning in a log.
    """
    requested = int(requested or 0)
    if not shm_size:
        return None, "/dev/shm is missing or unreadable"
    room = int(shm_size * OBJECT_STORE_SHM_SHARE)
    if requested:
        if requested > shm_size:
            return None, "ray_cluster_object_store_memory is %d MiB but /dev/shm holds only %d MiB" % (
                requested // MIB, shm_size // MIB)
        if requested < OBJECT_STORE_MINIMUM:
            return None, "ray_cluster_object_store_memory is %d MiB; Ray needs at least 75 MiB" % (requested // MIB)
        return requested, None
    want = int((memory or 0) * OBJECT_STORE_MEMORY_SHARE) or room
    size = min(want, room) // MIB * MIB
    if size < OBJECT_STORE_MINIMUM:
        return None, "/dev/shm holds only %d MiB; the Ray object store needs at least %d MiB there" % (
            shm_size // MIB, -(-OBJECT_STORE_MINIMUM // int(OBJECT_STORE_SHM_SHARE * MIB)))
    return size, None
