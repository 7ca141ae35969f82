# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _preflight


def preflight_report(nodes, settings):
    """Evaluate the preflight gates for every probed node; see plugin_utils/_preflight.py."""
    if not isinstance(nodes, list) or not isinstance(settings, dict):
        raise AnsibleFilterError("preflight_report expects a list of node probes and a dict of settings")
    return _preflight.evaluate(nodes, settings)


def preflight_report_files(hosts):
    """File name on the controller to each node's entry of a preflight report."""
    if not isinstance(hosts, dict):
        raise AnsibleFilterError("preflight_report_files expects the hosts mapping of a preflight report")
    return _preflight.report_files(hosts)


def preflight_firewall_gaps(nodes, mode, admin_cidrs=None):
    """Nodes without the firewall llm_cluster_firewall needs, or whose firewalld zones would defeat the Ray step's
    rules, one message each; ``admin_cidrs`` (llm_cluster_admin_cidrs) may reach every port."""
    if not isinstance(nodes, list):
        raise AnsibleFilterError("preflight_firewall_gaps expects the list of node probes")
    if admin_cidrs is not None and not isinstance(admin_cidrs, list):
        raise AnsibleFilterError("preflight_firewall_gaps: llm_cluster_admin_cidrs must be a list of CIDRs, got %r"
                                 % (admin_cidrs,))
    return _preflight.firewall_gaps(nodes, mode, admin_cidrs)


def preflight_offline_missing(hosts, hostvars):
    """Paths an offline node lacks (the wheels, the image archive), one message each, naming the host."""
    if not isinstance(hosts, list):
        raise AnsibleFilterError("preflight_offline_missing expects the list of the play's hosts")
    return _preflight.offline_missing(hosts, hostvars)


def preflight_table(report):
    """Render a preflight report as a fixed-width table."""
    return _preflight.table(report)


class FilterModule(object):
    def filters(self):
        return {
            "preflight_report": preflight_report,
            "preflight_firewall_gaps": preflight_firewall_gaps,
            "preflight_offline_missing": preflight_offline_missing,
            "preflight_report_files": preflight_report_files,
            "preflight_table": preflight_table,
        }
