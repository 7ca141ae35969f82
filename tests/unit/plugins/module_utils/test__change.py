# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The state-changing contract shared by npu_bind, npu_network and affinity_apply, without AnsibleModule."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _change, _statefile
from ansible_collections.aihost.llm_cluster.plugins.module_utils._statefile import new_state, save_state


class Exited(Exception):
    pass


class Failed(Exception):
    pass


class FakeModule:
    """Records how run_change ends: exit_json and fail_json raise like AnsibleModule's end the process."""

    def exit_json(self, **kwargs):
        raise Exited(kwargs)

    def fail_json(self, **kwargs):
        raise Failed(kwargs)


def read(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def test_change_error_reports_the_result_without_changed():
    error = _change.ChangeError("device 3: boom", dict(changed=True, devices=[1]))
    assert str(error) == "device 3: boom"
    assert error.result == {"devices": [1]}
    assert _change.ChangeError("x", dict(devices=[]), changed=True).result == {"devices": [], "changed": True}
    assert _change.ChangeError("x").result == {}


def test_run_change_exits_with_the_result_and_passes_arguments():
    with pytest.raises(Exited) as exited:
        _change.run_change(FakeModule(), lambda a, b=None: dict(changed=True, a=a, b=b), 1, b=2)
    assert exited.value.args[0] == {"changed": True, "a": 1, "b": 2}


def test_run_change_fails_with_message_and_result():
    def action():
        raise _change.ChangeError("the masks did not converge", dict(changed=True, devices=["dev0"]))

    with pytest.raises(Failed) as failed:
        _change.run_change(FakeModule(), action)
    assert failed.value.args[0] == {"msg": "the masks did not converge", "devices": ["dev0"]}


def test_other_exceptions_are_not_swallowed():
    def action():
        raise KeyError("bug")

    with pytest.raises(KeyError):
        _change.run_change(FakeModule(), action)


def test_record_originals_keeps_the_first_original_and_drops_other_boots(tmp_path):
    state_dir = str(tmp_path / "state")
    old = new_state("npu_bind", "boot-0")
    old["entries"]["stale"] = {"mask": "1", "boot_id": "boot-0"}
    old["entries"]["file"] = {"path": "/etc/x"}
    save_state(state_dir, "npu_bind", old, "boot-0")

    record = _change.StateRecord(state_dir, "npu_bind", "boot-1")
    assert record.path == os.path.join(state_dir, "npu_bind.json")
    assert record.record_originals([("dev0", {"mask": "ff", "boot_id": "boot-1"})]) is True
    assert record.record_originals([("dev0", {"mask": "0f", "boot_id": "boot-1"})]) is False
    doc = read(record.path)
    assert doc["boot_id"] == "boot-1"
    assert doc["entries"] == {"dev0": {"mask": "ff", "boot_id": "boot-1"}, "file": {"path": "/etc/x"}}


def test_record_more_records_into_the_loaded_document(tmp_path):
    record = _change.StateRecord(str(tmp_path), "affinity_apply", "b")

    def threads(doc):
        doc["entries"]["task:1:2"] = {"cpus": [0, 1]}

    record.record_originals([("irq:5", {"cpus": [0]})], record_more=threads)
    assert sorted(read(record.path)["entries"]) == ["irq:5", "task:1:2"]


def test_only_when_stored_writes_nothing_without_a_new_original(tmp_path):
    record = _change.StateRecord(str(tmp_path / "state"), "npu_network")
    assert record.record_originals([], only_when_stored=True) is False
    assert not os.path.exists(record.path)
    assert record.record_originals([("device0", {"address": None})], only_when_stored=True) is True
    assert read(record.path)["entries"] == {"device0": {"address": None}}


def test_unusable_state_file_changes_nothing(tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "npu_network.json").write_text("{not json", encoding="utf-8")
    record = _change.StateRecord(str(state_dir), "npu_network")
    with pytest.raises(_change.ChangeError) as raised:
        record.record_originals([("device0", {})], dict(devices=[0]))
    assert raised.value.msg.startswith("nothing was changed: ") and "not valid JSON" in raised.value.msg
    assert raised.value.result == {"devices": [0]}
    assert (state_dir / "npu_network.json").read_text(encoding="utf-8") == "{not json"


def test_unreadable_or_unwritable_state_file_is_a_change_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    record = _change.StateRecord(str(blocker / "state"), "npu_bind", "b")
    with pytest.raises(_change.ChangeError, match="^nothing was changed: cannot read .*Not a directory"):
        record.record_originals([("dev0", {"mask": "ff"})])

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_statefile, "atomic_write", disk_full)
    record = _change.StateRecord(str(tmp_path / "state"), "npu_bind", "b")
    with pytest.raises(_change.ChangeError, match="^nothing was changed: cannot write .*No space left"):
        record.record_originals([("dev0", {"mask": "ff"})])


def test_drop_and_save_after_a_restore(tmp_path):
    record = _change.StateRecord(str(tmp_path), "npu_bind", "b")
    record.record_originals([("dev0", {"mask": "ff"}), ("dev1", {"mask": "0f"})])
    record.load()
    assert record.dirty is False
    assert record.drop("dev0") == {"mask": "ff"}
    assert record.drop("absent") is None
    assert record.dirty is True
    record.save("restored, but the state file was not updated: ")
    assert record.dirty is False
    assert read(record.path)["entries"] == {"dev1": {"mask": "0f"}}
    assert record.entries == {"dev1": {"mask": "0f"}}

    # The last record takes the file with it; saving again without a file is fine.
    assert record.drop("dev1") == {"mask": "0f"}
    record.save()
    assert not os.path.exists(record.path)
    record.save()
    assert not os.path.exists(record.path)


def test_save_failure_names_what_was_done(tmp_path):
    record = _change.StateRecord(str(tmp_path), "npu_bind", "b")
    record.load()
    record.state_dir = str(tmp_path / "file" / "sub")
    (tmp_path / "file").write_text("x")
    with pytest.raises(_change.ChangeError, match="^the masks were restored but the state file was not updated: "):
        record.save("the masks were restored but the state file was not updated: ", dict(devices=[]))


def test_diff_headers_follow_check_mode():
    assert _change.diff_of("a\n", "b\n", "workqueue cpumask", True) == dict(
        before="a\n", after="b\n", before_header="workqueue cpumask (before)",
        after_header="workqueue cpumask (planned)")
    assert _change.diff_of("", "", "affinity", False)["after_header"] == "affinity (after)"
    assert _change.lines_text(["irq 120: 0-3", "kernel.numa_balancing: 1"]) == "irq 120: 0-3\nkernel.numa_balancing: 1\n"
    assert _change.lines_text([]) == ""
