# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters for the NPU RoCE network: address plan, its checks, the mesh gate and the rank table.

The logic lives in plugins/plugin_utils/_npu_ip_plan.py (allocation scheme in its docstring).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _npu_ip_plan as plan_utils


def _call(function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except plan_utils.PlanError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    except (KeyError, TypeError, AttributeError) as exc:
        raise AnsibleFilterError("%s: malformed input (%s: %s)" % (function.__name__, type(exc).__name__, exc)) from exc


def npu_ip_plan(nodes, hosts=None, cidr=plan_utils.DEFAULT_CIDR, gateway=None, netdetect=None, stride=0, offset=-1):
    """One address per NPU device of every node.

    ``nodes``: ``[{'host', 'devices': [index or accelerator_facts device], 'addresses': {index: address}}]``;
    ``hosts``: every cluster member in order, head first (positions do not move under ``--limit``).
    Returns the plan dict of ``plan_utils.compute_plan``.
    """
    return _call(plan_utils.compute_plan, nodes, hosts=hosts, cidr=cidr, gateway=gateway, netdetect=netdetect,
                 stride=stride, offset=offset)


def npu_ip_plan_problems(plan, interfaces=None):
    """Every problem of a plan (list of messages); ``interfaces``: ``{host: [IPv4 of its interfaces]}``."""
    return _call(plan_utils.plan_problems, plan, interfaces)


def npu_ping_targets(plan, host, hosts=None, all_pairs=False):
    """The ``ping`` list of ``npu_network_info`` for ``host``: same-index peers (or all devices) on the other hosts."""
    return _call(plan_utils.ping_targets, plan, host, hosts=hosts, all_pairs=bool(all_pairs))


def npu_network_gate(plan, results, settings=None):
    """Verdict of the link, health, TLS, hccn.conf and reachability checks: ``{ok, failures, devices, matrix, summary}``."""
    return _call(plan_utils.evaluate_gate, plan, results, settings)


def npu_network_gate_table(report):
    """A gate report as a fixed-width table (node x device x peer node)."""
    return _call(plan_utils.gate_table, report)


def npu_rank_table(plan, server_ids, hosts=None):
    """MindIE ``rank_table_file.json`` content (a dict of strings); ``server_ids``: ``{host: node IP}``."""
    return _call(plan_utils.rank_table, plan, server_ids, hosts=hosts)


class FilterModule(object):
    def filters(self):
        return {
            "npu_ip_plan": npu_ip_plan,
            "npu_ip_plan_problems": npu_ip_plan_problems,
            "npu_ping_targets": npu_ping_targets,
            "npu_network_gate": npu_network_gate,
            "npu_network_gate_table": npu_network_gate_table,
            "npu_rank_table": npu_rank_table,
        }
