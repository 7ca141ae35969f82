# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Time one ``affinity_apply`` run on a process with 500 threads.

Starts a child process with 500 idle threads, then runs the module in-process
(as the unit tests do) several times, alternating the target CPU set between
the first CPU and all CPUs so that every run rebinds every thread, and prints
one line with the median wall time of a binding run with the default
``settle`` (which includes its re-scan pauses), with ``settle: 0``, and of a
run that finds nothing to change.

Run it from the collection root, checked out (or linked) as
``.../ansible_collections/aihost/llm_cluster``, with a Python that has
ansible-core installed::

    python3 tests/bench/bench_affinity.py [--threads 500] [--runs 5]

It needs at least two CPUs, binds only its own child and writes its state file
to a temporary directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid

CHILD = textwrap.dedent(r"""
    import sys, threading
    stop = threading.Event()
    for index in range(int(sys.argv[1])):
        threading.Thread(target=stop.wait, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()
""")


def add_collection_path():
    """Put the directory above ``ansible_collections`` on sys.path."""
    suffix = os.path.join("ansible_collections", "aihost", "llm_cluster")
    candidates = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.environ.get("PWD", ""), os.getcwd()]
    for start in candidates:
        path = os.path.dirname(start) if start.endswith(os.sep + "tests") else start
        if path.endswith(suffix):
            sys.path.insert(0, path[:-len(suffix)].rstrip(os.sep) or os.sep)
            return
    sys.exit("run this from the collection root, checked out as .../ansible_collections/aihost/llm_cluster")


@contextlib.contextmanager
def module_args(args):
    from ansible.module_utils import basic
    from ansible.module_utils.common.text.converters import to_bytes
    from unittest.mock import patch

    args = dict(args, _ansible_remote_tmp=tempfile.gettempdir(), _ansible_keep_remote_files=False)
    try:
        from ansible.module_utils.testing import patch_module_args
    except ImportError:
        with patch.object(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args}))):
            yield
    else:
        with patch_module_args(args):
            yield


class Done(Exception):
    pass


def run_module(affinity_apply, args):
    from ansible.module_utils import basic
    from unittest.mock import patch

    def exit_json(self, **result):
        raise Done(result)

    def fail_json(self, **result):
        raise Done(dict(result, failed=True))

    elapsed = None
    result = {"failed": True, "msg": "the module returned without exit_json"}
    with module_args(args), patch.multiple(basic.AnsibleModule, exit_json=exit_json, fail_json=fail_json):
        started = time.perf_counter()
        try:
            affinity_apply.main()
        except Done as exc:
            elapsed = time.perf_counter() - started
            result = exc.args[0]
    if result.get("failed"):
        sys.exit("affinity_apply failed: %s" % result.get("msg"))
    return elapsed, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--threads", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()

    add_collection_path()
    from ansible_collections.aihost.llm_cluster.plugins.modules import affinity_apply

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("needs at least two CPUs")
    token = uuid.uuid4().hex
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(options.threads), "--bench=" + token],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if child.stdout.readline().strip() != "ready":
            sys.exit("the child did not start")
        with tempfile.TemporaryDirectory() as state_dir:
            def args(target, settle):
                return dict(rules=[dict(cmdline="--bench=%s" % token, cpus=target)], settle=settle, state_dir=state_dir)

            timings = {5: [], 0: []}
            noop = []
            threads = 0
            flip = 0
            for settle in (5, 0):
                for index in range(options.runs):
                    flip += 1
                    target = cpus[:1] if flip % 2 else cpus
                    elapsed, result = run_module(affinity_apply, args(target, settle))
                    if not result["changed"]:
                        sys.exit("expected a change in every binding run")
                    threads = sum(len(entry["tids"]) for entry in result["processes"])
                    timings[settle].append(elapsed)
                    elapsed, result = run_module(affinity_apply, args(target, settle))
                    if result["changed"]:
                        sys.exit("a second run with the same rules changed something")
                    noop.append(elapsed)
    finally:
        child.stdin.close()
        child.wait()
    print("affinity_apply on %d threads: bind median %.3f s (settle=5), %.3f s (settle=0), no-op %.3f s; %d runs each"
          % (threads, statistics.median(timings[5]), statistics.median(timings[0]), statistics.median(noop), options.runs))


if __name__ == "__main__":
    main()
