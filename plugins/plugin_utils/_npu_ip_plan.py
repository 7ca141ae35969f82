# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""The NPU RoCE address plan of a cluster, its checks, the mesh gate and the MindIE rank table.

Pure functions, run on the controller:

* ``compute_plan`` - one IPv4 address per NPU device of every node, from one
  CIDR, the ordered host list and each host's device indices, with per-device
  overrides, an optional gateway and netdetect address.
* ``plan_problems`` - every reason the plan cannot be applied, as messages
  naming host, device and address.
* ``ping_targets`` - what each device must ping for the full-mesh gate.
* ``evaluate_gate`` / ``gate_table`` - the verdict of the link, health, TLS,
  hccn.conf and reachability checks over the whole cluster, and its table.
* ``rank_table`` - ``rank_table_file.json`` for MindIE-style launchers.

Allocation scheme
-----------------

Hosts are numbered by their position ``k`` in the host list (0 = the head,
then the workers, in inventory order; hosts left out by ``--limit`` keep
their position). Device ``d`` of host ``k`` gets::

    address = network + offset + k * stride + d

with one of two layouts chosen automatically:

``rows`` (when the CIDR holds one 256-address row per host plus a spare first
row, and no host has more than 254 device slots): ``stride = 256``,
``offset = 257``, so host ``k`` owns row ``k + 1`` and device ``d`` sits at
``.d+1`` in it. With the default ``10.10.0.0/16`` the head's devices are
``10.10.1.1-8``, the first worker's ``10.10.2.1-8``: the third octet is the
node number (1-based) and the last one the device index + 1, like
llm_solution's ``10.10.0.<node><device>`` but for up to 255 nodes x 254
devices. Row 0 (``10.10.0.x``, where gateways and llm_solution's addresses
usually live) is never used, so moving from llm_solution's addresses cannot
collide during the change.

``packed`` (smaller CIDRs): ``stride`` = the device slots of the largest host
(highest device index + 1), ``offset`` = the first usable address, so the
devices of all hosts are consecutive from the bottom of the CIDR. A /24 holds
15 hosts x 16 devices or 31 x 8 this way.

Setting ``stride`` and/or ``offset`` explicitly selects the packed formula
with those values (for example a ``stride`` of 16 to keep room for 16-device
nodes, or an ``offset`` that skips a gateway at the bottom of the CIDR).
Every device gets the CIDR's netmask. /31 and /32 networks have no network or
broadcast address (RFC 3021); all their addresses are usable.
"""

from __future__ import annotations

try:
    import netaddr
except ImportError:  # pragma: no cover - reported by the filter plugin
    netaddr = None

DEFAULT_CIDR = "10.10.0.0/16"
ROW = 256
NETDETECT_KEYWORDS = ("gateway", "peer")


class PlanError(Exception):
    """The plan cannot be computed at all (netaddr missing, bad arguments)."""


def _require_netaddr():
    if netaddr is None:
        raise PlanError("the netaddr Python package is required on the controller (pip install netaddr)")


def _ip(value):
    """netaddr.IPAddress of an IPv4 string, or None."""
    if not isinstance(value, str) or value.count(".") != 3:
        return None
    try:
        address = netaddr.IPAddress(value.strip(), flags=netaddr.INET_PTON)
    except (ValueError, TypeError, netaddr.AddrFormatError):
        return None
    return address if address.version == 4 else None


def _as_index(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def device_index(device):
    """The ``hccn_tool -i`` index of a device: an int, or an accelerator_facts device dict.

    For dicts, ``phy_id`` (multi-chip NPUs such as Atlas A3) wins over ``npu_id``,
    then ``index``.
    """
    if isinstance(device, dict):
        for key in ("phy_id", "npu_id", "index"):
            if device.get(key) is not None:
                return _as_index(device[key])
        return None
    return _as_index(device)


def _host_devices(node, errors):
    indices = []
    for device in node.get("devices") or []:
        index = device_index(device)
        if index is None:
            errors.append("host %s: device %r has no usable index" % (node.get("host"), device))
        elif index not in indices:
            indices.append(index)
    return sorted(indices)


def _overrides(node, errors):
    """``{index: address}`` from the host's ``npu_network_addresses`` (a mapping, or a list by index)."""
    raw = node.get("addresses")
    if raw in (None, "", {}, []):
        return {}
    if isinstance(raw, list):
        raw = dict(enumerate(raw))
    if not isinstance(raw, dict):
        errors.append("host %s: npu_network_addresses must map device index to address, got %r" % (node.get("host"), raw))
        return {}
    result = {}
    for key, value in raw.items():
        index = _as_index(key)
        if index is None:
            errors.append("host %s: npu_network_addresses has key %r, which is not a device index" % (node.get("host"), key))
            continue
        if value in (None, ""):
            continue
        result[index] = str(value).strip()
    return result


def _network(cidr, errors):
    try:
        net = netaddr.IPNetwork(str(cidr).strip())
    except (ValueError, TypeError, netaddr.AddrFormatError):
        errors.append("npu_network_cidr %r is not a CIDR such as %s" % (cidr, DEFAULT_CIDR))
        return None
    if net.version != 4:
        errors.append("npu_network_cidr %r is not an IPv4 CIDR" % (cidr,))
        return None
    if "/" not in str(cidr):
        errors.append("npu_network_cidr %r has no prefix length (write it like %s)" % (cidr, DEFAULT_CIDR))
        return None
    return net.cidr


def usable_range(net):
    """(first, last) usable address of ``net`` as ints: all of a /31 or /32, else without network and broadcast."""
    first = int(net.network)
    last = first + net.size - 1
    if net.prefixlen >= 31:
        return first, last
    return first + 1, last - 1


def _address_text(value):
    if value < 0 or value > 0xFFFFFFFF:
        return None
    return str(netaddr.IPAddress(value, 4))


def compute_plan(nodes, hosts=None, cidr=DEFAULT_CIDR, gateway=None, netdetect=None, stride=0, offset=-1):
    """Compute the NPU address plan.

    ``nodes``: list of ``{'host': name, 'devices': [index or accelerator device dict],
    'addresses': {index: address}}`` (``addresses`` = the host's
    ``npu_network_addresses`` override, optional).
    ``hosts``: every cluster member in order (head first); positions come from
    it so a ``--limit`` does not move anyone's addresses. Nodes not in it are
    appended in the order given; members without a node entry keep their
    position and get no devices.
    ``gateway``: optional gateway for every device. ``netdetect``: optional
    netdetect address, ``'gateway'`` (the gateway) or ``'peer'`` (the same-index
    device of the next host, as the MindSpore guides set it).
    ``stride``/``offset``: 0 and -1 select the automatic layout (module docstring).

    Returns a dict: ``cidr``, ``network``, ``netmask``, ``prefixlen``,
    ``usable`` (number of usable addresses), ``layout``, ``stride``,
    ``offset``, ``gateway``, ``netdetect``, ``order`` (host names), ``hosts``
    (``{name: {'position', 'devices': [{'index', 'address', 'netmask', 'gateway',
    'netdetect'}], 'overrides': [indices], 'unknown_overrides': [{'index', 'address'}]}}``)
    and ``errors`` (problems found while computing; ``plan_problems`` reports them too).
    The device dicts have exactly the keys of the ``npu_network`` module's ``devices`` option.
    """
    _require_netaddr()
    errors = []
    if not isinstance(nodes, list) or not all(isinstance(node, dict) and node.get("host") for node in nodes):
        raise PlanError("npu_ip_plan expects a list of {'host': name, 'devices': [...], 'addresses': {...}}")
    by_host = {}
    for node in nodes:
        by_host[str(node["host"])] = node
    order = [str(host) for host in (hosts or [])]
    order += [host for host in by_host if host not in order]

    net = _network(cidr, errors)
    gateway = (str(gateway).strip() or None) if gateway not in (None, "") else None
    netdetect = (str(netdetect).strip() or None) if netdetect not in (None, "") else None

    devices = {}
    overrides = {}
    for host in order:
        node = by_host.get(host) or {"host": host}
        devices[host] = _host_devices(node, errors)
        overrides[host] = _overrides(node, errors)
    slots = max([max(indices) + 1 for indices in devices.values() if indices] or [1])

    stride_given = _as_index(stride) or 0
    offset_given = offset if isinstance(offset, int) and not isinstance(offset, bool) else _as_index(offset)
    if offset_given is None:
        offset_given = -1
    layout, use_stride, use_offset = "packed", stride_given or slots, offset_given
    first = last = None
    if net is not None:
        first, last = usable_range(net)
        auto = stride_given == 0 and offset_given < 0
        if auto and (len(order) + 1) * ROW <= net.size and slots <= ROW - 2:
            layout, use_stride, use_offset = "rows", ROW, ROW + 1
        elif use_offset < 0:
            use_offset = first - int(net.network)
        if not auto:
            layout = "custom"

    plan_hosts = {}
    for position, host in enumerate(order):
        planned = []
        for index in devices[host]:
            if index in overrides[host]:
                address = overrides[host][index]
            elif net is None:
                address = None
            else:
                address = _address_text(int(net.network) + use_offset + position * use_stride + index)
            planned.append({"index": index, "address": address, "netmask": None if net is None else str(net.netmask),
                            "gateway": gateway, "netdetect": None})
        plan_hosts[host] = {
            "position": position,
            "devices": planned,
            "overrides": sorted(index for index in overrides[host] if index in devices[host]),
            "unknown_overrides": [{"index": index, "address": address} for index, address in sorted(overrides[host].items())
                                  if index not in devices[host] and by_host.get(host) is not None],
        }

    _fill_netdetect(plan_hosts, order, netdetect, gateway)
    return {
        "cidr": None if net is None else str(net),
        "network": None if net is None else str(net.network),
        "netmask": None if net is None else str(net.netmask),
        "prefixlen": None if net is None else net.prefixlen,
        "usable": 0 if net is None else last - first + 1,
        "layout": layout,
        "stride": use_stride,
        "offset": use_offset,
        "explicit_stride": stride_given > 0,
        "gateway": gateway,
        "netdetect": netdetect,
        "order": order,
        "hosts": plan_hosts,
        "errors": errors,
    }


def _fill_netdetect(plan_hosts, order, netdetect, gateway):
    if netdetect is None:
        return
    for position, host in enumerate(order):
        for device in plan_hosts[host]["devices"]:
            if netdetect == "gateway":
                device["netdetect"] = gateway
            elif netdetect == "peer":
                device["netdetect"] = _next_peer_address(plan_hosts, order, position, device["index"])
            else:
                device["netdetect"] = netdetect


def _next_peer_address(plan_hosts, order, position, index):
    for step in range(1, len(order)):
        peer = plan_hosts[order[(position + step) % len(order)]]
        for device in peer["devices"]:
            if device["index"] == index and device["address"]:
                return device["address"]
    return None


def _where(host, index):
    return "%s device %d" % (host, index)


def _devices(plan):
    for host in plan["order"]:
        for device in plan["hosts"][host]["devices"]:
            yield host, device


def plan_problems(plan, interfaces=None):
    """Every problem of ``plan``, as messages naming host, device and address.

    ``interfaces``: ``{host: [IPv4 address of a host interface, ...]}`` (plain
    addresses or ``address/prefix``); a planned device address equal to any of
    them, on any host, is a collision.

    Checks: the plan's own errors, the CIDR's capacity, a stride smaller than
    a host's device slots, overrides naming devices a host does not have,
    addresses that are not IPv4, outside the CIDR or its network/broadcast
    address, two devices with one address, the gateway (IPv4, inside the
    CIDR, not a device's address) and the netdetect setting.
    """
    _require_netaddr()
    problems = list(plan.get("errors") or [])
    cidr = plan.get("cidr")
    net = netaddr.IPNetwork(cidr) if cidr else None
    all_devices = list(_devices(plan))

    if net is not None and len(all_devices) > plan["usable"]:
        problems.append(
            "%d NPU devices need %d addresses, but %s holds only %d usable address(es): use a larger npu_network_cidr"
            % (len(all_devices), len(all_devices), cidr, plan["usable"]))
    if plan.get("explicit_stride"):
        for host in plan["order"]:
            indices = [device["index"] for device in plan["hosts"][host]["devices"]]
            if indices and max(indices) + 1 > plan["stride"]:
                problems.append("host %s has device indices up to %d, more than the stride of %d addresses per host: "
                                "raise prepare_npu_network_stride" % (host, max(indices), plan["stride"]))
    for host in plan["order"]:
        for item in plan["hosts"][host].get("unknown_overrides") or []:
            have = [device["index"] for device in plan["hosts"][host]["devices"]]
            problems.append("%s: npu_network_addresses sets device %s to %s, but the host has no such device (devices: %s)"
                            % (host, item["index"], item["address"], _ranges(have) or "none"))

    first, last = usable_range(net) if net is not None else (None, None)
    owners = {}
    for host, device in all_devices:
        where = _where(host, device["index"])
        source = " (npu_network_addresses)" if device["index"] in plan["hosts"][host]["overrides"] else ""
        if net is None:
            continue
        if device["address"] is None:
            problems.append("%s: no address left: the layout runs past the end of the IPv4 space" % where)
            continue
        address = _ip(device["address"])
        if address is None:
            problems.append("%s: %r is not an IPv4 address%s" % (where, device["address"], source))
            continue
        problems.extend(_range_problems(where, str(address), int(address), net, first, last, source))
        owners.setdefault(str(address), []).append(where)

    for address, where in owners.items():
        if len(where) > 1:
            problems.append("%s is planned for %d devices: %s" % (address, len(where), ", ".join(where)))

    problems.extend(_gateway_problems(plan, net, first, last, owners))
    problems.extend(_interface_problems(owners, interfaces or {}))
    return problems


def _range_problems(where, text, value, net, first, last, source):
    if value < int(net.network) or value > int(net.network) + net.size - 1:
        return ["%s: %s is outside %s%s" % (where, text, net, source)]
    if value < first and net.prefixlen < 31:
        return ["%s: %s is the network address of %s%s" % (where, text, net, source)]
    if value > last and net.prefixlen < 31:
        return ["%s: %s is the broadcast address of %s%s" % (where, text, net, source)]
    return []


def _gateway_problems(plan, net, first, last, owners):
    problems = []
    gateway = plan.get("gateway")
    if gateway is not None:
        address = _ip(gateway)
        if address is None:
            problems.append("npu_network_gateway %r is not an IPv4 address" % gateway)
        elif net is not None:
            problems.extend(_range_problems("npu_network_gateway", str(address), int(address), net, first, last, ""))
            if str(address) in owners:
                problems.append("npu_network_gateway %s is also planned for %s" % (address, ", ".join(owners[str(address)])))
    netdetect = plan.get("netdetect")
    if netdetect is not None:
        if netdetect == "gateway" and gateway is None:
            problems.append("npu_network_netdetect is 'gateway' but no npu_network_gateway is set")
        elif netdetect not in NETDETECT_KEYWORDS and _ip(netdetect) is None:
            problems.append("npu_network_netdetect %r is not an IPv4 address, 'gateway' or 'peer'" % netdetect)
    return problems


def _interface_problems(owners, interfaces):
    used = {}
    for host in sorted(interfaces):
        for item in interfaces[host] or []:
            address = _ip(str(item).split("/", maxsplit=1)[0].strip())
            if address is not None:
                used.setdefault(str(address), []).append(host)
    problems = []
    for address, where in owners.items():
        if address in used:
            problems.append("%s: %s is already an address of a host interface on %s"
                            % (", ".join(where), address, ", ".join(sorted(set(used[address])))))
    return problems


# ---------------------------------------------------------------------------
# Mesh gate
# ---------------------------------------------------------------------------

def ping_targets(plan, host, hosts=None, all_pairs=False):
    """What each device of ``host`` pings: its same-index peer on every other host (or every device).

    ``hosts`` limits the peers to the hosts of the play (default: every host
    of the plan). Returns ``[{'device', 'address', 'peer', 'peer_device'}]``,
    the ``ping`` option of ``npu_network_info``.
    """
    peers = [peer for peer in (hosts or plan["order"]) if peer != host and peer in plan["hosts"]]
    targets = []
    for device in plan["hosts"].get(host, {}).get("devices", []):
        for peer in peers:
            for other in plan["hosts"][peer]["devices"]:
                if other["address"] and (all_pairs or other["index"] == device["index"]):
                    targets.append({"device": device["index"], "address": other["address"], "peer": peer,
                                    "peer_device": other["index"]})
    return targets


def _ranges(indices):
    """'0-3, 5' for [0, 1, 2, 3, 5]."""
    parts = []
    for index in sorted(indices):
        if parts and index == parts[-1][1] + 1:
            parts[-1][1] = index
        else:
            parts.append([index, index])
    return ", ".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in parts)


def _show(value):
    return "(absent)" if value is None else str(value)


def evaluate_gate(plan, results, settings=None):
    """The verdict of the NPU network checks over the cluster; every failure is collected.

    ``results``: ``{host: {'config': <npu_network result or None>, 'facts':
    <npu_network_info result or None>}}`` for the hosts of the play (or a
    list of such dicts with a ``host`` key).
    ``settings``: ``enforce_tls`` (bool), ``tls`` (0/1), ``verify_only``
    (differences from the plan are failures; the plan was not applied),
    ``pending_ok`` (check mode: differences from the plan are expected),
    ``max_loss_pct`` (a pair that loses more of its pings fails; default 0), ``qos_check`` (default true:
    the PFC priorities of the devices agree and include ``rdma_sl``, the HCCL_RDMA_SL the engine gets;
    empty or None is CANN's default, 4).

    Returns ``{'ok', 'failures', 'devices', 'matrix', 'summary', 'pending'}``;
    ``pending`` lists the hosts whose configure step reported changes.
    """
    settings = settings or {}
    if isinstance(results, list):
        results = dict((item["host"], item) for item in results)
    max_loss = float(settings.get("max_loss_pct") or 0)
    failures = []
    rows = []
    matrix = []
    hosts = [host for host in plan["order"] if host in results]
    planned = dict((host, dict((d["index"], d) for d in plan["hosts"][host]["devices"])) for host in hosts)

    _missing_peer_devices(planned, failures)
    for host in hosts:
        config = results[host].get("config") or {}
        facts = results[host].get("facts")
        _config_failures(host, config, settings, failures)
        if not facts:
            failures.append("%s: no NPU network facts were read (the check did not run there)" % host)
            continue
        live = dict((entry["index"], entry) for entry in facts.get("devices") or [])
        for index, want in sorted(planned[host].items()):
            entry = live.get(index)
            if entry is None:
                failures.append("%s: the device was not queried" % _where(host, index))
                continue
            rows.append(_device_row(host, want, entry, dict(settings, has_config=bool(config)), failures))
        for ping in facts.get("pings") or []:
            matrix.append(_matrix_row(host, planned, ping, failures, max_loss))

    _duplicate_failures(rows, failures)
    _tls_failures(rows, settings, failures)
    if settings.get("qos_check", True):
        _pfc_failures(rows, settings, failures)
    pairs_ok = len([row for row in matrix if row["reachable"]])
    summary = {"hosts": len(hosts), "devices": len(rows), "pairs": len(matrix), "reachable": pairs_ok,
               "lossy": len([row for row in matrix if row["lossy"]]), "max_loss_pct": max_loss,
               "all_pairs": bool(settings.get("all_pairs"))}
    pending = [host for host in hosts if (results[host].get("config") or {}).get("changed")]
    return {"ok": not failures, "failures": failures, "devices": rows, "matrix": matrix, "summary": summary,
            "pending": pending}


def _missing_peer_devices(planned, failures):
    indices = sorted(set(index for devices in planned.values() for index in devices))
    for index in indices:
        have = [host for host in planned if index in planned[host]]
        lack = [host for host in planned if index not in planned[host]]
        if have and lack:
            failures.append("device %d exists on %s but not on %s: it has no same-index peer there"
                            % (index, ", ".join(have), ", ".join(lack)))


def _config_failures(host, config, settings, failures):
    for item in config.get("conf_mismatches") or []:
        failures.append("%s: %s has %s_%d=%s but the device has %s %s" % (
            _where(host, item["device"]), config.get("hccn_conf") or "/etc/hccn.conf", item["conf_key"],
            item["device"], _show(item["file"]), item["key"], _show(item["live"])))
    if not settings.get("verify_only"):
        return
    for device in config.get("devices") or []:
        where = _where(host, device["index"])
        before, planned = device["before"], device["planned"]
        changes = list(device.get("changes") or [])
        if "address" in changes and before.get("address") is None:
            failures.append("%s has no address (the plan says %s)" % (where, planned["address"]))
            changes = [key for key in changes if key not in ("address", "netmask")]
        elif "address" in changes:
            failures.append("%s has address %s, the plan says %s" % (where, before["address"], planned["address"]))
            changes.remove("address")
        for key in changes:
            failures.append("%s: %s is %s, the plan says %s" % (
                where, key, "(unset)" if before.get(key) is None else before[key], _show(planned.get(key))))


def _device_row(host, want, entry, settings, failures):
    where = "%s (%s)" % (_where(host, want["index"]), want["address"])
    row = {"host": host, "device": want["index"], "planned": want["address"], "address": entry.get("address"),
           "netmask": entry.get("netmask"), "link": entry.get("link"), "net_health": entry.get("net_health"),
           "netdetect": entry.get("netdetect"), "tls": entry.get("tls"), "pfc": entry.get("pfc"),
           "errors": list(entry.get("errors") or [])}
    for error in row["errors"]:
        failures.append("%s: %s" % (where, error))
    if row["link"] is not None and row["link"] != "UP":
        failures.append("%s: link status %s" % (where, row["link"]))
    if row["netdetect"] and row["net_health"] is not None and row["net_health"] != "Success":
        failures.append("%s: net health status %s (netdetect address %s)" % (where, row["net_health"], row["netdetect"]))
    # Differences from the plan come from the configure step when it ran (it
    # names every key); this is the fallback when only the facts are there.
    if not settings.get("has_config") and row["address"] != want["address"] and not settings.get("pending_ok"):
        if row["address"] is None:
            failures.append("%s has no address (the plan says %s)" % (_where(host, want["index"]), want["address"]))
        else:
            failures.append("%s has address %s, the plan says %s"
                            % (_where(host, want["index"]), row["address"], want["address"]))
    return row


def _loss(ping):
    """Loss in percent of a ping result: the tool's figure, else from the packet counts."""
    if ping.get("loss_pct") is not None:
        return float(ping["loss_pct"])
    sent, received = ping.get("transmitted"), ping.get("received")
    if sent:
        return round(100.0 * (sent - (received or 0)) / sent, 2)
    return None


def _matrix_row(host, planned, ping, failures, max_loss=0.0):
    """One ping of the mesh; a pair is unhealthy when it gets no reply or loses more than ``max_loss`` percent."""
    peer = ping.get("peer")
    peer_device = ping.get("peer_device")
    own = planned[host].get(ping["device"], {}).get("address")
    loss = _loss(ping)
    row = {"host": host, "device": ping["device"], "address": own, "peer": peer, "peer_device": peer_device,
           "peer_address": ping["address"], "reachable": bool(ping.get("reachable")), "rtt_ms": ping.get("rtt_ms"),
           "loss_pct": loss, "transmitted": ping.get("transmitted"), "received": ping.get("received"),
           "error": ping.get("error")}
    row["lossy"] = row["reachable"] and loss is not None and loss > max_loss
    target = "%s device %s (%s)" % (peer, peer_device, ping["address"]) if peer else ping["address"]
    if not row["reachable"]:
        reason = row["error"] or "no reply"
        failures.append("%s (%s) cannot reach %s: %s" % (_where(host, ping["device"]), own, target, reason))
    elif row["lossy"]:
        counts = ""
        if row["transmitted"] is not None and row["received"] is not None:
            counts = " (%s sent, %s received)" % (row["transmitted"], row["received"])
        where = _where(host, ping["device"])
        failures.append("%s (%s) loses %s%% of its pings to %s%s, more than prepare_npu_ping_max_loss_pct %s: "
                        "check the link and the optics" % (where, own, _pct(loss), target, counts, _pct(max_loss)))
    return row


def _pct(value):
    """33.33 -> '33.33', 0.0 -> '0', 5.5 -> '5.5'."""
    return ("%.2f" % value).rstrip("0").rstrip(".")


def _duplicate_failures(rows, failures):
    owners = {}
    for row in rows:
        if row["address"]:
            owners.setdefault(row["address"], []).append(_where(row["host"], row["device"]))
    for address, where in sorted(owners.items()):
        if len(where) > 1:
            failures.append("%s is configured on %d devices: %s" % (address, len(where), ", ".join(where)))


def _tls_failures(rows, settings, failures):
    known = [row for row in rows if row["tls"] is not None]
    if settings.get("enforce_tls"):
        want = int(settings.get("tls") or 0)
        for row in known:
            if row["tls"] != want and not settings.get("pending_ok"):
                failures.append("%s: TLS switch is %d, expected %d" % (_where(row["host"], row["device"]), row["tls"], want))
        return
    values = sorted(set(row["tls"] for row in known))
    if len(values) > 1:
        parts = []
        for value in values:
            where = []
            for host in _unique(row["host"] for row in known):
                indices = [row["device"] for row in known if row["host"] == host and row["tls"] == value]
                if indices:
                    where.append("%s %s %s" % (host, "device" if len(indices) == 1 else "devices", _ranges(indices)))
            parts.append("%d on %s" % (value, ", ".join(where)))
        failures.append("the TLS switch differs between devices (HCCL refuses links between them): %s; "
                        "set prepare_npu_network_enforce_tls: true to align them" % "; ".join(parts))


def _priorities(values):
    return "none" if not values else "priority " + ", ".join(str(value) for value in values)


def _pfc_failures(rows, settings, failures):
    """RoCE QoS: the PFC priorities of every device that could be read agree, and include HCCL_RDMA_SL.

    HCCL marks its RDMA traffic with service level ``HCCL_RDMA_SL`` (CANN's default 4), which "must be the same
    as the PFC priority set for the NIC"; NPUs and switches must agree on PFC (queue 4 recommended). The most
    common setting is taken as the cluster's; each device that differs is named with its value.
    """
    known = [row for row in rows if row.get("pfc") is not None]
    if not known:
        return
    counts = {}
    for row in known:
        key = tuple(row["pfc"])
        counts[key] = counts.get(key, 0) + 1
    common = sorted(counts.items(), key=lambda item: (-item[1], 4 not in item[0], item[0]))[0][0]
    for row in known:
        if tuple(row["pfc"]) != common:
            failures.append("%s: PFC enabled on %s, the other %d devices on %s: NPUs and switches must agree on the "
                            "lossless queue (hccn_tool -i %d -pfc -s, then the switch port)" % (
                                _where(row["host"], row["device"]), _priorities(row["pfc"]), counts[common],
                                _priorities(common), row["device"]))
    sl = settings.get("rdma_sl")
    sl = 4 if sl in (None, "") else int(sl)
    if common and sl not in common:
        failures.append("HCCL_RDMA_SL is %d%s but PFC is enabled on %s of the NPUs: HCCL's RDMA traffic would not be "
                        "lossless; set HCCL_RDMA_SL to the PFC priority (prepare_env_extra) or enable PFC on %d"
                        % (sl, " (CANN's default)" if settings.get("rdma_sl") in (None, "") else "",
                           _priorities(common), sl))


def _unique(items):
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def gate_table(report):
    """Render a gate report as a fixed-width table: one row per (host, device), one column per peer host."""
    rows = report.get("devices") or []
    peers = _unique(row["host"] for row in rows)
    cells = {}
    for entry in report.get("matrix") or []:
        key = (entry["host"], entry["device"], entry["peer"])
        done, total, worst = cells.get(key, (0, 0, 0.0))
        loss = entry.get("loss_pct") if entry["reachable"] else None
        cells[key] = (done + (1 if entry["reachable"] else 0), total + 1, max(worst, loss or 0.0))
    columns = [("host", max([4] + [len(h) for h in peers])), ("dev", 3), ("address", 15), ("link", 4),
               ("health", 8), ("tls", 3)] + [("->" + peer, max(6, len(peer) + 2)) for peer in peers]
    lines = []
    summary = report.get("summary") or {}
    lines.append("NPU network: %d device(s) on %d node(s); %d/%d pings answered, %d with loss above %s%% (%s); %s" % (
        summary.get("devices", 0), summary.get("hosts", 0), summary.get("reachable", 0), summary.get("pairs", 0),
        summary.get("lossy", 0), _pct(summary.get("max_loss_pct") or 0.0),
        "all pairs" if summary.get("all_pairs") else "same-index peers",
        "OK" if report.get("ok") else "FAILED (%d problem(s))" % len(report.get("failures") or [])))
    lines.append("  ".join(name.ljust(width) for name, width in columns))
    for row in rows:
        values = [row["host"], row["device"], row["address"] or "-", row["link"] or "?", row["net_health"] or "?",
                  "?" if row["tls"] is None else row["tls"]]
        for peer in peers:
            done, total, worst = cells.get((row["host"], row["device"], peer), (0, 0, 0.0))
            if peer == row["host"] or total == 0:
                values.append("-")
            elif done < total:
                values.append("FAIL" if total == 1 else "%d/%d" % (done, total))
            elif worst > 0:
                # The worst loss of the pings in this cell, e.g. "33.33%" (a failure above the limit).
                values.append("%s%%" % _pct(worst))
            else:
                values.append("ok")
        lines.append("  ".join(str(value).ljust(width) for value, (_name, width) in zip(values, columns)).rstrip())
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# MindIE rank table
# ---------------------------------------------------------------------------

def rank_table(plan, server_ids, hosts=None):
    """``rank_table_file.json`` content (vendor-tools section 5.3) as a dict.

    Servers in plan order (the first one is the master), only hosts with
    devices; ``rank_id`` runs node by node, then device by device; every value
    is a string. ``server_ids``: ``{host: node IP}`` (also used as
    ``container_ip``). ``hosts`` limits the table to these hosts.
    """
    servers = []
    rank = 0
    for host in plan["order"]:
        if hosts is not None and host not in hosts:
            continue
        devices = plan["hosts"][host]["devices"]
        if not devices:
            continue
        server_id = (server_ids or {}).get(host)
        if not server_id:
            raise PlanError("no server address for %s in the rank table" % host)
        entries = []
        for device in sorted(devices, key=lambda d: d["index"]):
            entries.append({"device_id": str(device["index"]), "device_ip": str(device["address"]),
                            "rank_id": str(rank)})
            rank += 1
        servers.append({"device": entries, "server_id": str(server_id), "container_ip": str(server_id)})
    return {"server_count": str(len(servers)), "server_list": servers, "status": "completed", "version": "1.0"}
