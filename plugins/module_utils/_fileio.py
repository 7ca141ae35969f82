# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""Reading small files and replacing files atomically.

Standard library only, no AnsibleModule.

* ``read_bytes`` / ``read_text``: the whole content of a procfs, sysfs or
  configuration file, ``None`` when it cannot be read (a process that exited,
  an IRQ that was freed), so callers decide what a missing file means.
* ``atomic_write``: a temporary file in the same directory, written,
  ``fsync``'d and given its mode, then moved over the target (``os.replace``,
  or the caller's ``move`` such as ``AnsibleModule.atomic_move``), then an
  ``fsync`` of the directory. Readers see the old or the new content, never a
  part; the temporary file is removed when anything fails.
"""

from __future__ import annotations

import os
import stat
import tempfile

NEW_FILE_MODE = 0o644


def read_bytes(path):
    """Content of ``path`` as bytes, None when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def read_text(path, encoding="utf-8", errors="replace"):
    """Content of ``path`` as text, None when it cannot be read or decoded (with ``errors="strict"``)."""
    data = read_bytes(path)
    if data is None:
        return None
    try:
        return data.decode(encoding, errors)
    except UnicodeDecodeError:
        return None


def atomic_write(path, data, mode=None, prefix=None, suffix="", dir_mode=None, move=None):
    """Replace ``path`` with ``data`` (bytes, or text written as UTF-8) atomically; returns ``path``.

    ``mode``: the mode of the new file; None keeps the mode of the file it replaces (0644 for a new one).
    ``prefix``/``suffix``: the temporary file's name around mkstemp's random part
    (default ``.<name>.``). ``dir_mode``: create the directory (and its parents) with
    this mode when missing; by default a missing directory is an error.
    ``move``: ``move(tmp, path)`` instead of ``os.replace``, e.g. ``AnsibleModule.atomic_move``
    (which also keeps the owner and SELinux context of the file it replaces).
    Raises OSError; nothing is left behind on failure.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    if dir_mode is not None:
        os.makedirs(directory, mode=dir_mode, exist_ok=True)
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            mode = NEW_FILE_MODE
    if prefix is None:
        prefix = ".%s." % os.path.basename(path)
    fd, tmp_path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        (move or os.replace)(tmp_path, path)
        tmp_path = None
    finally:
        if tmp_path is not None:
            try:
                os.unlink(tmp_path)
            except OSError:
                pass
    fsync_dir(directory)
    return path


def fsync_dir(directory):
    """``fsync`` a directory so a rename in it survives a crash; errors are ignored."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
