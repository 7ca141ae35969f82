# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Node records for the controller's verdicts, read from every member's host variables; the hosts of each serving
group."""

from __future__ import annotations

_MISSING = object()


def _lookup(variables, path):
    """``variables[a][b]...`` for the dotted ``path`` ``a.b...`` (a step of digits indexes a list); _MISSING where a
    step is absent."""
    value = variables
    for step in path.split("."):
        try:
            value = value[int(step)] if isinstance(value, (list, tuple)) and step.isdigit() else value[step]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return value


def host_records(hosts, hostvars, fields, common=None, default=None):
    """One record per host, in order: ``{'host': name, key: hostvars[name][path] for key, path in fields}``,
    then ``common`` (the same values for every host). A path is a variable name, or ``name.key.key`` into
    it; a host or variable that is absent gives ``default``."""
    records = []
    for host in hosts:
        variables = _lookup(hostvars, host) if isinstance(host, str) else _MISSING
        record = {"host": host}
        for key, path in fields.items():
            value = _lookup(variables, path) if variables is not _MISSING else _MISSING
            record[key] = default if value is _MISSING else value
        record.update(common or {})
        records.append(record)
    return records


def group_hosts(names, groups):
    """``[[name, hosts], ...]`` for each inventory group in ``names`` (``llm_cluster_serving_groups``), in the given
    order, with the inventory's hosts of that group; a group the inventory lacks gives no hosts (the inventory
    check names it, and so does the serve plan). ``None`` gives no pairs; a value that is no list raises
    ``TypeError``."""
    if names is None:
        return []
    if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple)):
        raise TypeError("llm_cluster_serving_groups must be a list of inventory group names, got %s"
                        % type(names).__name__)
    pairs = []
    for name in names:
        name = str(name)
        hosts = groups.get(name)
        pairs.append([name, list(hosts) if isinstance(hosts, (list, tuple)) else []])
    return pairs
