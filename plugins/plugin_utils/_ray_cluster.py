# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Controller-side rules of the ray_cluster role: checks before Ray starts, the join verdict, status.

Every function takes plain data (module results collected from the hosts) and returns plain data, so the
role's messages are unit-tested without a cluster.
"""

from __future__ import annotations

import re

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _ray
from ansible_collections.aihost.llm_cluster.plugins.module_utils._procnet import describe_owners, foreign_owners

GIB = 1024 ** 3


def parse_env(text):
    """KEY=value lines of /etc/llm_cluster/env -> dict (comments and blank lines skipped)."""
    values = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def _count(value):
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def node_resources(env, extra=None):
    """A node's Ray resources from its cluster environment file (parsed): NPUs as the custom resource ``NPU``,
    GPUs as ``num_gpus``; ``extra`` (ray_cluster_resources) is added to the custom resources and wins."""
    env = env if isinstance(env, dict) else {}
    kind, count = env.get("LLM_CLUSTER_ACCELERATOR", ""), _count(env.get("LLM_CLUSTER_ACCELERATOR_COUNT", 0))
    resources = {"NPU": count} if kind == "npu" and count > 0 else {}
    resources.update(extra if isinstance(extra, dict) else {})
    return {"resources": resources, "num_gpus": count if kind == "gpu" else 0}


def expected_resources(nodes):
    """The accelerators the whole cluster must show once every node joined: the sum of every node's custom
    resources, and ``GPU`` for the nodes' ``num_gpus`` (what node_resources returned for each)."""
    total = {}
    for node in nodes:
        node = node if isinstance(node, dict) else {}
        for name, value in (node.get("resources") or {}).items():
            total[name] = total.get(name, 0) + value
        if _count(node.get("num_gpus")) > 0:
            total["GPU"] = total.get("GPU", 0) + _count(node.get("num_gpus"))
    return total


def port_ranges(ports, ranges=()):
    """Merge ports and 'first-last' ranges into sorted, contiguous 'first-last' or 'port' strings."""
    spans = [(int(p), int(p)) for p in ports]
    for text in ranges:
        first, sep, last = str(text).partition("-")
        spans.append((int(first), int(last if sep else first)))
    merged = []
    for low, high in sorted(spans):
        if merged and low <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    return ["%d" % low if low == high else "%d-%d" % (low, high) for low, high in merged]


def _port_problems(settings):
    """Problems with the port settings themselves (the same on every host)."""
    problems = []
    ports = {name: int(port) for name, port in (settings.get("ports") or {}).items()}
    low, high = (int(v) for v in settings.get("worker_ports") or (0, 0))
    for name, port in sorted(ports.items()):
        if not 1 <= port <= 65535:
            problems.append("%s is %d, outside 1-65535; choose a free port" % (name, port))
    seen = {}
    for name, port in sorted(ports.items()):
        if port in seen:
            problems.append("%s and %s are both %d; every Ray, API and data-parallel port must differ" % (
                seen[port], name, port))
        seen.setdefault(port, name)
    if not (1024 <= low < high <= 65535):
        problems.append("ray_cluster_worker_port_min/max is %d-%d; give a range like 20000-20999 inside 1024-65535"
                        % (low, high))
    elif high - low + 1 < int(settings.get("min_worker_ports") or 0):
        problems.append("ray_cluster_worker_port_min/max %d-%d leaves %d ports; Ray starts one worker per port and "
                        "needs at least %d" % (low, high, high - low + 1, int(settings["min_worker_ports"])))
    else:
        for name, port in sorted(ports.items()):
            if low <= port <= high:
                problems.append("%s %d lies inside the Ray worker port range %d-%d; move the range "
                                "(ray_cluster_worker_port_min/max) or the port" % (name, port, low, high))
    problems += _kv_port_problems(settings.get("kv_ports") or [], ports, (low, high))
    return problems


_PORT_SPAN = re.compile(r"^([0-9]{1,5})(?:-([0-9]{1,5}))?$")


def port_span(value):
    """(low, high) of a port (6379) or a "first-last" range inside 1-65535; None for anything else."""
    match = _PORT_SPAN.match(str(value).strip()) if isinstance(value, (int, str)) else None
    low, high = (int(match.group(1)), int(match.group(2) or match.group(1))) if match else (0, 0)
    return (low, high) if match and 1 <= low <= high <= 65535 else None


def _kv_port_problems(values, ports, workers):
    """ray_cluster_kv_ports (llm_cluster_kv_ports): ports and first-last ranges, clear of Ray's and the engine's."""
    problems = []
    if not isinstance(values, list):
        return ["ray_cluster_kv_ports (llm_cluster_kv_ports) must be a list of ports and first-last ranges, got %r"
                % (values,)]
    for value in values:
        span = port_span(value)
        if span is None:
            problems.append("ray_cluster_kv_ports (llm_cluster_kv_ports) takes ports and first-last ranges inside "
                            "1-65535, got %r" % (value,))
            continue
        low, high = span
        for name, port in sorted(ports.items()):
            if low <= port <= high:
                problems.append("ray_cluster_kv_ports %s holds %s %d; move one of them" % (value, name, port))
        if low <= workers[1] and workers[0] <= high:
            problems.append("ray_cluster_kv_ports %s overlaps the Ray worker port range %d-%d; move one of them"
                            % (value, workers[0], workers[1]))
    return problems


_IFNAME = re.compile(r"^[A-Za-z0-9_.@-]{1,15}$")


def _node_problems(node, settings):
    host = node.get("host")
    info = node.get("info") or {}
    problems = []
    if not node.get("address"):
        problems.append("%s: no cluster address in %s; run the prepare step first (--tags prepare)" % (
            host, settings.get("env_file", "/etc/llm_cluster/env")))
    prefix = settings.get("unit_prefix", "llm-cluster-")
    names = {int(p): n for n, p in (settings.get("ports") or {}).items()}
    for listener in info.get("listeners") or []:
        foreign = foreign_owners(listener.get("owners"), prefix)
        if foreign:
            problems.append("%s: port %d (%s) is in use by %s; stop it or move the port" % (
                host, listener["port"], names.get(listener["port"], "Ray worker port"), describe_owners(foreign)))
    size, why = _ray.object_store_size(settings.get("object_store_memory") or 0, info.get("memory"),
                                       (info.get("shm") or {}).get("size"))
    node["object_store_memory"] = size
    if why:
        problems.append("%s: %s; enlarge /dev/shm (mount -o remount,size=..., or --shm-size for a container) "
                        "or set ray_cluster_object_store_memory" % (host, why))
    firewall = info.get("firewall") or {}
    if node.get("firewall") == "auto" and not firewall.get("firewalld") and not firewall.get("nft"):
        problems.append("%s: no firewall: firewalld is not running and there is no nft command, so Ray and the engine "
                        "would be open to anyone who can reach %s; install nftables (apt-get install nftables, or "
                        "dnf install nftables) or start firewalld, or set llm_cluster_firewall: none to acknowledge "
                        "that the network around the nodes keeps non-members out" % (host, node.get("address") or host))
    elif node.get("firewall") in ("auto", "nftables") and firewall.get("nft") and not firewall.get("firewalld") \
            and not _IFNAME.match(node.get("interface") or ""):
        problems.append("%s: cluster interface %r cannot be named in the nftables table; set ray_device to the "
                        "interface's name (1-15 of A-Z a-z 0-9 _ . - @)" % (host, node.get("interface") or ""))
    if node.get("firewall") == "firewalld" and not firewall.get("firewalld"):
        problems.append("%s: ray_cluster_firewall is firewalld but firewalld is not running; start it or set "
                        "ray_cluster_firewall to auto" % host)
    elif node.get("firewall") == "nftables" and not firewall.get("nft"):
        problems.append("%s: ray_cluster_firewall is nftables but there is no nft command; install nftables or set "
                        "ray_cluster_firewall to auto" % host)
    temp = info.get("temp_dir") or {}
    want = float(settings.get("temp_min_free_gb") or 0) * GIB
    if temp.get("free") is not None and temp["free"] < want:
        problems.append("%s: %.1f GiB free under %s for Ray's temp dir, %.1f GiB wanted; free space or set "
                        "ray_cluster_temp_dir to a larger disk" % (host, temp["free"] / GIB, temp.get("checked"), want / GIB))
    return problems


def check_nodes(nodes, settings):
    """Checks before anything is installed or started. Returns {ok, failures, object_store: {host: bytes}}."""
    failures = _port_problems(settings)
    for node in nodes:
        failures.extend(_node_problems(node, settings))
    return {"ok": not failures, "failures": failures,
            "object_store": {node["host"]: node.get("object_store_memory") for node in nodes}}


def check_versions(nodes, want):
    """Every node must run the pinned Ray and the same Python minor version. nodes: [{host, info}]."""
    failures = []
    pythons = {}
    for node in nodes:
        venv = (node.get("info") or {}).get("venv") or {}
        if not venv.get("exists"):
            continue
        if venv.get("ray_version") != want:
            failures.append("%s: Ray %s in %s, the cluster pins %s; rerun with ray_cluster_version=%s or fix the wheelhouse"
                            % (node["host"], venv.get("ray_version") or "not installed", venv.get("path"), want, want))
        pythons.setdefault(_ray.minor_version(venv.get("python_version")), []).append(node["host"])
    if len(pythons) > 1:
        shown = "; ".join("Python %s on %s" % (version, ", ".join(hosts)) for version, hosts in sorted(pythons.items(), key=str))
        failures.append("Ray needs one Python version on every node, found %s; recreate the venvs "
                        "(ray_cluster_python) with the same interpreter" % shown)
    return {"ok": not failures, "failures": failures}


def _diagnose(node, head, port):
    host = node.get("host")
    info = node.get("info") or {}
    service = info.get("service") or {}
    lines = []
    if not service.get("exists"):
        state = "unit %s is not installed" % service.get("name")
    else:
        state = "unit %s is %s/%s" % (service.get("name"), service.get("active_state"), service.get("sub_state"))
        if service.get("restarts"):
            state += " after %d restart(s)" % service["restarts"]
    probe = node.get("probe")
    if probe is None:
        reach = "head not probed"
    elif probe.get("reachable"):
        reach = "reaches the head's GCS %s:%s" % (probe.get("address"), port)
    else:
        reach = "CANNOT reach the head's GCS %s:%s (%s): allow TCP %s from %s on %s's firewall, check routing" % (
            probe.get("address"), port, probe.get("error") or "no answer", port, node.get("address") or host, head)
    venv = info.get("venv") or {}
    versions = "Ray %s, Python %s" % (venv.get("ray_version") or "missing", venv.get("python_version") or "missing")
    lines.append("%s (%s): %s; %s; %s" % (host, node.get("address") or "no address", state, reach, versions))
    for entry in (info.get("journal") or [])[-10:]:
        lines.append("    %s | %s" % (host, entry))
    return lines


def join_report(cluster, nodes, settings):
    """Explain an incomplete cluster: which nodes are missing and, for each, why it may be.

    cluster: the ray_cluster_info result; nodes: [{host, address, info (with journal), probe}];
    settings: {head, port, expect_nodes, expect_resources, timeout, head_versions}.
    """
    alive = {n.get("address") for n in cluster.get("nodes") or [] if n.get("alive")}
    missing = [node for node in nodes if node.get("address") not in alive]
    lines = ["Ray cluster incomplete after %ss: %s." % (settings.get("timeout"), "; ".join(cluster.get("missing") or ["?"]))]
    head = settings.get("head")
    head_venv = next(((n.get("info") or {}).get("venv") or {} for n in nodes if n.get("host") == head), {})
    if not missing:
        lines.append("Every node is alive, but the expected resources are not all visible: %s. Check the "
                     "accelerator counts (ray_cluster_resources) against the devices." % cluster.get("resources"))
    for node in missing:
        lines.extend(_diagnose(node, head, settings.get("port")))
        venv = (node.get("info") or {}).get("venv") or {}
        if node.get("host") != head and head_venv.get("ray_version") and (
                venv.get("ray_version") != head_venv.get("ray_version")
                or _ray.minor_version(venv.get("python_version")) != _ray.minor_version(head_venv.get("python_version"))):
            lines.append("    %s: versions differ from the head (Ray %s, Python %s)" % (
                node.get("host"), head_venv.get("ray_version"), head_venv.get("python_version")))
    return {"missing_hosts": [node.get("host") for node in missing], "lines": lines}


def status(cluster, nodes, settings):
    """One status document: per node unit, versions, membership and resources; the cluster totals."""
    by_address = {}
    for entry in cluster.get("nodes") or []:
        if entry.get("alive") or entry.get("address") not in by_address:
            by_address[entry.get("address")] = entry
    hosts = []
    for node in nodes:
        info = node.get("info") or {}
        service = info.get("service") or {}
        member = by_address.get(node.get("address")) or {}
        hosts.append({
            "host": node.get("host"), "address": node.get("address"),
            "role": node.get("role") or ("head" if node.get("host") == settings.get("head") else "worker"),
            "unit": service.get("name"), "unit_state": "%s/%s" % (service.get("active_state"), service.get("sub_state"))
            if service.get("exists") else "absent",
            "pid": service.get("main_pid"), "restarts": service.get("restarts"),
            "ray_version": (info.get("venv") or {}).get("ray_version"),
            "python_version": (info.get("venv") or {}).get("python_version"),
            "in_cluster": "alive" if member.get("alive") else ("dead" if member else "absent"),
            "resources": member.get("resources") or {},
            "firewall": node.get("firewall"),
        })
    return {"address": settings.get("address"), "connected": bool(cluster.get("connected")),
            "error": cluster.get("error"), "alive": cluster.get("alive", 0), "expected_nodes": settings.get("expect_nodes"),
            "resources": cluster.get("resources") or {}, "complete": bool(cluster.get("complete")), "nodes": hosts}


def _fmt_resources(resources, names=("CPU", "NPU", "GPU")):
    return " ".join("%s=%g" % (name, resources[name]) for name in names if name in resources) or "-"


def status_table(doc):
    """Fixed-width table of a status document."""
    rows = [("HOST", "ROLE", "ADDRESS", "UNIT", "PID", "RAY", "PYTHON", "MEMBER", "RESOURCES")]
    for host in doc.get("nodes") or []:
        rows.append((host["host"], host.get("role") or "-", host.get("address") or "-", host.get("unit_state") or "-",
                     str(host.get("pid") or "-"), host.get("ray_version") or "-", host.get("python_version") or "-",
                     host.get("in_cluster"), _fmt_resources(host.get("resources") or {})))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.append("Ray at %s: %d of %s node(s) alive, %s%s" % (
        doc.get("address"), doc.get("alive", 0), doc.get("expected_nodes"), _fmt_resources(doc.get("resources") or {}),
        "" if doc.get("connected") else " (not reachable: %s)" % doc.get("error")))
    return "\n".join(lines)
