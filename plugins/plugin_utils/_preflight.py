# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Preflight verdicts: what every node reported in, one report per host and the cluster's failures out.

Pure functions, evaluated on the controller once every node has been probed, so
that all failures of all hosts are collected before the play fails.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.aihost.llm_cluster.plugins.module_utils._ascend_versions import compare_ascend_versions as compare_versions
from ansible_collections.aihost.llm_cluster.plugins.module_utils._procnet import describe_owners, foreign_owners
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._inventory_validation import ifname_pattern

DEVICE_WORD = {"npu": "NPU", "gpu": "GPU"}
TOOL = {"npu": "npu-smi", "gpu": "nvidia-smi"}
GIB = 1024 ** 3


class _Host(object):
    """Collects the checks of one host."""

    def __init__(self, name):
        self.name = name
        self.checks = []

    def check(self, name, ok, detail, fix=""):
        self.checks.append({"check": name, "ok": bool(ok), "detail": detail, "fix": fix})

    @property
    def failures(self):
        return ["%s: %s%s" % (self.name, c["detail"], "; " + c["fix"] if c["fix"] else "")
                for c in self.checks if not c["ok"]]


def _accel(node):
    return node.get("accelerators") or {"type": "none", "count": 0, "devices": [], "errors": []}


def _expected(nodes, settings):
    head = next((n for n in nodes if n.get("is_head")), nodes[0])
    head_accel = _accel(head)
    kind = settings.get("accelerator_type", "auto")
    if kind == "auto":
        kind = head_accel.get("type", "none")
    count = int(settings.get("device_count") or 0)
    if not count and kind != "none":
        count = head_accel.get("count", 0) if head_accel.get("type") == kind else 0
    return head, kind, count


def _group_expected(nodes, settings):
    """With serving groups (llm_cluster_serving_groups): {host: (kind, count, where)}, each node held to its group's
    first node as the others are to the head (that node's prepare_accelerator_type and prepare_device_count, else
    what it has)."""
    expected = {}
    by_host = dict((n["host"], n) for n in nodes)
    for item in settings.get("serving_groups") or []:
        name, hosts = item[0], list(item[1] or [])
        probed = [by_host[h] for h in hosts if h in by_host]
        if not probed:
            continue
        first = probed[0]
        own = first.get("expect") or {}
        wanted = own.get("accelerator_type") or "auto"
        _first, kind, count = _expected([first], {"accelerator_type": wanted, "device_count": own.get("device_count")})
        where = ("prepare_accelerator_type of %s, the first node of serving group %s" if wanted != "auto" else
                 "as on %s, the first node of serving group %s") % (first["host"], name)
        for node in probed:
            expected.setdefault(node["host"], (kind, count, where))
    return expected


def _check_accelerators(host, node, kind, count, settings, where=None):
    accel = _accel(node)
    found = accel.get("type", "none")
    word = DEVICE_WORD.get(kind, "device")
    if found != kind:
        host.check("accelerator_type", False,
                   "expected %s accelerators (%s) but found %s" % (kind, where or ("prepare_accelerator_type" if settings.get(
                       "accelerator_type", "auto") != "auto" else "as on the head"), found),
                   "install the %s driver and tool, or set prepare_accelerator_type" % TOOL.get(kind, "vendor")
                   if kind != "none" else "set prepare_accelerator_type: %s if this node should serve on it" % found)
        return
    host.check("accelerator_type", True, "%s accelerators" % kind)
    for error in accel.get("errors") or []:
        host.check("accelerator_probe", False, error, "check the driver with %s" % TOOL.get(kind, "the vendor tool"))
    if kind == "none":
        return
    devices = accel.get("devices") or []
    indices = sorted(d.get("index") for d in devices)
    if count and len(devices) != count:
        missing = sorted(set(range(count)) - set(indices))
        detail = "%d %ss found (%s), expected %d" % (len(devices), word, ",".join(str(i) for i in indices) or "none", count)
        if missing:
            detail += "; missing %s" % ", ".join("%s %d" % (word, i) for i in missing)
        host.check("device_count", False, detail,
                   "check '%s info' and dmesg for the missing device, or set prepare_device_count" % TOOL[kind])
    else:
        host.check("device_count", True, "%d %ss" % (len(devices), word))
    for device in devices:
        health = device.get("health") or "unknown"
        if health != "OK":
            if kind == "npu":
                # Name the card and chip: on a 300I Duo or an A3 the two chips of a card share it.
                where = "%s, card %s chip %s" % (device.get("bus_id") or "?", device.get("npu_id"), device.get("chip_id"))
                fix = "inspect it with 'npu-smi info -t health -i %s -c %s'" % (device.get("npu_id"), device.get("chip_id"))
            else:
                where = device.get("bus_id") or "?"
                fix = "inspect it with 'nvidia-smi -q -i %s'" % device.get("index")
            host.check("device_health", False, "%s %s (%s) health is %s" % (word, device.get("index"), where, health),
                       fix)
    if kind == "npu":
        _check_npu_software(host, accel, settings)


def _check_npu_software(host, accel, settings):
    minimum = str(settings.get("npu_driver_min_version") or "0")
    driver = accel.get("driver_version")
    if not driver:
        host.check("npu_driver", False, "NPU driver version unknown (no version.info, npu-smi printed none)",
                   "reinstall the Ascend driver")
    else:
        try:
            too_old = compare_versions(str(driver), minimum) < 0
        except ValueError as exc:
            host.check("npu_driver", False, "NPU driver version '%s' cannot be compared: %s" % (driver, exc),
                       "set prepare_npu_driver_min_version to a version such as 24.1.0")
        else:
            host.check("npu_driver", not too_old,
                       "NPU driver %s is older than %s (prepare_npu_driver_min_version)" % (driver, minimum) if too_old
                       else "NPU driver %s >= %s" % (driver, minimum),
                       "upgrade the Ascend driver: fine-grained CPU binding needs %s or later" % minimum if too_old else "")
    cann = accel.get("cann_version")
    if settings.get("require_cann", True):
        host.check("cann", bool(cann), "CANN toolkit %s" % cann if cann else
                   "CANN toolkit not found under %s/ascend-toolkit" % settings.get("ascend_root", "/usr/local/Ascend"),
                   "" if cann else "install the CANN toolkit, or set prepare_require_cann: false")
    host.check("firmware", True, "firmware %s" % (accel.get("firmware_version") or "not reported"))


def _check_resources(host, node, model_size, settings):
    facts = node.get("facts") or {}
    memory = facts.get("memory") or {}
    node_num = max(1, int(settings.get("node_num") or 1))
    factor = float(settings.get("memory_factor") or 1.3)
    if model_size:
        need = int(model_size / node_num * factor)
        ok = memory.get("available", 0) >= need
        host.check("memory", ok, "%.1f GiB memory available, %s %.1f GiB (model %.1f GiB / %d nodes x %.1f)" % (
            memory.get("available", 0) / GIB, "need" if not ok else "needs", need / GIB, model_size / GIB, node_num, factor),
            "" if ok else "free memory on this node or add nodes")
    else:
        host.check("memory", True, "%.1f GiB memory available (model size unknown)" % (memory.get("available", 0) / GIB))
    model = facts.get("model") or {}
    free = model.get("disk_free")
    want = float(settings.get("min_free_disk_gb") or 0) * GIB
    if free is None:
        host.check("disk", True, "model path not set")
    elif not model.get("exists") and want and free < want:
        host.check("disk", False, "%.1f GiB free under %s, prepare_min_free_disk_gb asks %.1f GiB" % (
            free / GIB, model.get("disk_path"), want / GIB), "free space there or point model_path at a larger disk")
    else:
        present = ", model present (%.1f GiB)" % (model.get("size", 0) / GIB) if model.get("exists") else ""
        host.check("disk", True, "%.1f GiB free under %s%s" % (free / GIB, model.get("disk_path"), present))


def _check_interface(host, node, settings):
    iface = (node.get("facts") or {}).get("interface") or {}
    var = settings.get("interface_var", "ray_device")
    shown = iface.get("name") or iface.get("requested") or "?"
    others = ", ".join(iface.get("available") or []) or "none"
    if iface.get("error") or not iface.get("exists"):
        host.check("interface", False, "interface %s (%s) does not exist: %s" % (shown, var, iface.get("error") or "not found"),
                   "set %s for %s to one of its interfaces (%s)" % (var, host.name, others))
    elif not iface.get("up"):
        host.check("interface", False, "interface %s (%s) is DOWN" % (shown, var), "bring it up (ip link set %s up) and check the cable" % shown)
    elif not iface.get("ipv4"):
        host.check("interface", False, "interface %s (%s) has no IPv4 address" % (shown, var),
                   "configure an address on it or choose another interface (%s)" % others)
    else:
        host.check("interface", True, "%s %s" % (shown, iface.get("address")))


# The collective libraries' interface variables, as prepare_env_extra and serve_environment may set them
# (the env file's own are the resolved interface). NCCL's and HCCL's take '^' (exclude), '=' (exact) and
# prefixes; Gloo's and TensorPipe's names only (the validator refused anything else before any host).
COMM_INTERFACE_SOURCES = ("prepare_env_extra", "serve_environment")
COMM_INTERFACE_PATTERNS = ("NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME")
COMM_INTERFACE_NAMES = ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")


def _matching_interfaces(name, value, available):
    """The node's interfaces the variable selects ([] when none), and the names it lists that are missing."""
    exclude, exact, items = ifname_pattern(name, value)
    items = [item for item in items if item]
    if name in COMM_INTERFACE_PATTERNS:

        def listed(interface):
            return any(interface == item if exact else interface.startswith(item) for item in items)

        return [i for i in available if listed(i) != exclude], []
    missing = [item for item in items if item not in available]
    return ([] if missing else items), missing


def _check_comm_interfaces(host, node):
    """Each interface a collective library is told to use exists on this node (one check per variable set)."""
    maps = node.get("comm_env") or {}
    available = list(((node.get("facts") or {}).get("interface") or {}).get("available") or [])
    chosen = {}
    for source in COMM_INTERFACE_SOURCES:
        for name, value in (maps.get(source) or {}).items():
            if name in COMM_INTERFACE_PATTERNS + COMM_INTERFACE_NAMES and isinstance(value, str):
                chosen[name] = (source, value)
    for name in sorted(chosen):
        source, value = chosen[name]
        matched, missing = _matching_interfaces(name, value, available)
        where = "%s.%s = '%s'" % (source, name, value)
        has = ", ".join(available) or "none but lo"
        if matched:
            host.check("collective interface", True, "%s selects %s" % (where, ", ".join(matched)))
        elif missing:
            host.check("collective interface", False, "%s names %s, which this node does not have (it has %s)"
                       % (where, ", ".join(missing), has),
                       "set %s for %s to its interface on the cluster network (host_vars when names differ), or "
                       "leave it unset: the env file sets the resolved interface" % (name, host.name))
        else:
            host.check("collective interface", False, "%s selects none of this node's interfaces (it has %s)"
                       % (where, has),
                       "set %s for %s so that it selects the interface on the cluster network, or leave it unset"
                       % (name, host.name))


def _check_ports(host, node, settings):
    prefix = settings.get("managed_unit_prefix", "llm-cluster-")
    names = {int(v): k for k, v in (settings.get("ports") or {}).items()}
    for port in (node.get("facts") or {}).get("ports") or []:
        foreign = foreign_owners(port.get("owners"), prefix, node.get("own_containers") or ())
        name = names.get(port["port"], "port")
        if foreign:
            host.check("port_free", False, "%s %d is in use by %s" % (name, port["port"], describe_owners(foreign)),
                       "stop that service or choose another %s" % name)
        else:
            host.check("port_free", True, "%s %d %s" % (name, port["port"], "free" if port.get("free") else "held by llm_cluster"))


def _admitted(nodes):
    """{host: (members, rejects)} for the nodes whose firewall preflight_info could read: the addresses or
    networks the firewall admits on every port, as the Ray step writes them, and whether it refuses the others
    with an answer (firewalld rejects; this collection's nftables table drops)."""
    admitted = {}
    for node in nodes:
        firewall = (node.get("facts") or {}).get("firewall") or {}
        members = firewall.get("members")
        if isinstance(members, list):
            admitted[node["host"]] = ([str(m) for m in members], firewall.get("members_from") == "firewalld")
    return admitted


def _covers(members, address):
    """Whether an address is one of the members or inside one of their networks."""
    try:
        address = ipaddress.ip_address(address)
    except ValueError:
        return False
    for member in members:
        try:
            if address in ipaddress.ip_network(member, strict=False):
                return True
        except ValueError:
            continue
    return False


def _pending(result, address, admitted):
    """A probe that failed only because the target's firewall does not admit this node yet: the target's rules
    (read) do not list the address, and the failure is what that firewall does to a stranger (a drop times out;
    firewalld's zone rejects, which reads as "No route to host" on its nftables backend, an ICMP
    admin-prohibited, and as "Connection refused" on its iptables backend, an ICMP port-unreachable: the
    target's probe listener holds the port, so a refusal there is the zone's)."""
    if result.get("reachable") or not address or result.get("name") not in admitted:
        return False
    members, rejects = admitted[result["name"]]
    error = str(result.get("error"))
    refused_by_rule = "timed out" in error or (rejects and any(text in error for text in (
        "No route to host", "Errno 113", "Connection refused", "Errno 111")))
    return refused_by_rule and not _covers(members, address)


def _check_reachability(host, node, settings, admitted=None):
    probe = node.get("probe")
    if probe is None:
        host.check("reachability", False, "peers not probed (no address on the cluster interface)",
                   "fix the interface first")
        return
    var = settings.get("interface_var", "ray_device")
    address = ((node.get("facts") or {}).get("interface") or {}).get("address")
    results = probe.get("results") or []
    # A node new to the cluster (a replacement at a new address, a node added, every node of a first deploy on
    # firewalld) is not yet admitted by the firewall rules the Ray step writes on the others (this collection's
    # nftables table, or firewalld's rich rules): they refuse its probe until that step runs. That is not the
    # site's firewall: Ray's join, once the rules admit the node, proves the path. Any other failure (a refusal,
    # no route to a node without firewalld), and one from an admitted node or to a node whose rules were not
    # read, stays one.
    pending = [r for r in results if _pending(r, address, admitted or {})]
    for result in results:
        if not result.get("reachable") and result not in pending:
            host.check("reachability", False, "cannot reach %s at %s:%s over %s (%s)" % (
                result.get("name"), result.get("address"), result.get("port"), var, result.get("error") or "no answer"),
                "allow TCP %s from the cluster members on %s's firewall and check routing" % (result.get("port"), result.get("name")))
    reached = [r for r in results if r.get("reachable")]
    if pending and len(reached) + len(pending) == len(results):
        host.check("reachability", True, "reaches %d peer(s) on port %s; not yet %s, whose firewall admits this "
                   "node's %s only once the Ray step writes its rules (Ray's join then proves the path)"
                   % (len(reached), (reached or pending)[0].get("port"), ", ".join(r.get("name") for r in pending), address))
    elif reached and len(reached) == len(results):
        host.check("reachability", True, "reaches %d peer(s) on port %s" % (len(reached), reached[0].get("port")))
    elif not results:
        host.check("reachability", True, "no peers")


def _clock_offsets(nodes):
    """Per host: the largest measured |offset| to a peer (seconds, uncertainty subtracted), or None."""
    worst = {}
    for node in nodes:
        for result in (node.get("probe") or {}).get("results") or []:
            if result.get("clock_offset") is None:
                continue
            excess = max(0.0, abs(result["clock_offset"]) - (result.get("clock_uncertainty") or 0.0))
            for name in (node["host"], result.get("name")):
                worst[name] = max(worst.get(name, 0.0), excess)
    return worst


def _check_clock(host, node, worst, settings):
    bound = float(settings.get("clock_max_offset") or 1.0)
    if host.name in worst:
        excess = worst[host.name]
        host.check("clock", excess <= bound, "clock offset to a peer up to %.3f s (limit %.3f s)" % (excess, bound),
                   "" if excess <= bound else "enable time synchronisation (chrony) on every node")
        return
    host.check("clock", True, "clock offset not measured (single node, or no probe listener answered)")


def _check_python(host, node, head):
    mine = (node.get("facts") or {}).get("python_version")
    theirs = (head.get("facts") or {}).get("python_version")
    host.check("python", mine == theirs, "Python %s%s" % (mine, "" if mine == theirs else " but the head %s has %s" % (head["host"], theirs)),
               "" if mine == theirs else "install the same Python on every node (Ray needs identical versions)")


def evaluate(nodes, settings):
    """Return {ok, failures, hosts: {name: {checks, failures, summary}}} for the probed ``nodes``.

    Each node: {host, is_head, accelerators (accelerator_facts), facts (preflight_info),
    probe (tcp_probe result or None), comm_env ({prepare_env_extra, serve_environment}: their
    collective interface variables only)}.
    """
    if not nodes:
        return {"ok": False, "failures": ["no hosts were probed"], "hosts": {}}
    head, kind, count = _expected(nodes, settings)
    model_size = int(settings.get("model_size_bytes") or 0) or int(((head.get("facts") or {}).get("model") or {}).get("size") or 0)
    worst = _clock_offsets(nodes)
    expected = {"accelerator_type": kind, "device_count": count, "model_size_bytes": model_size}
    report = {"ok": True, "failures": [], "hosts": {}, "expected": expected}
    grouped = _group_expected(nodes, settings)
    admitted = _admitted(nodes)
    for node in nodes:
        host = _Host(node["host"])
        if node["host"] in grouped:
            node_kind, node_count, where = grouped[node["host"]]
            _check_accelerators(host, node, node_kind, node_count, settings, where)
        else:
            _check_accelerators(host, node, kind, count, settings)
        _check_resources(host, node, model_size, settings)
        _check_interface(host, node, settings)
        _check_comm_interfaces(host, node)
        _check_ports(host, node, settings)
        _check_reachability(host, node, settings, admitted)
        _check_clock(host, node, worst, settings)
        _check_python(host, node, head)
        facts = node.get("facts") or {}
        accel = _accel(node)
        report["hosts"][host.name] = {
            "host": host.name,
            "head": bool(node.get("is_head")),
            "ok": not host.failures,
            "failures": host.failures,
            "checks": host.checks,
            "summary": {
                "accelerator": accel.get("type"),
                "product": accel.get("product"),
                "memory_kind": accel.get("memory_kind"),
                "devices": accel.get("count", 0),
                "unhealthy": sum(1 for d in accel.get("devices") or [] if d.get("health") != "OK"),
                "driver": accel.get("driver_version"),
                "firmware": accel.get("firmware_version"),
                "cann": accel.get("cann_version"),
                "kernel": facts.get("kernel"),
                "python": facts.get("python_version"),
                "memory_available_gib": round((facts.get("memory") or {}).get("available", 0) / GIB, 1),
                "interface": (facts.get("interface") or {}).get("name"),
                "address": (facts.get("interface") or {}).get("address"),
            },
        }
        report["failures"].extend(host.failures)
    probed = set(report["hosts"])
    for name in settings.get("hosts") or []:
        if name not in probed:
            report["failures"].append("%s: not probed (unreachable, or it failed an earlier task); "
                                      "fix the connection and run again" % name)
    report["ok"] = not report["failures"]
    return report


def _networks(values):
    """The IP networks of a list of addresses or CIDRs; what does not read as one is left out."""
    found = []
    for value in values or []:
        try:
            found.append(ipaddress.ip_network(str(value), strict=False))
        except ValueError:
            continue
    return found


def _inside(network, networks):
    return any(network.version == other.version and network.subnet_of(other) for other in networks)


def _outside(value, networks):
    """Whether an address or network lies beyond every one of ``networks``; what is no address (a MAC) does."""
    found = _networks([value])
    return not found or not _inside(found[0], networks)


def _zone_entries(entry):
    """A source zone's sources as (source, [entries]): an address or network stands for itself, an ipset for the
    entries read from it, a MAC address for none that can be read."""
    pairs = []
    for source in entry.get("sources") or []:
        if str(source).startswith("ipset:"):
            pairs.append((source, [str(e) for e in (entry.get("ipsets") or {}).get(source[len("ipset:"):]) or []]))
        else:
            pairs.append((source, [str(source)]))
    return pairs


def source_zone_gaps(node, members, admin_cidrs):
    """One message per way a zone that binds sources (firewalld takes its traffic before the interface's zone)
    defeats the Ray step's rules on ``node``: it refuses a member, or it accepts every port from a network that
    is neither a member nor an admin network. ``members``: {host: cluster address}. The permanent configuration
    (what firewalld's next reload or the node's boot makes running) is named for what the running one does not
    show already."""
    zones = ((node.get("facts") or {}).get("firewall") or {}).get("source_zones") or []
    running = _source_zone_gaps(node, [z for z in zones if not z.get("permanent")], members, admin_cidrs, False)
    later = _source_zone_gaps(node, [z for z in zones if z.get("permanent")], members, admin_cidrs, True)
    return [message for _key, message in running] + [message for key, message in later if key not in dict(running)]


def _source_zone_gaps(node, zones, members, admin_cidrs, permanent):
    """(what is wrong, message) for each problem of these zones, all of one configuration."""
    host = node.get("host", "?")
    rules_zone = ((node.get("facts") or {}).get("firewall") or {}).get("zone")
    admitted = _networks(list(members.values()) + list(admin_cidrs or []))
    later = ("; this is firewalld's permanent configuration, not running yet: its next reload or the node's boot makes "
             "it so" if permanent else "")
    gaps = []
    for entry in zones:
        zone = entry.get("zone")
        if entry.get("error"):
            gaps.append((("unread", zone), "%s: firewalld's zones that bind sources cannot be read (%s), so the "
                         "preflight cannot tell whether one takes a member's or a stranger's traffic before the rules "
                         "of the Ray step; make that command answer on the node, then run again" % (host, entry["error"])))
            continue
        if not zone or zone == rules_zone:
            continue
        target = entry.get("target") or "default"
        for source, entries in _zone_entries(entry):
            fix = ("take it out (firewall-cmd --permanent --zone=%s --remove-source=%s)" if permanent else
                   "take it out (firewall-cmd --zone=%s --remove-source=%s, and again with --permanent)") % (zone, source)
            if target != "ACCEPT":
                for peer, address in sorted(members.items()):
                    if peer != host and address and _covers(entries, address):
                        gaps.append(((zone, source, peer), "%s: firewalld zone %s takes the traffic of member %s (%s, "
                                     "source %s) before zone %s, where the Ray step admits the members, and refuses "
                                     "what it does not open (target %s): Ray and the engine could not reach this node "
                                     "from %s; %s%s" % (host, zone, peer, address, source, rules_zone, target, peer,
                                                        fix, later)))
                continue
            # What the source lets in beyond the members and the admin networks; a MAC address (a source or an
            # ipset's entry) stands for hosts this check cannot tell.
            beyond = [e for e in entries if _outside(e, admitted)]
            if beyond:
                what = source if beyond == [source] else "%s (%s)" % (source, ", ".join(beyond))
                gaps.append(((zone, source, "accept"), "%s: firewalld zone %s accepts every port (target ACCEPT) from "
                             "%s before the rules of the Ray step see it, and that is not only the members and "
                             "llm_cluster_admin_cidrs: hosts there would reach Ray and the engine; %s, or list the "
                             "network in llm_cluster_admin_cidrs to let it in on purpose%s" % (host, zone, what, fix, later)))
    return gaps


def firewall_gaps(nodes, mode, admin_cidrs=None):
    """One message per node without the firewall that ``mode`` (llm_cluster_firewall) needs, or whose firewalld
    zones would defeat the Ray step's rules; [] for none."""
    gaps = []
    if mode == "none":
        return gaps
    members = dict((n.get("host", "?"), ((n.get("facts") or {}).get("interface") or {}).get("address")) for n in nodes)
    for node in nodes:
        host = node.get("host", "?")
        found = (node.get("facts") or {}).get("firewall") or {}
        firewalld, nft = bool(found.get("firewalld")), bool(found.get("nft"))
        if mode == "auto" and not firewalld and not nft:
            gaps.append("%s: no firewall: firewalld is not running and there is no nft command, so Ray and the engine would "
                        "be open to anyone who can reach the node; install nftables (apt-get install nftables, or dnf install "
                        "nftables) or start firewalld, or set llm_cluster_firewall: none to acknowledge that the network "
                        "around the nodes keeps non-members out" % host)
        elif mode == "nftables" and not nft:
            gaps.append("%s: llm_cluster_firewall is nftables but there is no nft command; install nftables" % host)
        elif mode == "firewalld" and not firewalld:
            gaps.append("%s: llm_cluster_firewall is firewalld but firewalld is not running; start it" % host)
        elif mode in ("auto", "firewalld") and firewalld and found.get("error"):
            # The Ray step would fail on the same zone after the prepare step changed the node.
            gaps.append("%s: firewalld cannot list the rich rules of the zone the Ray step writes to (%s); set "
                        "ray_cluster_firewalld_zone to one of the node's zones (firewall-cmd --get-zones), or leave it "
                        "empty for firewalld's default zone" % (host, found["error"]))
        elif mode in ("auto", "firewalld") and firewalld and found.get("zone") and found.get("interface_zone") \
                and found["zone"] != found["interface_zone"]:
            interface = ((node.get("facts") or {}).get("interface") or {}).get("name") or "the cluster interface"
            gaps.append("%s: %s is in firewalld zone %s, but the Ray step would write its rules to zone %s, which does "
                        "not see that interface's traffic; set ray_cluster_firewalld_zone: %s"
                        % (host, interface, found["interface_zone"], found["zone"], found["interface_zone"]))
        if mode in ("auto", "firewalld") and firewalld and not found.get("error"):
            gaps += source_zone_gaps(node, members, admin_cidrs)
    return gaps


def offline_missing(hosts, hostvars):
    """One message per path an offline node lacks, from each host's ``__prepare_offline_stat`` (a looped stat whose
    items are {path, what, fix}); [] when every node has everything."""
    missing = []
    for host in hosts:
        try:
            registered = hostvars[host].get("__prepare_offline_stat") or {}
        except (KeyError, AttributeError, TypeError):
            continue
        for result in registered.get("results") or []:
            if result.get("skipped") or (result.get("stat") or {}).get("exists"):
                continue
            item = result.get("item") or {}
            missing.append("%s: %s is not there (%s): %s" % (host, item.get("path"), item.get("what"), item.get("fix")))
    return missing


def report_files(hosts):
    """Name each node's report file: ``preflight-<host>.json`` to the node's entry of the report."""
    return dict(("preflight-%s.json" % name, entry) for name, entry in sorted(hosts.items()))


def table(report):
    """Render the report as a fixed-width table, one row per host."""
    columns = [("host", 10), ("accel", 5), ("dev", 3), ("bad", 3), ("driver", 11), ("cann", 8), ("kernel", 16),
               ("mem GiB", 7), ("iface", 8), ("address", 15), ("result", 8)]
    widths = [width for _name, width in columns]
    lines = ["  ".join(name.ljust(width) for name, width in columns)]
    for name in sorted(report["hosts"], key=lambda h: (not report["hosts"][h]["head"], h)):
        entry = report["hosts"][name]
        s = entry["summary"]
        cells = [name, s["accelerator"], s["devices"], s["unhealthy"], s["driver"] or "-", s["cann"] or "-",
                 s["kernel"] or "-", s["memory_available_gib"], s["interface"] or "-", s["address"] or "-",
                 "OK" if entry["ok"] else "FAIL(%d)" % len(entry["failures"])]
        lines.append("  ".join(str(c)[:w].ljust(w) for c, w in zip(cells, widths)))
    return "\n".join(lines)
