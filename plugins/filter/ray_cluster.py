# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _perimeter, _ray_cluster


def _need(value, kind, name):
    if not isinstance(value, kind):
        raise AnsibleFilterError("%s expects a %s, got %s" % (name, kind.__name__, type(value).__name__))
    return value


def env_parse(text):
    """Parse the KEY=value lines of /etc/llm_cluster/env into a dict."""
    return _ray_cluster.parse_env(_need(text, str, "env_parse"))


def ray_node_resources(env, extra=None):
    """A node's Ray resources ({resources, num_gpus}) from its cluster environment and ray_cluster_resources."""
    return _ray_cluster.node_resources(_need(env, dict, "ray_node_resources"), extra or {})


def ray_expected_resources(nodes):
    """The resources the whole cluster must show: the sum over the nodes' ray_node_resources."""
    return _ray_cluster.expected_resources(_need(nodes, list, "ray_expected_resources"))


def port_ranges(ports, ranges=None):
    """Merge ports and 'first-last' ranges into contiguous ranges: [6379, 6380, '20000-20999'] style input."""
    try:
        return _ray_cluster.port_ranges(_need(ports, list, "port_ranges"), ranges or [])
    except ValueError as exc:
        raise AnsibleFilterError("port_ranges: %s" % exc)


def ray_node_check(nodes, settings):
    """Checks before Ray is installed or started; see plugin_utils/_ray_cluster.py."""
    return _ray_cluster.check_nodes(_need(nodes, list, "ray_node_check"), _need(settings, dict, "ray_node_check"))


def ray_version_check(nodes, want):
    """Every node runs the pinned Ray and one Python version."""
    return _ray_cluster.check_versions(_need(nodes, list, "ray_version_check"), str(want))


def ray_join_report(cluster, nodes, settings):
    """Explain the nodes missing from a Ray cluster."""
    return _ray_cluster.join_report(_need(cluster, dict, "ray_join_report"), _need(nodes, list, "ray_join_report"),
                                    _need(settings, dict, "ray_join_report"))


def ray_status(cluster, nodes, settings):
    """The Ray part of the status document."""
    return _ray_cluster.status(_need(cluster, dict, "ray_status"), _need(nodes, list, "ray_status"),
                               _need(settings, dict, "ray_status"))


def ray_status_table(doc):
    """Render the Ray status document as a table."""
    return _ray_cluster.status_table(_need(doc, dict, "ray_status_table"))


def systemd_exec_args(argv, joiner=" \\\n    "):
    """argv as the words of an ExecStart= line: % and $ doubled, quoted and C-escaped where needed."""
    try:
        return _perimeter.systemd_exec_args([str(word) for word in _need(argv, list, "systemd_exec_args")], joiner)
    except ValueError as exc:
        raise AnsibleFilterError("systemd_exec_args: %s" % exc)


def systemd_environment(value, name):
    """One quoted Environment= assignment NAME=value for a unit file."""
    try:
        return _perimeter.systemd_environment(name, value)
    except ValueError as exc:
        raise AnsibleFilterError("systemd_environment: %s" % exc)


def nft_address_sets(cidrs, variable="addresses"):
    """{ipv4: [...], ipv6: [...]} elements of nftables sets; a bad entry names the variable."""
    try:
        return _perimeter.address_sets(cidrs, variable)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def nft_allow_rules(entries, variable="llm_cluster_firewall_allow"):
    """The site's extra openings, checked and split by address family."""
    try:
        return _perimeter.allow_rules(entries, variable)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def firewalld_rule(item, port=None):
    """firewalld rich rule of one source (and port) item of the role."""
    return _perimeter.firewalld_rule(_need(item, dict, "firewalld_rule"), port)


def firewalld_recorded(text, path):
    """The [{zone, rule}] entries of the role's record of its firewalld rules ('' when there is none)."""
    try:
        return _perimeter.firewalld_recorded(_need(text, str, "firewalld_recorded"), path)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def firewalld_stale(recorded, zone, rules):
    """The recorded rules that the zone's wanted rules no longer hold."""
    return _perimeter.firewalld_stale(_need(recorded, list, "firewalld_stale"), zone, _need(rules, list, "firewalld_stale"))


def firewalld_record(recorded, zone, rules, keep=True):
    """The record to write: the wanted rules, and with keep the recorded ones not yet removed."""
    if keep:
        return _perimeter.firewalld_union(_need(recorded, list, "firewalld_record"), zone, _need(rules, list, "firewalld_record"))
    return _perimeter.firewalld_record(zone, _need(rules, list, "firewalld_record"))


class FilterModule(object):
    def filters(self):
        return {
            "env_parse": env_parse,
            "firewalld_record": firewalld_record,
            "firewalld_recorded": firewalld_recorded,
            "firewalld_rule": firewalld_rule,
            "firewalld_stale": firewalld_stale,
            "nft_address_sets": nft_address_sets,
            "nft_allow_rules": nft_allow_rules,
            "systemd_environment": systemd_environment,
            "systemd_exec_args": systemd_exec_args,
            "ray_expected_resources": ray_expected_resources,
            "ray_node_resources": ray_node_resources,
            "port_ranges": port_ranges,
            "ray_node_check": ray_node_check,
            "ray_version_check": ray_version_check,
            "ray_join_report": ray_join_report,
            "ray_status": ray_status,
            "ray_status_table": ray_status_table,
        }
