# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Manifests of a model directory (sizes and SHA-256 of every file), built at the source, verified at a copy.

A manifest is JSON::

    {"version": 1, "total_bytes": <sum of sizes>, "digest": "<sha256 hex>",
     "files": [{"path": "sub/name", "size": <bytes>, "mtime": <st_mtime_ns>, "sha256": "<hex>"}, ...]}

* ``files`` is sorted by ``path`` (relative, ``/``-separated).
* ``digest`` is the SHA-256 of the canonical JSON of ``[[path, size, sha256], ...]`` (see
  ``canonical_digest``). ``mtime`` does not enter it: a copy has other mtimes and the same digest.
* ``build`` reuses the SHA-256 of an earlier manifest's entry whose path, size and mtime are unchanged
  (unless ``full``), so refreshing the manifest of an unchanged tree reads no file.
* ``verify`` compares a tree with a manifest. With the copy's last verification record
  ``{"version": 1, "digest": ..., "files": {path: {"size", "mtime", "sha256"}}}`` written for the same
  digest, files whose size and mtime are unchanged since are trusted without being read (unless ``full``).

Both fast paths trust size + mtime the way ``rsync`` does by default; ``full`` hashes everything.

What the walk records (``walk``):

* every regular file under the root, recursively, and every symlink to a regular file whose target
  resolves inside the root (recorded as a file, with the target's size and mtime);
* not: symlinks to directories (never descended), symlinks that resolve outside the root or
  dangle, special files (sockets, fifos, devices). Those are listed in the ``skipped`` stats;
* not: at the top level, the bookkeeping files ``.llm_cluster-manifest.json`` and
  ``.llm_cluster-verified.json`` and the temporary files ``save_json`` writes beside them
  (any top-level name starting with ``.llm_cluster-``);
* not: rsync leftovers at any depth, i.e. (1) any file or directory whose name starts with ``.`` and
  contains ``.~tmp~`` (the ``--delay-updates`` directory ``.~tmp~`` and what lies in it) and (2) any file
  named like rsync's in-flight temporary files ``.<name>.XXXXXX`` (a dot, a name, a dot and six
  letters or digits, e.g. ``.model-00001-of-00004.safetensors.Xa3bQ9``).

SHA-256 is computed in 8 MiB chunks read into one reused buffer; ``hashlib`` releases the GIL on
buffers of this size, so a thread pool hashes several files on several cores.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import re
import stat

from ansible_collections.aihost.llm_cluster.plugins.module_utils._fileio import atomic_write

MANIFEST_VERSION = 1
MANIFEST_NAME = ".llm_cluster-manifest.json"
RECORD_NAME = ".llm_cluster-verified.json"
BOOKKEEPING_PREFIX = ".llm_cluster-"
CHUNK_SIZE = 8 * 1024 * 1024
FILE_MODE = 0o644
MAX_WORKERS = 8

REASONS = ("missing", "size", "sha256", "extra")

_RSYNC_TEMP_RE = re.compile(r"^\..+\.[A-Za-z0-9]{6}$")
# Where model transfers keep partial files, beside each file (rsync --partial-dir); skipped at any depth.
PARTIAL_DIR = ".llm_cluster-partial"
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


# ---------------------------------------------------------------------------
# Walking a tree
# ---------------------------------------------------------------------------

def is_rsync_leftover(name, is_dir=False):
    """True for names rsync leaves behind: ``.~tmp~`` names, and (files only) ``.<name>.XXXXXX`` temporaries."""
    if not name.startswith("."):
        return False
    if ".~tmp~" in name:
        return True
    return not is_dir and bool(_RSYNC_TEMP_RE.match(name))


def is_bookkeeping(relpath):
    """True for the top-level bookkeeping files (and their temporary files) of this module."""
    return "/" not in relpath and relpath.startswith(BOOKKEEPING_PREFIX)


def _inside(real_root, target):
    return target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep)


def walk(root, skipped=None):
    """Return the files under ``root`` as dicts ``{"path", "size", "mtime"}``, sorted by path.

    ``path`` is relative to ``root`` with ``/`` separators, ``mtime`` is ``st_mtime_ns``. Symlinks are not
    followed out of the tree (see the module docstring). When ``skipped`` is a list, the relative paths
    of the symlinks and special files left out are appended to it (rsync leftovers and bookkeeping files
    are left out silently). Raises OSError when ``root`` cannot be listed.
    """
    real_root = os.path.realpath(root)
    found = []

    def on_error(exc):
        raise exc

    for dirpath, dirnames, filenames in os.walk(root, onerror=on_error, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        prefix = "" if rel_dir == os.curdir else rel_dir.replace(os.sep, "/") + "/"
        kept = []
        for name in sorted(dirnames):
            full = os.path.join(dirpath, name)
            if is_rsync_leftover(name, is_dir=True) or name == PARTIAL_DIR:
                continue
            if os.path.islink(full):
                # os.walk lists symlinks to directories among dirnames and does not descend into them.
                if skipped is not None:
                    skipped.append(prefix + name)
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in filenames:
            relpath = prefix + name
            if is_rsync_leftover(name) or is_bookkeeping(relpath):
                continue
            full = os.path.join(dirpath, name)
            try:
                info = os.lstat(full)
                if stat.S_ISLNK(info.st_mode):
                    if not _inside(real_root, os.path.realpath(full)):
                        raise FileNotFoundError(full)
                    info = os.stat(full)
            except OSError:
                # Dangling link, link out of the tree, or a file removed while walking.
                if skipped is not None:
                    skipped.append(relpath)
                continue
            if not stat.S_ISREG(info.st_mode):
                if skipped is not None:
                    skipped.append(relpath)
                continue
            found.append({"path": relpath, "size": info.st_size, "mtime": info.st_mtime_ns})
    found.sort(key=lambda entry: entry["path"])
    if skipped is not None:
        skipped.sort()
    return found


def _abs(root, relpath):
    return os.path.join(root, *relpath.split("/"))


# ---------------------------------------------------------------------------
# Hashing
# ---------------------------------------------------------------------------

def default_workers():
    """Threads used to hash when ``workers`` is 0: min(8, number of CPUs)."""
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


def sha256_file(path, chunk_size=CHUNK_SIZE):
    """Return the SHA-256 hex digest of the file at ``path``, read in ``chunk_size`` chunks."""
    digest = hashlib.sha256()
    buffer = bytearray(chunk_size)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while True:
            count = handle.readinto(buffer)
            if not count:
                break
            digest.update(view[:count])
    return digest.hexdigest()


def hash_files(paths, workers=0, chunk_size=CHUNK_SIZE):
    """Return ``{path: sha256 hex}`` for ``paths``, hashed by a pool of ``workers`` threads (0: automatic).

    The first error (an OSError from opening or reading a file) is raised once the pool has stopped.
    """
    paths = list(paths)
    if not paths:
        return {}
    workers = workers if workers and workers > 0 else default_workers()
    workers = min(workers, len(paths))
    if workers == 1:
        return {path: sha256_file(path, chunk_size) for path in paths}
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {path: pool.submit(sha256_file, path, chunk_size) for path in paths}
        try:
            return {path: future.result() for path, future in futures.items()}
        except BaseException:
            for future in futures.values():
                future.cancel()
            raise


# ---------------------------------------------------------------------------
# Digest, manifest checks
# ---------------------------------------------------------------------------

def canonical_digest(files):
    """SHA-256 hex of the canonical JSON of ``[[path, size, sha256], ...]`` sorted by path (mtime left out)."""
    rows = sorted([entry["path"], int(entry["size"]), entry["sha256"]] for entry in files)
    text = json.dumps(rows, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _safe_relpath(path):
    if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path or "\0" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def check_manifest(manifest):
    """Return a normalised copy of ``manifest`` or raise ValueError saying what is wrong with it.

    Checks the version, every entry (a relative path without ``..``, an integer size >= 0, a SHA-256 hex),
    duplicate paths, and that ``digest`` is the digest of the entries.
    """
    if not isinstance(manifest, dict):
        raise ValueError("the manifest is not a JSON object")
    if manifest.get("version") != MANIFEST_VERSION:
        raise ValueError("manifest version %r is not supported (expected %d)" % (manifest.get("version"), MANIFEST_VERSION))
    entries = manifest.get("files")
    if not isinstance(entries, list):
        raise ValueError("the manifest has no list of files")
    files = []
    seen = set()
    for entry in entries:
        if not isinstance(entry, dict):
            raise ValueError("manifest entry %r is not an object" % (entry,))
        path = entry.get("path")
        if not _safe_relpath(path):
            raise ValueError("manifest path %r is not a relative path inside the tree" % (path,))
        if path in seen:
            raise ValueError("manifest path %r is listed twice" % path)
        seen.add(path)
        try:
            size = int(entry.get("size"))
            mtime = int(entry.get("mtime", 0) or 0)
        except (TypeError, ValueError):
            raise ValueError("manifest entry %r has a size or mtime that is not an integer" % path) from None
        sha = str(entry.get("sha256", "")).lower()
        if size < 0 or not _SHA256_RE.match(sha):
            raise ValueError("manifest entry %r has a negative size or no SHA-256" % path)
        files.append({"path": path, "size": size, "mtime": mtime, "sha256": sha})
    files.sort(key=lambda item: item["path"])
    digest = canonical_digest(files)
    if str(manifest.get("digest", "")).lower() != digest:
        raise ValueError("the manifest digest %r does not match its files (%s)" % (manifest.get("digest"), digest))
    return {"version": MANIFEST_VERSION, "files": files, "total_bytes": sum(item["size"] for item in files), "digest": digest}


def _usable_previous(previous):
    """``{path: entry}`` of an earlier manifest, or {} when it is absent or malformed."""
    if not previous:
        return {}
    try:
        checked = check_manifest(previous)
    except ValueError:
        return {}
    return {entry["path"]: entry for entry in checked["files"]}


def _usable_record(record, digest):
    """``{path: {"size", "mtime", "sha256"}}`` of a verification record made for ``digest``, else {}."""
    if not isinstance(record, dict) or record.get("digest") != digest or not isinstance(record.get("files"), dict):
        return {}
    usable = {}
    for path, entry in record["files"].items():
        if isinstance(entry, dict):
            try:
                usable[path] = {"size": int(entry["size"]), "mtime": int(entry["mtime"]), "sha256": str(entry["sha256"])}
            except (KeyError, TypeError, ValueError):
                continue
    return usable


# ---------------------------------------------------------------------------
# Build and verify
# ---------------------------------------------------------------------------

def build(root, previous=None, full=False, workers=0):
    """Build the manifest of the tree at ``root``.

    ``previous`` is an earlier manifest of the same root: an entry with the same path, size and mtime keeps
    its SHA-256 without reading the file, unless ``full``. Returns ``(manifest, stats)`` where stats is
    ``{"hashed": <files read>, "reused": <files whose SHA-256 was reused>, "hashed_bytes": <bytes read>,
    "skipped": [<symlinks and special files left out>]}``. Raises OSError when the tree cannot be read.
    """
    skipped = []
    files = walk(root, skipped)
    known = {} if full else _usable_previous(previous)
    to_hash = []
    for entry in files:
        old = known.get(entry["path"])
        if old and old["size"] == entry["size"] and old["mtime"] == entry["mtime"]:
            entry["sha256"] = old["sha256"]
        else:
            to_hash.append(entry)
    sums = hash_files([_abs(root, entry["path"]) for entry in to_hash], workers)
    for entry in to_hash:
        entry["sha256"] = sums[_abs(root, entry["path"])]
    manifest = {
        "version": MANIFEST_VERSION,
        "files": files,
        "total_bytes": sum(entry["size"] for entry in files),
        "digest": canonical_digest(files),
    }
    stats = {
        "hashed": len(to_hash),
        "reused": len(files) - len(to_hash),
        "hashed_bytes": sum(entry["size"] for entry in to_hash),
        "skipped": skipped,
    }
    return manifest, stats


def verify(root, manifest, record=None, full=False, workers=0):
    """Compare the tree at ``root`` with ``manifest``; ``root`` may not exist (then every file is missing).

    ``record`` is the copy's last verification record; when it was made for this manifest's digest, a file
    whose size and mtime are unchanged since is trusted without being read, unless ``full``.

    Returns a dict:

    * ``ok``: True when the tree matches the manifest exactly (no mismatch of any kind, extras included);
    * ``mismatches``: ``{"path", "reason", "expected", "found"}`` sorted by path, where reason is
      ``missing`` (expected: size, found: None), ``size`` (expected and found sizes),
      ``sha256`` (expected and found SHA-256) or ``extra`` (a file not in the manifest; expected: None,
      found: its size);
    * ``bad_files``: paths to send again (missing, size, sha256; not extras), sorted;
    * ``present_bytes`` / ``missing_bytes``: manifest bytes of the files that verified / of ``bad_files``;
    * ``hashed`` / ``trusted``: files read / files trusted from the record;
    * ``digest``, ``total_bytes``: the manifest's;
    * ``record``: the verification record of this tree (only meaningful when ``ok``).

    Raises ValueError for a malformed manifest and OSError when the tree cannot be read.
    """
    checked = check_manifest(manifest)
    expected = {entry["path"]: entry for entry in checked["files"]}
    present = {entry["path"]: entry for entry in walk(root)} if os.path.isdir(root) else {}
    trusted_entries = {} if full else _usable_record(record, checked["digest"])

    mismatches = []
    good = {}
    to_hash = []
    trusted = 0
    for path, want in expected.items():
        have = present.get(path)
        if have is None:
            mismatches.append({"path": path, "reason": "missing", "expected": want["size"], "found": None})
        elif have["size"] != want["size"]:
            mismatches.append({"path": path, "reason": "size", "expected": want["size"], "found": have["size"]})
        else:
            old = trusted_entries.get(path)
            if old and old["size"] == have["size"] and old["mtime"] == have["mtime"] and old["sha256"] == want["sha256"]:
                good[path] = have
                trusted += 1
            else:
                to_hash.append(path)
    sums = hash_files([_abs(root, path) for path in to_hash], workers)
    for path in to_hash:
        found = sums[_abs(root, path)]
        if found == expected[path]["sha256"]:
            good[path] = present[path]
        else:
            mismatches.append({"path": path, "reason": "sha256", "expected": expected[path]["sha256"], "found": found})
    for path in present:
        if path not in expected:
            mismatches.append({"path": path, "reason": "extra", "expected": None, "found": present[path]["size"]})
    mismatches.sort(key=lambda item: (item["path"], item["reason"]))
    bad_files = [item["path"] for item in mismatches if item["reason"] != "extra"]

    new_record = {
        "version": MANIFEST_VERSION,
        "digest": checked["digest"],
        "files": {path: {"size": have["size"], "mtime": have["mtime"], "sha256": expected[path]["sha256"]}
                  for path, have in sorted(good.items())},
    }
    return {
        "ok": not mismatches,
        "mismatches": mismatches,
        "bad_files": bad_files,
        "present_bytes": sum(expected[path]["size"] for path in good),
        "missing_bytes": sum(expected[path]["size"] for path in bad_files),
        "hashed": len(to_hash),
        "trusted": trusted,
        "digest": checked["digest"],
        "total_bytes": checked["total_bytes"],
        "record": new_record,
    }


# ---------------------------------------------------------------------------
# JSON files
# ---------------------------------------------------------------------------

def load_json(path):
    """Return the JSON document at ``path``, or None when there is no such file.

    Raises ValueError when the file is not valid JSON and OSError when it cannot be read.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError("%s is not valid JSON: %s" % (path, exc)) from None


def dumps_json(data):
    """The text ``save_json`` writes: sorted keys, one-space indent, trailing newline."""
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def save_json(path, data, mode=FILE_MODE):
    """Write ``data`` as JSON to ``path`` atomically (``_fileio.atomic_write``: temporary file in the same
    directory, fsync, os.replace).

    The file is left with ``mode`` (0644). The temporary file is named ``<name>.tmp-XXXXXXXX`` beside it and is
    removed on failure.
    """
    atomic_write(path, dumps_json(data), mode=mode, prefix=os.path.basename(path) + ".tmp-")
