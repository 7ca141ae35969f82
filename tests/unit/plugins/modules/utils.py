# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Helpers shared by the module unit tests.

``set_module_args`` feeds arguments to ``AnsibleModule`` (through
``ansible.module_utils.testing.patch_module_args`` on ansible-core 2.19+,
else by patching ``basic._ANSIBLE_ARGS``); ``exit_json``/``fail_json`` are
replaced by functions raising ``AnsibleExitJson``/``AnsibleFailJson`` so a
test can catch the result dict.
"""

from __future__ import annotations

import contextlib
import json
import unittest
from unittest.mock import patch

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes


@contextlib.contextmanager
def set_module_args(args=None):
    """Context manager exposing ``args`` to the AnsibleModule built inside it."""
    args = dict(args or {})
    args.setdefault("_ansible_remote_tmp", "/tmp")
    args.setdefault("_ansible_keep_remote_files", False)
    try:
        from ansible.module_utils.testing import patch_module_args
    except ImportError:
        serialized = to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        with patch.object(basic, "_ANSIBLE_ARGS", serialized):
            yield
    else:
        with patch_module_args(args):
            yield


class AnsibleExitJson(Exception):
    """Raised by the patched ``exit_json``; ``args[0]`` is the result dict."""


class AnsibleFailJson(Exception):
    """Raised by the patched ``fail_json``; ``args[0]`` is the result dict."""


def exit_json(*args, **kwargs):
    if "changed" not in kwargs:
        kwargs["changed"] = False
    raise AnsibleExitJson(kwargs)


def fail_json(*args, **kwargs):
    kwargs["failed"] = True
    raise AnsibleFailJson(kwargs)


class ModuleTestCase(unittest.TestCase):
    """unittest base class with ``exit_json``/``fail_json`` patched."""

    def setUp(self):
        self.mock_module = patch.multiple(basic.AnsibleModule, exit_json=exit_json, fail_json=fail_json)
        self.mock_module.start()
        self.addCleanup(self.mock_module.stop)
        self.mock_sleep = patch("time.sleep")
        self.mock_sleep.start()
        self.addCleanup(self.mock_sleep.stop)


@contextlib.contextmanager
def patched_exit_fail():
    """Context manager form of the ``exit_json``/``fail_json`` patches for plain pytest tests."""
    with patch.multiple(basic.AnsibleModule, exit_json=exit_json, fail_json=fail_json):
        yield


def run_module(main, args, check_mode=False, diff=False):
    """Run a module's ``main()`` with ``args``; return its exit_json or fail_json result."""
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with set_module_args(args), patched_exit_fail():
        try:
            main()
        except (AnsibleExitJson, AnsibleFailJson) as exc:
            return exc.args[0]
    raise AssertionError("module neither exited nor failed")
