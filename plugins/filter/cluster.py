# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _cluster
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _inventory_validation


def cluster_hosts(hosts, hostvars, fields, common=None, default=None):
    """The node records a verdict filter reads: for each host, {'host': name} and each of ``fields``
    (record key -> variable name, or name.key.key) from its host variables, plus ``common``."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("cluster_hosts expects a list of hosts, got %s" % type(hosts).__name__)
    if not isinstance(hostvars, Mapping) or not isinstance(fields, Mapping):
        raise AnsibleFilterError("cluster_hosts expects hostvars and a mapping of record keys to variable names")
    if common is not None and not isinstance(common, Mapping):
        raise AnsibleFilterError("cluster_hosts expects common values as a mapping, got %s" % type(common).__name__)
    return _cluster.host_records(hosts, hostvars, dict(fields), dict(common or {}), default)


def serving_group_hosts(names, groups):
    """``[[name, hosts], ...]``: each serving group of ``llm_cluster_serving_groups`` with the inventory's hosts of
    that group, in the given order (the shape the preflight and the serve plan read)."""
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError("serving_group_hosts expects the inventory's groups, got %s" % type(groups).__name__)
    try:
        return _cluster.group_hosts(names, groups)
    except TypeError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def replace_node_problems(old, new, groups, head_group="masters", worker_group="workers", inventory="the inventory",
                          retire=False):
    """What stops replacing (or removing, ``new`` empty) node ``old`` before any host changes: a list of messages
    naming the host and the fix; see plugin_utils/_inventory_validation.py."""
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError("replace_node_problems expects the inventory's groups, got %s" % type(groups).__name__)
    return _inventory_validation.replace_problems(old, new, dict(groups), head_group, worker_group, inventory,
                                                  retire is True)


class FilterModule(object):
    def filters(self):
        return {"cluster_hosts": cluster_hosts, "replace_node_problems": replace_node_problems,
                "serving_group_hosts": serving_group_hosts}
