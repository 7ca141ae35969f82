# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import json
import os
import stat
import threading
import time

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _statefile as sf

# field 22 is 12345; comm holds spaces and parentheses.
STAT_LINE = "4242 (my (odd) comm) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 12345 1000 100 18446744073709551615"


def test_parse_stat_comm_with_spaces_and_parentheses():
    parsed = sf.parse_stat(STAT_LINE)
    assert parsed == {"pid": 4242, "comm": "my (odd) comm", "state": "S", "ppid": 1, "start_time": 12345}


def test_parse_stat_comm_with_closing_parenthesis_and_digits():
    line = "7 (a) 1 2 3) R 5 " + " ".join(["0"] * 17) + " 777 0"
    parsed = sf.parse_stat(line)
    assert parsed["comm"] == "a) 1 2 3"
    assert parsed["ppid"] == 5
    assert parsed["start_time"] == 777


@pytest.mark.parametrize("text", ["", "42 no parens", "x (c) S 1", "4242 (c) S 1 2 3"])
def test_parse_stat_malformed(text):
    with pytest.raises(ValueError):
        sf.parse_stat(text)


def test_read_start_time_of_this_process_and_thread():
    pid = os.getpid()
    start = sf.read_start_time(pid)
    assert isinstance(start, int) and start > 0
    assert sf.read_start_time(pid, tid=pid) == start
    assert sf.read_stat(pid)["pid"] == pid


def test_read_start_time_gone(tmp_path):
    assert sf.read_start_time(99999999) is None
    assert sf.read_start_time(1, proc_root=str(tmp_path)) is None


def test_read_boot_id(tmp_path):
    path = tmp_path / "sys/kernel/random"
    path.mkdir(parents=True)
    (path / "boot_id").write_text("abc-123\n")
    assert sf.read_boot_id(str(tmp_path)) == "abc-123"
    assert sf.read_boot_id(str(tmp_path / "missing")) is None
    assert sf.read_boot_id() == sf.read_boot_id("/proc")


def test_identity_mismatch_live_process():
    boot = sf.read_boot_id()
    me = sf.process_identity(os.getpid(), boot_id=boot)
    assert sf.identity_mismatch(me, boot_id=boot) is None
    assert "another boot" in sf.identity_mismatch(me, boot_id="other")
    reused = dict(me, start_time=me["start_time"] + 1)
    assert "reused" in sf.identity_mismatch(reused, boot_id=boot)
    gone = dict(me, pid=99999999)
    assert "exited" in sf.identity_mismatch(gone, boot_id=boot)


def test_identity_mismatch_thread():
    boot = sf.read_boot_id()
    pid = os.getpid()
    ready = threading.Event()
    stop = threading.Event()
    tids = []

    def worker():
        tids.append(threading.get_native_id())
        ready.set()
        stop.wait(5)

    thread = threading.Thread(target=worker)
    thread.start()
    ready.wait(5)
    try:
        tid = tids[0]
        record = dict(sf.process_identity(pid, boot_id=boot), tid=tid, tid_start_time=sf.read_start_time(pid, tid=tid))
        assert sf.identity_mismatch(record, boot_id=boot, tid=tid) is None
        assert "reused" in sf.identity_mismatch(dict(record, tid_start_time=-1), boot_id=boot, tid=tid)
    finally:
        stop.set()
        thread.join()
    # join() returns when the thread has cleared its TID; the kernel may list the task under /proc a moment
    # longer, on a loaded machine. Wait (bounded) until it is gone.
    deadline = time.monotonic() + 10
    while os.path.exists("/proc/%d/task/%d" % (pid, tid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "exited" in sf.identity_mismatch(record, boot_id=boot, tid=tid)


def test_load_missing_gives_empty_document(tmp_path):
    doc = sf.load_state(str(tmp_path / "nope"), "npu_bind", "boot-1")
    assert doc == {"version": 1, "kind": "npu_bind", "boot_id": "boot-1", "entries": {}}


def test_save_and_load_round_trip(tmp_path):
    state_dir = str(tmp_path / "state")
    doc = sf.new_state("npu_bind")
    assert sf.record_original(doc, "dev0", {"mask": "ff", "boot_id": "b"})
    path = sf.save_state(state_dir, "npu_bind", doc, "b")
    assert path == os.path.join(state_dir, "npu_bind.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(state_dir) == ["npu_bind.json"]
    loaded = sf.load_state(state_dir, "npu_bind", "b")
    assert loaded == {"version": 1, "kind": "npu_bind", "boot_id": "b", "entries": {"dev0": {"mask": "ff", "boot_id": "b"}}}
    with open(path, encoding="utf-8") as handle:
        assert json.load(handle)["version"] == 1


def test_record_original_keeps_the_first_value():
    doc = sf.new_state("k")
    assert sf.record_original(doc, "dev0", {"mask": "original"})
    assert not sf.record_original(doc, "dev0", {"mask": "ours"})
    assert sf.get_entry(doc, "dev0") == {"mask": "original"}
    assert sf.drop_entry(doc, "dev0") == {"mask": "original"}
    assert sf.drop_entry(doc, "dev0") is None
    assert doc["entries"] == {}


def test_drop_other_boots_keeps_persistent_entries():
    doc = sf.new_state("k")
    doc["entries"] = {
        "a": {"boot_id": "old"},
        "b": {"boot_id": "new"},
        "file": {"path": "/etc/x"},
    }
    assert sf.drop_other_boots(doc, "new") == ["a"]
    assert sorted(doc["entries"]) == ["b", "file"]


def write(tmp_path, kind, content):
    path = tmp_path / ("%s.json" % kind)
    path.write_text(content)
    return str(tmp_path)


def test_load_refuses_newer_version(tmp_path):
    state_dir = write(tmp_path, "npu_bind", json.dumps({"version": 2, "kind": "npu_bind", "entries": {}}))
    with pytest.raises(sf.StateFileError, match="format version 2, newer than the version 1"):
        sf.load_state(state_dir, "npu_bind")


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ("[]", "no integer 'version'"),
    (json.dumps({"version": 1, "kind": "other", "entries": {}}), "holds 'other' records"),
    (json.dumps({"version": 1, "kind": "npu_bind", "entries": []}), "no 'entries' object"),
    (json.dumps({"version": 0, "kind": "npu_bind", "entries": {}}), "unknown format version 0"),
])
def test_load_refuses_broken_files(tmp_path, content, message):
    state_dir = write(tmp_path, "npu_bind", content)
    with pytest.raises(sf.StateFileError, match=message):
        sf.load_state(state_dir, "npu_bind")


def test_save_failure_leaves_no_temp_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(sf.StateFileError, match="cannot write"):
        sf.save_state(str(blocker / "sub"), "k", sf.new_state("k"))


def test_save_replaces_atomically(tmp_path):
    state_dir = str(tmp_path)
    doc = sf.new_state("k")
    sf.save_state(state_dir, "k", doc, "b1")
    doc["entries"]["x"] = {"v": 1}
    sf.save_state(state_dir, "k", doc, "b2")
    assert sorted(os.listdir(state_dir)) == ["k.json"]
    assert sf.load_state(state_dir, "k")["boot_id"] == "b2"
    assert sf.load_state(state_dir, "k")["entries"] == {"x": {"v": 1}}
