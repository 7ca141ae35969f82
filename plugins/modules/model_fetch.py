#!/usr/bin/python
# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_fetch
short_description: Pull listed files of a model from a peer's rsync daemon, one by one, as soon as the peer has each
version_added: 0.2.0
description:
  - Pulls each file of O(files), in order, from an rsync daemon module (O(url)) into O(dest), keeping partial
    files in O(partial_dir) so that a transfer that is stopped resumes where it was.
  - Files smaller than O(batch_below) bytes according to O(sizes) (the json, tokenizer and configuration files
    of a checkpoint) are pulled first, together, over one rsync connection; the others in order, one by one or
    in groups of at most O(batch_bytes), so that a chain still pipelines them.
  - With O(wait) above 0 a file that the peer does not have yet is waited for (the peer is itself receiving it
    from the node before it). rsync writes under a temporary name and renames at the end, so a file that the peer
    has under its own name is complete. Chaining the nodes this way pipelines the transfer file by file; every
    link carries the model once, at the same time.
  - How it waits depends on O(sender_waits). With C(true), the peer's daemon runs the model_distribution role's
    C(pre-xfer exec) hook, which holds each request until the requested files are complete there; the pull
    starts at once and its data flows the moment the peer has the file. A hold that reaches the hook's slice
    is answered "not yet" (a line starting with C(llm_cluster) on stderr) and the pull is asked again until O(wait)
    runs out. With C(false), the
    peer is asked every O(poll) seconds (C(rsync --list-only)) until it lists the file, then the file is pulled.
  - The daemon's password is read from O(password_file); it never appears in a command line.
  - When a pull fails, a marker file C(.llm_cluster-fetch-failed) is left in O(dest), so that the node after this one
    in a chain sees it and fails at once instead of waiting for a file that will not come. The next run removes it.
  - A pull that fails to connect or breaks off (rsync exit codes 5, 10, 12, 30, 35; not a refused login) is tried
    again up to O(retries) times, after O(retry_delay) seconds, then twice that, and so on (at most 60 s); each try
    resumes from the partial file. The failure names the URL, rsync's exit code and last line, and the tries made.
options:
  url:
    description: The rsync daemon module, C(rsync://user@address:port/module).
    type: str
    required: true
  dest:
    description: Local model directory.
    type: path
    required: true
  files:
    description: Paths relative to the module and to O(dest), pulled in this order.
    type: list
    elements: str
    required: true
  password_file:
    description: File holding the daemon's password (mode 0600).
    type: path
    required: true
  partial_dir:
    description: Directory (relative to each file's directory) for partial files.
    type: str
    default: .llm_cluster-partial
  wait:
    description: Seconds to wait for each file to appear at the peer; 0 pulls at once.
    type: int
    default: 0
  poll:
    description: Seconds between looks at the peer while waiting, when O(sender_waits) is false.
    type: float
    default: 0.5
  sender_waits:
    description:
      - The peer's daemon holds each request until the requested files are complete there (the
        model_distribution role's C(pre-xfer exec) hook), so a file is pulled without polling. Only with
        O(wait) above 0.
    type: bool
    default: false
  sizes:
    description: Size in bytes of each file of O(files) (the source's manifest); a file not listed is pulled alone.
    type: dict
    default: {}
  batch_below:
    description: Files of fewer bytes than this (by O(sizes)) are pulled together over one connection; 0 pulls each alone.
    type: int
    default: 1048576
  batch_bytes:
    description:
      - After the small files, consecutive files that add up to at most this many bytes (by O(sizes)) are pulled
        over one connection, and held by the peer until all of them are complete there; a larger file goes alone.
      - A connection costs a fraction of a second (two rsync processes, the login, the daemon's fork and hook), which
        dominates when a checkpoint has many small shards; 0 pulls each file over its own connection.
    type: int
    default: 0
  retries:
    description: Tries after the first one of a pull whose connection failed or broke off; 0 tries once.
    type: int
    default: 3
  retry_delay:
    description: Seconds before the first retry; each next one waits twice as long as the one before, at most 60 s.
    type: float
    default: 2.0
  timeout:
    description: rsync's I/O timeout in seconds.
    type: int
    default: 600
  progress_file:
    description:
      - File rewritten every second while pulling, with the bytes received so far, the total, the rate and the
        file in progress (JSON), for a caller that follows a long transfer; empty writes none.
    type: path
    default: ""
  total_bytes:
    description: Size of all O(files) together, for the percentage in O(progress_file); 0 if unknown.
    type: int
    default: 0
  extra_args:
    description: More rsync arguments, for example C(--bwlimit=500m).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: In check mode nothing is pulled; the files that would be are returned.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
  platform:
    description: Linux hosts with rsync.
    support: full
    platforms: posix
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Pull two shards from the node before this one in the chain
  aihost.llm_cluster.model_fetch:
    url: rsync://llmc@192.168.10.12:8730/model
    dest: /srv/models/DeepSeek-R1
    files: [model-00001-of-00163.safetensors, model-00002-of-00163.safetensors]
    password_file: /run/llm_cluster/model/password
    wait: 3600
    sender_waits: true
    sizes: {config.json: 1093, model-00001-of-00163.safetensors: 4294967296}
"""

RETURN = r"""
files:
  description:
    - One entry per file pulled, in the order pulled, with the index of its pull in RV(pulls) and that pull's
      bytes received, seconds, seconds waited and tries (shared by the files pulled together).
  returned: always
  type: list
  elements: dict
  sample: [{"path": "model-00001-of-00163.safetensors", "pull": 1, "bytes_received": 4294967296, "seconds": 36.2,
            "waited": 1.5, "tries": 1}]
pulls:
  description:
    - One entry per rsync connection that brought files (a batch of small files, or one large file), in order.
    - C(waited) is the time spent waiting for the peer to have the files; with O(sender_waits) it is measured
      here as the time until rsync's first bytes of the pull appear in O(dest) (looked at every 0.05 s).
    - C(tries) counts the rsync runs of the last request, 1 when the first one brought the files (more after a
      connection that failed or broke off, see O(retries)).
  returned: always
  type: list
  elements: dict
  sample: [{"paths": ["config.json", "generation_config.json"], "bytes_received": 2201, "seconds": 0.3, "waited": 0.0,
            "tries": 1},
           {"paths": ["model-00001-of-00163.safetensors"], "bytes_received": 4294967296, "seconds": 36.2, "waited": 1.5,
            "tries": 2}]
tries:
  description: On failure, the rsync runs made for the request that failed.
  returned: failure
  type: int
  sample: 4
bytes_received:
  description: Bytes received over the network for all files (rsync's own count, protocol included).
  returned: always
  type: int
seconds:
  description: Wall time of the whole pull, waits included.
  returned: always
  type: float
"""

import glob
import json
import os
import re
import threading
import time

from ansible.module_utils.basic import AnsibleModule

_RECEIVED = re.compile(r"^Total bytes received:\s*([\d,.]+)", re.MULTILINE)
# rsync exit codes worth another try: protocol start (a daemon at its connection limit), socket I/O,
# protocol data stream, timeouts.
RETRY_CODES = (5, 10, 12, 30, 35)
# The longest pause between two tries, in seconds.
MAX_RETRY_DELAY = 60.0
# Left in dest when a pull fails, so that the node after this one in a chain stops waiting at once.
FAILED_MARKER = ".llm_cluster-fetch-failed"
# The first words of the line the sender's pre-xfer exec hook (roles/model_distribution/files/sender_wait.py)
# answers when it does not let a request through: its own pull failed, or the file is not complete yet.
SENDER_FAILED = "llm_cluster: the sender failed:"
SENDER_NOT_YET = "llm_cluster: not yet:"
# Small files pulled together per connection, at most (a command line per connection).
BATCH_FILES = 200


def parse_received(text):
    """Bytes received from rsync --stats output (digits may carry thousands separators)."""
    match = _RECEIVED.search(text or "")
    return int(re.sub(r"[,.]", "", match.group(1))) if match else 0


def source_of(url, path):
    return url.rstrip("/") + "/" + path.lstrip("/")


def check_path(path):
    parts = path.split("/")
    if not path or path.startswith("/") or ".." in parts:
        raise ValueError("file %r must be a relative path inside the model" % path)


def partial_size(dest, path):
    """Bytes of `path` received so far: rsync's temporary file (.<name>.XXXXXX) beside the target."""
    directory, name = os.path.split(os.path.join(dest, path))
    sizes = []
    for candidate in glob.glob(os.path.join(glob.escape(directory), "." + glob.escape(name) + ".*")):
        try:
            sizes.append(os.path.getsize(candidate))
        except OSError:
            pass
    return max(sizes or [0])


class Progress(threading.Thread):
    """Writes {file, files_done, files_total, bytes_done, bytes_total, percent, rate, waiting} every second."""

    def __init__(self, path, dest, files, total):
        super(Progress, self).__init__()
        self.daemon = True
        self.path, self.dest, self.files_total, self.total = path, dest, len(files), total
        self.done_bytes, self.done_files, self.current, self.waiting = 0, 0, None, False
        self.started = time.time()
        self.stop_event = threading.Event()

    def snapshot(self):
        so_far = self.done_bytes + (partial_size(self.dest, self.current) if self.current and not self.waiting else 0)
        elapsed = max(time.time() - self.started, 0.001)
        return {"file": self.current, "files_done": self.done_files, "files_total": self.files_total,
                "bytes_done": so_far, "bytes_total": self.total,
                "percent": round(100.0 * so_far / self.total, 1) if self.total else None,
                "rate": int(so_far / elapsed), "seconds": round(elapsed, 1), "waiting": self.waiting,
                "finished": self.stop_event.is_set()}

    def write(self):
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w") as handle:
                json.dump(self.snapshot(), handle)
            os.rename(tmp, self.path)
        except (IOError, OSError):
            pass

    def run(self):
        while not self.stop_event.wait(1.0):
            self.write()

    def finish(self):
        self.stop_event.set()
        self.write()


class FirstBytes(threading.Thread):
    """Notes when the first bytes of a pull appear in dest: rsync's temporary file, or a file replaced."""

    def __init__(self, dest, paths, on_seen=None):
        super(FirstBytes, self).__init__()
        self.daemon = True
        self.dest, self.paths, self.on_seen = dest, paths, on_seen
        self.before = dict((path, self.identity(path)) for path in paths)
        self.seen = None
        self.stop_event = threading.Event()

    def identity(self, path):
        try:
            info = os.stat(os.path.join(self.dest, path))
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def arrived(self):
        return any(partial_size(self.dest, path) > 0 or self.identity(path) != self.before[path] for path in self.paths)

    def run(self):
        while not self.stop_event.is_set():
            if self.arrived():
                self.seen = time.time()
                if self.on_seen:
                    self.on_seen()
                return
            self.stop_event.wait(0.05)

    def finish(self):
        self.stop_event.set()
        self.join()
        return self.seen or time.time()


class Fetcher(object):
    def __init__(self, module, progress=None):
        self.module = module
        self.params = module.params
        self.rsync = module.get_bin_path("rsync", required=True)
        self.last_error = ""
        self.progress = progress

    def fail(self, msg, **extra):
        """Leave the marker for the next node of the chain, then fail."""
        try:
            with open(os.path.join(self.params["dest"], FAILED_MARKER), "w") as handle:
                handle.write(msg + "\n")
        except (IOError, OSError):
            pass
        self.module.fail_json(msg=msg, **extra)

    def clear_marker(self):
        marker = os.path.join(self.params["dest"], FAILED_MARKER)
        if os.path.exists(marker):
            os.unlink(marker)

    def peer_failed(self):
        rc, dummy, dummy2 = self.module.run_command(self.base() + ["--list-only", source_of(self.params["url"], FAILED_MARKER)])
        return rc == 0

    def base(self):
        return [self.rsync, "--password-file=" + self.params["password_file"], "--timeout=%d" % self.params["timeout"]]

    def fail_peer(self, paths):
        self.fail("%s: the node before this one in the chain (%s) failed to receive it; fix that node and run "
                  "again (both resume)" % (", ".join(paths), self.params["url"]))

    def fail_absent(self, paths):
        self.fail("%s did not appear at %s within %ds: the node before this one in the chain "
                  "stopped receiving it; see that node's transfer%s" % (
                      ", ".join(paths), self.params["url"], self.params["wait"],
                      " (last answer: %s)" % self.last_error if self.last_error else ""))

    def present(self, path):
        """True when the peer lists the file, False while it does not; fails at once on a refused login."""
        rc, dummy, err = self.module.run_command(self.base() + ["--list-only", source_of(self.params["url"], path)])
        if rc == 0:
            return True
        if "auth failed" in err or rc not in RETRY_CODES + (23,):
            self.fail("cannot list %s at %s (rsync exited %d): %s" % (
                path, self.params["url"], rc, (err.strip().splitlines() or ["no message"])[-1]), rc=rc, stderr=err)
        self.last_error = (err.strip().splitlines() or [""])[-1]
        return False

    def wait_for(self, path):
        """Poll the peer until it lists path (sender_waits false)."""
        started = time.time()
        deadline = started + self.params["wait"]
        self.last_error = ""
        while not self.present(path):
            if self.peer_failed():
                self.fail_peer([path])
            if time.time() >= deadline:
                self.fail_absent([path])
            time.sleep(self.params["poll"])
        return round(time.time() - started, 2)

    def argv(self, paths):
        argv = self.base() + ["--archive", "--partial", "--partial-dir=" + self.params["partial_dir"], "--ignore-times",
                              "--stats"] + self.params["extra_args"]
        if len(paths) == 1:
            target_dir = os.path.join(self.params["dest"], os.path.dirname(paths[0]))
            return argv + [source_of(self.params["url"], paths[0]), target_dir.rstrip("/") + "/"]
        # Several files over one connection, each into its own directory: --relative keeps the path below the
        # module. (Not --files-from: that list travels after the sender's pre-xfer exec hook has run, which
        # could then not hold the request until these files are complete.)
        return argv + ["--relative"] + [source_of(self.params["url"], path) for path in paths] + [
            self.params["dest"].rstrip("/") + "/"]

    def transfer(self, paths):
        """Run one rsync for paths, again on the exit codes worth it with a growing pause; the hook's answers and a
        refused login are returned at once. Returns (rc, stdout, stderr, tries)."""
        for path in paths:
            target_dir = os.path.join(self.params["dest"], os.path.dirname(path))
            if not os.path.isdir(target_dir):
                os.makedirs(target_dir, 0o755)
        tries = self.params["retries"] + 1
        for attempt in range(tries):
            rc, out, err = self.module.run_command(self.argv(paths))
            if (rc not in RETRY_CODES or "auth failed" in err or SENDER_FAILED in err or SENDER_NOT_YET in err
                    or attempt + 1 == tries):
                break
            time.sleep(min(self.params["retry_delay"] * 2 ** attempt, MAX_RETRY_DELAY))
        return rc, out, err, attempt + 1

    def pull(self, paths):
        """Pull paths over one connection; with sender_waits and wait, held by the peer until it has them."""
        started = time.time()
        waited = 0.0
        if self.params["wait"] > 0 and not self.params["sender_waits"]:
            for path in paths:
                waited += self.wait_for(path)
            self.seen()
        holding = self.params["wait"] > 0 and self.params["sender_waits"]
        deadline = started + self.params["wait"]
        self.last_error = ""
        while True:
            watcher = None
            if holding:
                watcher = FirstBytes(self.params["dest"], paths, self.seen)
                watcher.start()
            try_started = time.time()
            rc, out, err, tries = self.transfer(paths)
            if watcher:
                waited = min(watcher.finish(), time.time()) - started
            if rc == 0 or not holding:
                break
            if SENDER_FAILED in err:
                self.fail_peer(paths)
            if SENDER_NOT_YET not in err:
                break
            self.last_error = next(line for line in err.splitlines() if SENDER_NOT_YET in line).strip()
            if time.time() >= deadline:
                self.fail_absent(paths)
            if time.time() - try_started < 1:
                # Answered at once without holding: not a hook that waits; do not spin.
                time.sleep(self.params["poll"])
        if rc != 0:
            self.fail("rsync of %s from %s exited %d%s: %s" % (
                ", ".join(paths), self.params["url"], rc, " after %d tries" % tries if tries > 1 else "",
                (err.strip().splitlines() or ["no message"])[-1]), rc=rc, stderr=err, tries=tries)
        return {"paths": paths, "bytes_received": parse_received(out), "seconds": round(time.time() - started, 2),
                "waited": round(waited, 2), "tries": tries}

    def seen(self):
        if self.progress:
            self.progress.waiting = False


def pulls_of(files, sizes, batch_below, batch_bytes=0):
    """The connections to make: the files under batch_below bytes together first, then the others in order.

    Consecutive files of at most batch_bytes together go over one connection (0: each over its own); a file of
    more, or one without a size, goes alone.
    """
    small = [path for path in files if batch_below > 0 and path in sizes and int(sizes[path]) < batch_below]
    batches = [small[index:index + BATCH_FILES] for index in range(0, len(small), BATCH_FILES)]
    pulls = [batch for batch in batches if len(batch) > 1] + [[path] for batch in batches if len(batch) == 1
                                                              for path in batch]
    group, group_bytes = [], 0
    for path in files:
        if path in small:
            continue
        size = int(sizes[path]) if path in sizes else None
        if group and (size is None or group_bytes + size > batch_bytes or len(group) >= BATCH_FILES):
            pulls.append(group)
            group, group_bytes = [], 0
        if size is None or size > batch_bytes:
            pulls.append([path])
            continue
        group.append(path)
        group_bytes += size
    if group:
        pulls.append(group)
    return pulls


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            dest=dict(type="path", required=True),
            files=dict(type="list", elements="str", required=True),
            password_file=dict(type="path", required=True, no_log=False),
            partial_dir=dict(type="str", default=".llm_cluster-partial"),
            wait=dict(type="int", default=0),
            poll=dict(type="float", default=0.5),
            sender_waits=dict(type="bool", default=False),
            sizes=dict(type="dict", default={}),
            batch_below=dict(type="int", default=1048576),
            batch_bytes=dict(type="int", default=0),
            retries=dict(type="int", default=3),
            retry_delay=dict(type="float", default=2.0),
            timeout=dict(type="int", default=600),
            progress_file=dict(type="path", default=""),
            total_bytes=dict(type="int", default=0),
            extra_args=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    try:
        for path in module.params["files"]:
            check_path(path)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    try:
        plan = pulls_of(module.params["files"], module.params["sizes"], module.params["batch_below"],
                        module.params["batch_bytes"])
    except (ValueError, TypeError) as exc:
        module.fail_json(msg="sizes must map each file to its size in bytes: %s" % exc)
    if module.params["retries"] < 0 or module.params["retry_delay"] < 0:
        module.fail_json(msg="retries and retry_delay must be 0 or more, got %d and %s"
                         % (module.params["retries"], module.params["retry_delay"]))
    if not module.params["url"].startswith("rsync://"):
        module.fail_json(msg="url must be an rsync daemon module, rsync://user@address:port/module, got %s"
                         % module.params["url"])
    if module.check_mode:
        module.exit_json(changed=bool(module.params["files"]), bytes_received=0, seconds=0.0,
                         files=[{"path": path, "pull": index, "bytes_received": 0, "seconds": 0.0, "waited": 0.0}
                                for index, paths in enumerate(plan) for path in paths],
                         pulls=[{"paths": paths, "bytes_received": 0, "seconds": 0.0, "waited": 0.0, "tries": 0} for paths in plan])
    if not os.path.isdir(module.params["dest"]):
        os.makedirs(module.params["dest"], 0o755)
    started = time.time()
    progress = None
    if module.params["progress_file"]:
        progress = Progress(module.params["progress_file"], module.params["dest"], module.params["files"],
                            module.params["total_bytes"])
    fetcher = Fetcher(module, progress)
    fetcher.clear_marker()
    if progress:
        progress.start()
    pulls, files = [], []
    for paths in plan:
        if progress:
            progress.current, progress.waiting = paths[0], module.params["wait"] > 0
        entry = fetcher.pull(paths)
        pulls.append(entry)
        shared = dict((key, entry[key]) for key in ("bytes_received", "seconds", "waited", "tries"))
        files.extend(dict(shared, path=path, pull=len(pulls) - 1) for path in paths)
        if progress:
            progress.waiting = False
            for path in paths:
                try:
                    progress.done_bytes += os.path.getsize(os.path.join(module.params["dest"], path))
                except OSError:
                    pass
            progress.done_files += len(paths)
    if progress:
        progress.current = None
        progress.finish()
    module.exit_json(changed=bool(pulls), files=files, pulls=pulls, bytes_received=sum(p["bytes_received"] for p in pulls),
                     seconds=round(time.time() - started, 2))


if __name__ == "__main__":
    main()
