# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _perimeter, _serve, _serve_pd


def serve_plan(nodes, settings):
    """Backend, topology and each node's engine argv; see plugin_utils/_serve.py."""
    if not isinstance(nodes, list) or not isinstance(settings, dict):
        raise AnsibleFilterError("serve_plan expects a list of nodes and a dict of settings")
    try:
        return _serve.plan(nodes, settings)
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError("serve_plan: %s" % exc)


def serve_pd_served(before, after, router):
    """The prefill and decode engines whose finished requests grew; see plugin_utils/_serve_pd.py served."""
    if not isinstance(before, list) or not isinstance(after, list) or not isinstance(router, dict):
        raise AnsibleFilterError("serve_pd_served expects two lists of uri results and the plan's router")
    return _serve_pd.served(before, after, router)


def serve_backend(requested, backend_type, accelerator):
    """The backend to run; see plugin_utils/_serve.py resolve_backend."""
    try:
        return _serve.resolve_backend(requested, backend_type, accelerator)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def serve_container_params(spec):
    """community.docker.docker_container options of a node's engine container; see plugin_utils/_serve.py."""
    try:
        return _serve.container_params(spec)
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError("serve_container_params: %s" % exc)


def serve_pip_lock(text, packages, ray_version, left_out=None, source="serve_pip_lock"):
    """The pins of a lock file for a --no-deps install, and its problems; see plugin_utils/_serve.py pip_lock."""
    if not isinstance(text, str):
        raise AnsibleFilterError("serve_pip_lock expects the lock's text, got %s" % type(text).__name__)
    if not isinstance(packages, list):
        raise AnsibleFilterError("serve_pip_lock expects the list of engine packages, got %s" % type(packages).__name__)
    try:
        return _serve.pip_lock(text, packages, str(ray_version), left_out or (), source)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def serve_watchdog_binding(state):
    """What the watchdog's state says of the binding it keeps; see plugin_utils/_serve.py watchdog_binding."""
    return _serve.watchdog_binding(state)


def serve_tls_sans(address, names):
    """subjectAltName entries for the API node's certificate; see plugin_utils/_serve.py tls_sans."""
    if not isinstance(names, list):
        raise AnsibleFilterError("serve_tls_sans expects the list serve_tls_names, got %s" % type(names).__name__)
    return _serve.tls_sans(address, names)


def serve_ascend_host_paths(count):
    """Host paths the engine container of an NPU node with ``count`` devices takes: [{path, required}]."""
    try:
        return _serve.ascend_host_paths(count)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("serve_ascend_host_paths: %s" % exc)


def serve_status(nodes, plan, settings):
    """The endpoint document of artifacts/serve.json; see plugin_utils/_serve.py."""
    return _serve.status(nodes, plan, settings)


def serve_status_table(doc):
    """The endpoint document as lines for the play output."""
    return _serve.status_table(doc)


def llm_cluster_status(ray, serve, accelerators, generated=None):
    """status.yml's document; see plugin_utils/_serve.py cluster_status."""
    return _serve.cluster_status(ray, serve, accelerators, generated)


def llm_cluster_status_table(doc):
    """status.yml's document as lines."""
    return _serve.cluster_status_table(doc)


def serve_unit_args(argv):
    """argv as systemd ExecStart= words: one per line, quoted and escaped where systemd would split or expand."""
    try:
        return _perimeter.systemd_exec_args([str(word) for word in argv])
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("serve_unit_args: %s" % exc)


def serve_kv_budget(host, need_memory, disk_path, disk_bytes, reading, headroom):
    """Messages for a node whose memory or disk cannot hold the KV-cache tiers; see plugin_utils/_serve.py."""
    try:
        return _serve.kv_budget_problems(host, int(need_memory or 0), disk_path, int(disk_bytes or 0), reading,
                                         int(headroom or 0))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("serve_kv_budget: %s" % exc)


def serve_rank_hint(ranks, plan):
    """The readiness probe's line for data-parallel ranks that answered nothing beside others that did; see
    plugin_utils/_serve.py silent_ranks_hint."""
    return _serve.silent_ranks_hint(ranks, plan)


class FilterModule(object):
    def filters(self):
        return {
            "llm_cluster_status": llm_cluster_status,
            "llm_cluster_status_table": llm_cluster_status_table,
            "serve_ascend_host_paths": serve_ascend_host_paths,
            "serve_tls_sans": serve_tls_sans,
            "serve_backend": serve_backend,
            "serve_container_params": serve_container_params,
            "serve_pip_lock": serve_pip_lock,
            "serve_kv_budget": serve_kv_budget,
            "serve_pd_served": serve_pd_served,
            "serve_rank_hint": serve_rank_hint,
            "serve_plan": serve_plan,
            "serve_status": serve_status,
            "serve_status_table": serve_status_table,
            "serve_unit_args": serve_unit_args,
            "serve_watchdog_binding": serve_watchdog_binding,
        }
