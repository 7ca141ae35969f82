# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The model_transfer_wait action plugin, run in-process against a scripted node: it follows the job until it
ends, shows a progress line per poll, returns the job's result, fails on the job's failure and on its own
timeout, and never polls past the end."""

from __future__ import annotations

import base64
import json
from unittest.mock import MagicMock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.aihost.llm_cluster.plugins.action import model_transfer_wait
from ansible_collections.aihost.llm_cluster.plugins.action.model_transfer_wait import ActionModule

ARGS = dict(jid="j1.42", progress_file="/run/llm_cluster/model/progress.json", interval=1, timeout=600,
            label="master1 -> worker1")
RUNNING = {"started": 1, "finished": 0, "ansible_job_id": "j1.42"}
DONE = {"finished": 1, "changed": True, "bytes_received": 3 * 1048576, "seconds": 2.5, "pulls": [{"waited": 0}],
        "invocation": {"module_args": {}}}


class Node:
    """Answers the modules the action runs: async_status from a script, slurp from a progress document."""

    def __init__(self, statuses, progress):
        self.statuses = list(statuses)
        self.progress = progress
        self.calls = []

    def __call__(self, module_name, module_args=None, task_vars=None, **_kwargs):
        self.calls.append((module_name, module_args))
        if module_name == "ansible.legacy.async_status":
            return self.statuses.pop(0)
        if module_name == "ansible.legacy.slurp":
            if self.progress is None:
                return {"failed": True, "msg": "file not found"}
            return {"content": base64.b64encode(json.dumps(self.progress).encode()).decode()}
        if module_name == "ansible.legacy.wait_for":
            return {"failed": True, "msg": "Timeout when waiting for search string"}
        raise AssertionError("unexpected module %s" % module_name)


def run_action(node, monkeypatch, **args):
    loader = DataLoader()
    task = Task.load(dict(action="aihost.llm_cluster.model_transfer_wait", args=dict(ARGS, **args)))
    action = ActionModule(task=task, connection=MagicMock(), play_context=PlayContext(), loader=loader,
                          templar=Templar(loader=loader, variables={}), shared_loader_obj=None)
    monkeypatch.setattr(action, "_execute_module", node)
    monkeypatch.setattr(action, "get_shell_option", lambda option, default=None: default)
    lines = []
    monkeypatch.setattr(model_transfer_wait.display, "display", lambda msg, *a, **k: lines.append(msg))
    node.sleeps = []
    monkeypatch.setattr(model_transfer_wait.time, "sleep", node.sleeps.append)
    return action.run(task_vars={}), lines


def test_follows_the_job_until_it_ends_and_returns_its_result(monkeypatch):
    progress = {"bytes_done": 1048576, "bytes_total": 3 * 1048576, "percent": 33, "rate": 2 * 1048576,
                "files_done": 1, "files_total": 4}
    node = Node([RUNNING, RUNNING, DONE], progress)
    result, lines = run_action(node, monkeypatch)
    assert not result.get("failed") and result["finished"] == 1 and result["changed"] is True
    assert result["bytes_received"] == 3 * 1048576 and result["pulls"] == [{"waited": 0}]
    assert result["polls"] == 3 and "invocation" not in result
    assert lines == ["master1 -> worker1: 1.0 of 3.0 MiB (33 %), 2.0 MiB/s, file 2 of 4"] * 2
    statuses = [args for name, args in node.calls if name == "ansible.legacy.async_status"]
    assert statuses == [{"jid": "j1.42", "mode": "status", "_async_dir": "~/.ansible_async"}] * 3
    # Each poll first waits on the node for the file to say the transfer finished, up to the interval.
    waits = [args for name, args in node.calls if name == "ansible.legacy.wait_for"]
    assert waits[0] == {"path": ARGS["progress_file"], "search_regex": '"finished": true', "timeout": 1}
    assert len(waits) == 3
    # The scripted node answers at once: the action still polls at most once a second.
    assert len(node.sleeps) == 2 and all(0.9 < pause <= 1.0 for pause in node.sleeps)


def test_a_job_that_ended_at_once_shows_no_line(monkeypatch):
    node = Node([DONE], {"bytes_done": 5})
    result, lines = run_action(node, monkeypatch)
    assert result["polls"] == 1 and lines == []
    assert [name for name, _args in node.calls].count("ansible.legacy.slurp") == 0


def test_a_failed_job_fails_the_task_with_its_message(monkeypatch):
    node = Node([RUNNING, {"finished": 1, "failed": True, "msg": "rsync: connection refused (code 10)"}], None)
    result, lines = run_action(node, monkeypatch)
    assert result["failed"] is True and result["msg"] == "rsync: connection refused (code 10)"
    assert lines == []  # the progress file was never readable


def test_a_job_past_the_timeout_fails_naming_the_job_and_the_file(monkeypatch):
    node = Node([RUNNING] * 5, {"waiting": True, "file": "model-00001.safetensors"})
    result, lines = run_action(node, monkeypatch, timeout=0)
    assert result["failed"] is True and result["finished"] == 0 and result["polls"] == 1
    assert result["msg"] == ("master1 -> worker1: the transfer (job j1.42) did not end within 0 s; it is still running "
                             "on the node, see /run/llm_cluster/model/progress.json")


@pytest.mark.parametrize("progress, line", [
    ({}, "a -> b: 0.0 of 0.0 MiB (? %), 0.0 MiB/s, file 1 of ?"),
    ({"waiting": True, "file": "w.bin", "bytes_done": "x", "rate": None, "files_done": True},
     "a -> b: waiting for w.bin, 0.0 of 0.0 MiB (? %), 0.0 MiB/s, file 1 of ?"),
    ([1, 2], "a -> b: 0.0 of 0.0 MiB (? %), 0.0 MiB/s, file 1 of ?"),
])
def test_progress_line_reads_any_document(progress, line):
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._model_distribution import progress_line
    assert progress_line("a -> b", progress) == line
