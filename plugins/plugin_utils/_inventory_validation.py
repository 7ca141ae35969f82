# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Checks of an inventory and its variables, run on the controller before any host is touched.

``validate(spec)`` returns every problem at once, as messages that name the
variable, the offending value and the fix. It is a pure function so the
action plugin, the tests and anyone else see the same verdicts.
"""

from __future__ import annotations

import posixpath
import re

try:
    import netaddr
except ImportError:  # pragma: no cover - reported by the action plugin
    netaddr = None

BACKEND_TYPES = ("MindFormers", "Native")
MODEL_TYPES = ("safetensors", "ckpt")
INTERFACE_AUTO = "auto"
PORT_EXAMPLES = {"ray_port": 6379, "llm_port": 8000, "dp_port": 12570}
_IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
_CONTAINER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_IMAGE_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def _show(value):
    """Render a value the way the operator wrote it, with its type when it surprises."""
    if isinstance(value, str):
        return "'%s'" % value
    for kind, word in ((bool, "boolean"), (int, "integer"), (float, "number"), (list, "list"), (dict, "mapping")):
        if isinstance(value, kind):
            return "%s (%s)" % (value, word)
    return "%s (%s)" % (value, "null" if value is None else type(value).__name__)


def _as_int(value):
    """Return value as int when it is an integer or a string of digits, else None (bools are not ints)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _check_groups(spec, errors):
    groups = spec.get("groups") or {}
    head_group = spec["head_group"]
    worker_group = spec["worker_group"]
    heads = list(groups.get(head_group) or [])
    workers = list(groups.get(worker_group) or [])
    if len(heads) != 1:
        errors.append(
            "group '%s' has %d hosts (%s): exactly one host must be in '%s' (the Ray head and API endpoint); "
            "move the others to '%s'." % (head_group, len(heads), ", ".join(heads) or "none", head_group, worker_group)
        )
    both = sorted(set(heads) & set(workers))
    if both:
        errors.append(
            "host(s) %s are in both '%s' and '%s': a node is either the head or a worker; remove them from one group."
            % (", ".join(both), head_group, worker_group)
        )
    members = heads + [w for w in workers if w not in heads]
    return members


def _check_node_num(spec, members, errors):
    raw = spec.get("node_num")
    node_num = _as_int(raw)
    if node_num is None or node_num < 1:
        errors.append("node_num = %s: must be a positive integer; set node_num: %d (the number of hosts in the inventory)."
                      % (_show(raw), len(members)))
    elif node_num != len(members):
        errors.append(
            "node_num = %d but the inventory has %d host(s) (%s): set node_num: %d or add/remove hosts."
            % (node_num, len(members), ", ".join(members) or "none", len(members))
        )


def _check_ports(spec, errors):
    seen = {}
    for name, raw in sorted((spec.get("ports") or {}).items()):
        port = _as_int(raw)
        if port is None or not 1 <= port <= 65535:
            errors.append("%s = %s: a port must be an integer between 1 and 65535; e.g. %s: %s."
                          % (name, _show(raw), name, PORT_EXAMPLES.get(name, 8000)))
            continue
        if port in seen:
            errors.append("%s = %d clashes with %s = %d: every service needs its own port; change one of them."
                          % (name, port, seen[port], port))
        else:
            seen[port] = name


def _check_choices(spec, errors):
    for name, choices in (("backend_type", BACKEND_TYPES), ("model_type", MODEL_TYPES)):
        value = spec.get(name)
        if value not in choices:
            errors.append("%s = %s is not supported: choose one of %s." % (name, _show(value), ", ".join(choices)))


def _check_model_path(spec, errors):
    value = spec.get("model_path")
    if not isinstance(value, str) or not value:
        errors.append("model_path = %s: set model_path to the absolute directory of the weights, "
                      "the same on every node (e.g. /data/models/DeepSeek-R1)." % _show(value))
        return
    if not posixpath.isabs(value):
        errors.append("model_path = '%s' is relative: use an absolute path such as /%s (the same path on every node)."
                      % (value, value.lstrip("./")))
    elif posixpath.normpath(value) == "/":
        errors.append("model_path = '/' is the root directory: point it at the model's own directory.")
    elif ".." in value.split("/"):
        errors.append("model_path = '%s' contains '..': write the normalised path %s."
                      % (value, posixpath.normpath(value)))


def _check_interfaces(spec, members, errors):
    var = spec.get("interface_var", "ray_device")
    interfaces = spec.get("interfaces") or {}
    missing = [h for h in members if interfaces.get(h) in (None, "")]
    if missing:
        errors.append(
            "%s is not set for %s: set %s in the inventory's vars (one name for all nodes), per host in host_vars "
            "when names differ, or %s: %s to use the interface that routes to the head."
            % (var, ", ".join(missing), var, var, INTERFACE_AUTO)
        )
    for host in members:
        value = interfaces.get(host)
        if value in (None, ""):
            continue
        if not isinstance(value, str) or not _IFNAME_RE.match(value):
            errors.append("%s = %s on host %s is not a network interface name (1-15 characters, no spaces or '/'); "
                          "use the name 'ip -br link' shows, e.g. enp67s0f0np0." % (var, _show(value), host))


def _check_cidrs(spec, errors):
    for name, raw in sorted((spec.get("cidrs") or {}).items()):
        values = raw if isinstance(raw, list) else [raw]
        for value in values:
            if netaddr is None:
                raise RuntimeError("the netaddr Python package is required on the controller (pip install netaddr)")
            try:
                if not isinstance(value, str) or "/" not in value:
                    raise ValueError("no prefix length")
                net = netaddr.IPNetwork(value)
            except (ValueError, netaddr.AddrFormatError, TypeError):
                errors.append("%s = %s is not a CIDR: write it as address/prefix, e.g. 10.10.0.0/16." % (name, _show(value)))
                continue
            if net.ip != net.network:
                errors.append("%s = '%s' has host bits set: did you mean %s?" % (name, value, net.cidr))


def _check_booleans(spec, errors):
    for name, value in sorted((spec.get("booleans") or {}).items()):
        if not isinstance(value, bool):
            errors.append("%s = %s must be a YAML boolean: write %s: true or %s: false (no quotes)."
                          % (name, _show(value), name, name))
    for name, value in sorted((spec.get("flags") or {}).items()):
        if isinstance(value, bool) or _as_int(value) in (0, 1):
            continue
        errors.append("%s = %s must be 0 or 1 (or false/true)." % (name, _show(value)))


def _check_addresses(spec, members, errors):
    owners = {}
    for host in members:
        address = (spec.get("addresses") or {}).get(host) or host
        owners.setdefault(address, []).append(host)
    for address, hosts in sorted(owners.items()):
        if len(hosts) > 1:
            errors.append("hosts %s all have ansible_host = '%s': each node needs its own address; fix ansible_host."
                          % (", ".join(hosts), address))


def _check_container(spec, errors):
    for name, regex, example in (("container_name", _CONTAINER_NAME_RE, "openeuler_ds"),
                                 ("image_tag", _IMAGE_TAG_RE, "20250717")):
        value = (spec.get("container") or {}).get(name)
        if value is None:
            continue
        if not regex.match(str(value)):
            errors.append("%s = %s is not a valid %s: use letters, digits, '_', '.', '-' (e.g. %s)."
                          % (name, _show(value), name.replace("_", " "), example))
    image = (spec.get("container") or {}).get("image_name")
    if image is not None and (not isinstance(image, str) or not image or " " in image or ":" in image.rsplit("/", 1)[-1]):
        errors.append("image_name = %s: give the repository without a tag (the tag goes in image_tag), "
                      "e.g. hub.oepkgs.net/oedeploy/openeuler/aarch64/mindspore." % _show(image))


def validate(spec):
    """Return the list of every problem found in ``spec`` (empty when the inventory is good).

    ``spec`` keys: head_group, worker_group, groups {name: [hosts]}, node_num,
    ports {var: value}, backend_type, model_type, model_path, interface_var,
    interfaces {host: value}, cidrs {var: value or [values]}, booleans {var: value},
    flags {var: 0/1 value}, addresses {host: ansible_host}, container {var: value}.
    """
    errors = []
    members = _check_groups(spec, errors)
    _check_node_num(spec, members, errors)
    _check_ports(spec, errors)
    _check_choices(spec, errors)
    _check_model_path(spec, errors)
    _check_interfaces(spec, members, errors)
    _check_cidrs(spec, errors)
    _check_booleans(spec, errors)
    _check_addresses(spec, members, errors)
    _check_container(spec, errors)
    return errors
