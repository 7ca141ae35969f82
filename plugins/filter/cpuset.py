# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.module_utils._cpuset import format_cpulist, parse_cpulist
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _binding


def cpulist(cpus):
    """Render a list of CPU numbers as a kernel cpulist (``0-3,8``)."""
    try:
        return format_cpulist(cpus)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("cpulist: %s" % exc)


def cpulist_parse(text):
    """Parse a kernel cpulist (``0-3,8``) into a sorted list of CPU numbers."""
    try:
        return parse_cpulist(text)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("cpulist_parse: %s" % exc)


def affinity_rules(plan, optional=False):
    """affinity_apply's rules from accelerator_facts' process plan; see plugin_utils/_binding.py."""
    if not isinstance(plan, dict):
        raise AnsibleFilterError("affinity_rules expects the plan of accelerator_facts, got %s" % type(plan).__name__)
    return _binding.affinity_rules(plan, optional)


class FilterModule(object):
    def filters(self):
        return {"affinity_rules": affinity_rules, "cpulist": cpulist, "cpulist_parse": cpulist_parse}
