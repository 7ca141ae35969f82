# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Stand-ins for vLLM's engine and worker processes, for the binding scenario.

`python3 fake_vllm.py launch ENGINE=WORKER [ENGINE=WORKER ...]` starts, per
pair, an engine process titled ENGINE (e.g. VLLM::EngineCore_DP0) whose child
is a worker titled WORKER (e.g. VLLM::Worker_DP0). Like vLLM, each process
carries its title as argv[0] (what /proc/<pid>/cmdline shows first) and in its
kernel comm (cut to 15 characters). Every process keeps a few threads alive
and keeps starting short-lived ones, so threads appear while a binding runs.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
import time

PR_SET_NAME = 15


def set_comm(title):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NAME, ctypes.c_char_p(title.encode()[:15]), 0, 0, 0)


def start_titled(title, *args):
    """Start this script again with argv[0] = title."""
    # sys.executable is empty in a process whose argv[0] is a title: ask the kernel.
    return subprocess.Popen([title, __file__] + list(args), executable=os.readlink("/proc/self/exe"))


def churn(resident=4, interval=0.2, lifetime=1.0):
    for index in range(resident):
        threading.Thread(target=time.sleep, args=(10 ** 9,), name="resident-%d" % index, daemon=True).start()
    while True:
        threading.Thread(target=time.sleep, args=(lifetime,), daemon=True).start()
        time.sleep(interval)


def main(argv):
    role = argv[1]
    if role == "launch":
        pairs = [pair.split("=", 1) for pair in argv[2:]]
        children = [start_titled(engine, "engine", engine, worker) for engine, worker in pairs]
        for child in children:
            child.wait()
        return 1
    set_comm(argv[2])
    if role == "engine":
        start_titled(argv[3], "worker", argv[3])
    churn()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
