# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The model_distribution role's pre-xfer exec hook (roles/model_distribution/files/sender_wait.py), called directly.

The end-to-end behaviour behind a real rsync daemon is in tests/unit/plugins/modules/test_model_fetch.py;
these tests pin the parts that decide it: reading the request from rsync's environment, the answer lines,
the slice capped by the receiver's --timeout, and paths outside the module.
"""

from __future__ import annotations

import io
import os
import threading
from role_files import load_role_file


# The RSYNC_* variables rsync 3.5.0's daemon gave its pre-xfer exec for
# `rsync --timeout=600 -a --relative rsync://llmc@127.0.0.1:18731/model/a rsync://llmc@127.0.0.1:18731/model/sub/b.json dst/`
# (printed by `env` from the hook, unchanged).
PULL_ENV = {
    "RSYNC_ARG0": "rsyncd", "RSYNC_ARG1": "--server", "RSYNC_ARG2": "--sender", "RSYNC_ARG3": "-logDtprRe.iLsfxCIvu",
    "RSYNC_ARG4": "--timeout=600", "RSYNC_ARG5": ".", "RSYNC_ARG6": "a", "RSYNC_ARG7": "sub/b.json",
    "RSYNC_HOST_ADDR": "127.0.0.1", "RSYNC_HOST_NAME": "localhost", "RSYNC_MODULE_NAME": "model",
    "RSYNC_MODULE_PATH": "/tmp/px/src", "RSYNC_PID": "3603", "RSYNC_REQUEST": "model/a model/sub/b.json",
    "RSYNC_USER_NAME": "llmc",
}


def load():
    return load_role_file("model_distribution", "sender_wait.py")


def test_the_request_is_the_paths_after_the_dot_and_the_receivers_timeout():
    hook = load()
    assert hook.request(PULL_ENV) == (["a", "sub/b.json"], 600)
    listing = dict(PULL_ENV, RSYNC_ARG4="--list-only", RSYNC_ARG5="--timeout=30", RSYNC_ARG6=".", RSYNC_ARG7="a")
    assert hook.request(listing) == (["a"], 30)
    assert hook.request({"RSYNC_ARG0": "rsyncd", "RSYNC_ARG1": "--server"}) == ([], 0)


def test_complete_files_pass_at_once_and_say_nothing(tmp_path):
    hook = load()
    (tmp_path / "sub").mkdir()
    (tmp_path / "a").write_bytes(b"a")
    (tmp_path / "sub" / "b.json").write_text("{}")
    out = io.StringIO()
    assert hook.hold(str(tmp_path), ["a", "sub/b.json"], 60, out) == 0
    assert out.getvalue() == ""


def test_a_missing_file_is_answered_not_yet_after_the_slice(tmp_path):
    hook = load()
    (tmp_path / "a").write_bytes(b"a")
    out = io.StringIO()
    assert hook.hold(str(tmp_path), ["a", "sub/late.safetensors"], 0.3, out) == 1
    assert out.getvalue() == "llm_cluster: not yet: sub/late.safetensors\n"


def test_a_file_renamed_into_place_lets_the_request_through(tmp_path):
    hook = load()
    temporary = tmp_path / ".shard.safetensors.Ab12Cd"
    temporary.write_bytes(b"x" * 100)
    timer = threading.Timer(0.5, os.rename, args=(str(temporary), str(tmp_path / "shard.safetensors")))
    timer.start()
    out = io.StringIO()
    try:
        assert hook.hold(str(tmp_path), ["shard.safetensors"], 60, out) == 0
    finally:
        timer.cancel()
    assert out.getvalue() == ""


def test_the_senders_failure_marker_ends_the_hold_with_its_first_line(tmp_path):
    hook = load()
    (tmp_path / ".llm_cluster-fetch-failed").write_text("rsync of shard from rsync://x exited 20: killed\nmore\n")
    out = io.StringIO()
    assert hook.hold(str(tmp_path), ["shard"], 60, out) == 1
    assert out.getvalue() == "llm_cluster: the sender failed: rsync of shard from rsync://x exited 20: killed\n"


def test_a_complete_file_is_served_even_when_the_marker_is_there(tmp_path):
    hook = load()
    (tmp_path / "shard").write_bytes(b"x")
    (tmp_path / ".llm_cluster-fetch-failed").write_text("later file failed\n")
    assert hook.hold(str(tmp_path), ["shard"], 60, io.StringIO()) == 0


def test_the_slice_is_at_most_half_the_receivers_timeout(tmp_path):
    hook = load()
    environ = {"RSYNC_MODULE_PATH": str(tmp_path), "RSYNC_ARG0": "rsyncd", "RSYNC_ARG1": "--timeout=2",
               "RSYNC_ARG2": ".", "RSYNC_ARG3": "never"}
    out = io.StringIO()
    # --slice 3600 would hold for an hour; the receiver's --timeout=2 caps the hold at 1 s.
    assert hook.main(["--slice", "3600"], environ, out) == 1
    assert out.getvalue() == "llm_cluster: not yet: never\n"


def test_paths_outside_the_module_are_left_to_rsync(tmp_path):
    hook = load()
    assert hook.local_path(str(tmp_path), "../etc/passwd") is None
    assert hook.local_path(str(tmp_path), "/sub/b.json") == str(tmp_path / "sub" / "b.json")
    assert hook.hold(str(tmp_path), ["../../etc/shadow"], 60, io.StringIO()) == 0


def test_a_request_without_paths_passes(tmp_path):
    hook = load()
    assert hook.main([], {"RSYNC_MODULE_PATH": str(tmp_path), "RSYNC_ARG0": "rsyncd"}, io.StringIO()) == 0
