# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The sender's rsync daemon runs this before every transfer (``pre-xfer exec`` in rsyncd.conf).

In a chain the sender is itself still receiving the model from the node before it. This holds each request
until every requested file is complete here (rsync writes under a temporary name and renames at the end, so
a file under its own name is complete), then exits 0 and the daemon starts sending at once: the receiver
does not poll. Waits on inotify (through libc, Python's standard library only), re-checking at least every
second; without inotify it checks every 0.1 s (a local stat, cheap).

It gives up with exit status 1 and one line on stdout, which the daemon shows to the receiver:

* ``llm_cluster: the sender failed: <reason>`` when this node's own pull failed (its marker
  ``.llm_cluster-fetch-failed`` is in the module directory): the receiver fails at once;
* ``llm_cluster: not yet: <path>`` after one slice (``--slice`` seconds, and at most half the
  ``--timeout`` the receiver asked for, so that its rsync never times out while it is held): the receiver
  asks again until its own wait runs out.

The request comes from rsync's environment: RSYNC_MODULE_PATH, and RSYNC_ARG0.. where the arguments after
``.`` are the requested paths relative to the module (rsyncd.conf(5), "pre-xfer exec").

It runs once per connection, so it starts light (the role runs it with ``python3 -S -I``): a file that is
already complete passes with no more than ``os``, ``select``, ``sys`` and ``time`` loaded; ``ctypes`` only
loads when it has to wait.
"""

from __future__ import annotations

import os
import select
import sys
import time

MARKER = ".llm_cluster-fetch-failed"
NOT_YET = "llm_cluster: not yet:"
FAILED = "llm_cluster: the sender failed:"
# inotify(7): a file created, renamed into the directory, or closed after writing.
IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x08, 0x80, 0x100


def request(environ):
    """(paths relative to the module, the receiver's --timeout or 0) from rsync's RSYNC_ARG# variables."""
    args, index = [], 0
    while "RSYNC_ARG%d" % index in environ:
        args.append(environ["RSYNC_ARG%d" % index])
        index += 1
    split = args.index(".") if "." in args else len(args)
    timeout = 0
    for arg in args[:split]:
        if arg.startswith("--timeout="):
            try:
                timeout = int(arg.split("=", 1)[1])
            except ValueError:
                pass
    return args[split + 1:], timeout


def local_path(root, path):
    """The file a requested path names under the module root; None outside it (rsync refuses those itself)."""
    full = os.path.normpath(os.path.join(root, path.lstrip("/")))
    return full if full == root or full.startswith(root.rstrip("/") + "/") else None


class Watch(object):
    """Wakes up when something is created or renamed in the watched directories (inotify), else every 0.1 s."""

    def __init__(self, directories):
        self.fd = -1
        self.complete = True
        try:
            import ctypes
            import ctypes.util
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fd = libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        except (OSError, AttributeError):
            return
        if fd < 0:
            return
        self.fd = fd
        for directory in sorted(set(directories)):
            if libc.inotify_add_watch(fd, directory.encode(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) < 0:
                # Not there yet (a subdirectory still to come): fall back to short sleeps.
                self.complete = False

    def wait(self, seconds):
        if self.fd < 0 or not self.complete:
            time.sleep(min(seconds, 0.1))
            return
        if select.select([self.fd], [], [], min(seconds, 1.0))[0]:
            try:
                os.read(self.fd, 65536)
            except OSError:
                pass

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)


def hold(root, paths, seconds, out):
    """Return 0 once every path is complete under root, 1 (after one line on out) on the marker or after seconds."""
    files = [full for full in (local_path(root, path) for path in paths) if full]
    marker = os.path.join(root, MARKER)
    if all(os.path.exists(full) for full in files):
        return 0
    deadline = time.time() + seconds
    watch = Watch([root] + [os.path.dirname(full) for full in files])
    try:
        while True:
            missing = [full for full in files if not os.path.exists(full)]
            if not missing:
                return 0
            if os.path.exists(marker):
                try:
                    with open(marker) as handle:
                        reason = handle.read().strip().splitlines()[0]
                except (IOError, OSError, IndexError):
                    reason = "see its transfer"
                out.write("%s %s\n" % (FAILED, reason))
                return 1
            left = deadline - time.time()
            if left <= 0:
                out.write("%s %s\n" % (NOT_YET, os.path.relpath(missing[0], root)))
                return 1
            watch.wait(left)
    finally:
        watch.close()


def main(argv=None, environ=None, out=None):
    """Usage: sender_wait.py [--slice SECONDS] (the longest hold of one request, 300 s by default)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--slice"] and len(argv) == 2:
        limit = float(argv[1])
    elif argv:
        sys.stderr.write("usage: sender_wait.py [--slice SECONDS]\n")
        return 2
    else:
        limit = 300.0
    environ = os.environ if environ is None else environ
    root = environ.get("RSYNC_MODULE_PATH", "")
    paths, timeout = request(environ)
    if not root or not paths:
        return 0
    seconds = min(limit, timeout / 2.0) if timeout else limit
    return hold(os.path.normpath(root), paths, max(seconds, 1.0), out or sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
