# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Free space of the filesystem that holds (or will hold) a path."""

from __future__ import annotations

import os


def filesystem(path):
    """Size and free bytes (for unprivileged users) of the filesystem of path or of its nearest existing parent.

    Returns {"path", "checked" (the directory measured), "size", "free"}; size and free are None when even
    the parent cannot be measured.
    """
    probe = os.path.abspath(path)
    while not os.path.exists(probe) and probe != os.path.dirname(probe):
        probe = os.path.dirname(probe)
    try:
        stat = os.statvfs(probe)
    except OSError:
        return {"path": path, "checked": probe, "size": None, "free": None}
    return {"path": path, "checked": probe, "size": stat.f_blocks * stat.f_frsize, "free": stat.f_bavail * stat.f_frsize}
