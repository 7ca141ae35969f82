# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Unpack files of a ttar text archive (node_exporter's fixture format) under a root, byte for byte.

    python3 ttar.py ARCHIVE ROOT [KEEP]

Each file is ``Path: <path>``, ``Lines: <n>``, the n lines of the file, ``Mode: <octal>``; directories and
links are not needed here and are skipped. Only paths that contain KEEP (default: every path) are written.
Standard library only: it runs on the fake nodes' system Python too.
"""

from __future__ import annotations

import os
import sys


def unpack(path, root, keep=""):
    """Write the files of ``path`` whose path contains ``keep`` under ``root``; returns their paths."""
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    written = []
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.startswith("Path: "):
            continue
        name = line[len("Path: "):]
        count = 0
        if index < len(lines) and lines[index].startswith("Lines: "):
            count = int(lines[index][len("Lines: "):])
            index += 1
        body = lines[index:index + count]
        index += count
        mode = 0o644
        if index < len(lines) and lines[index].startswith("Mode: "):
            mode = int(lines[index][len("Mode: "):], 8)
        if keep in name and ".." not in name.split("/"):
            target = os.path.join(root, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as handle:
                handle.write("".join(part + "\n" for part in body))
            os.chmod(target, mode)
            written.append(target)
    return written


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: ttar.py ARCHIVE ROOT [KEEP]")
    print(len(unpack(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else "")))
