# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Follow a background model_fetch job on the node until it ends, one progress line per interval."""

from __future__ import annotations

import base64
import json
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _model_distribution

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = False

    argument_spec = dict(
        jid=dict(type="str", required=True),
        progress_file=dict(type="path", required=True),
        interval=dict(type="int", default=10),
        timeout=dict(type="int", required=True),
        label=dict(type="str", default=""),
    )

    def _status(self, jid, async_dir, task_vars):
        return self._execute_module(module_name="ansible.legacy.async_status", task_vars=task_vars,
                                    module_args=dict(jid=jid, mode="status", _async_dir=async_dir))

    def _progress(self, path, task_vars):
        read = self._execute_module(module_name="ansible.legacy.slurp", task_vars=task_vars, module_args=dict(src=path))
        try:
            return json.loads(base64.b64decode(read["content"]))
        except (KeyError, TypeError, ValueError):
            return None

    def _wait(self, path, seconds, task_vars):
        """Wait on the node up to ``seconds`` for the progress file to say the transfer finished."""
        self._execute_module(module_name="ansible.legacy.wait_for", task_vars=task_vars,
                             module_args=dict(path=path, search_regex='"finished": true', timeout=seconds))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        validation, args = self.validate_argument_spec(argument_spec=self.argument_spec)
        del validation
        interval = max(1, args["interval"])
        async_dir = self.get_shell_option("async_dir", default="~/.ansible_async")
        deadline = time.monotonic() + max(0, args["timeout"])
        polls = 0
        while True:
            started = time.monotonic()
            self._wait(args["progress_file"], interval, task_vars)
            status = self._status(args["jid"], async_dir, task_vars)
            polls += 1
            if status.get("finished") or status.get("failed"):
                break
            # The file can say finished a moment before the job's result is written: at most a poll a second.
            time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
            if time.monotonic() >= deadline:
                result.update(failed=True, finished=0, polls=polls,
                              msg="%s: the transfer (job %s) did not end within %d s; it is still running on the node, "
                                  "see %s" % (args["label"] or "transfer", args["jid"], args["timeout"], args["progress_file"]))
                return result
            progress = self._progress(args["progress_file"], task_vars)
            if progress is not None:
                display.display(_model_distribution.progress_line(args["label"] or "transfer", progress))
        status.pop("invocation", None)
        result.update(status)
        result["polls"] = polls
        result["changed"] = bool(status.get("changed"))
        return result
