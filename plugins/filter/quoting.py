# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _quoting


def _wrap(function, name):
    def run(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except ValueError as exc:
            raise AnsibleFilterError("%s: %s" % (name, exc))
    run.__name__ = name
    run.__doc__ = function.__doc__
    return run


class FilterModule:
    """Values written into files other programs parse; see plugin_utils/_quoting.py."""

    def filters(self):
        return {
            "env_name": _wrap(_quoting.env_name, "env_name"),
            "env_quote": _wrap(_quoting.env_quote, "env_quote"),
            "env_file_parse": _wrap(_quoting.env_file_parse, "env_file_parse"),
            "one_line": _wrap(_quoting.one_line, "one_line"),
        }
