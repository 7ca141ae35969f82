# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Checks of an inventory and its variables, run on the controller before any host is touched.

``verdict(spec)`` returns every problem at once, as messages that name the
variable, the offending value and the fix, split into errors (the run stops)
and warnings (the run goes on unless strict). ``validate(spec)`` returns the
errors only. Both are pure functions so the action plugin, the tests and
anyone else see the same verdicts.

Nothing here raises: an inventory is hostile input. Every check runs on its
own; a check that meets a value it cannot read reports that value (and its
variable) as an error, and the other checks still run.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import posixpath
import re
import shlex
import os
import unicodedata

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _monitoring

BACKEND_TYPES = ("MindFormers", "Native")
MODEL_TYPES = ("safetensors", "ckpt")
INTERFACE_AUTO = "auto"
PORT_EXAMPLES = {"ray_port": 6379, "llm_port": 8000, "dp_port": 12570}
# Ansible's group names: letters, digits and underscores, not starting with a digit.
_GROUP_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_IFNAME_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}", re.ASCII)
_CONTAINER_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", re.ASCII)
IMAGE_TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", re.ASCII)
# Docker's reference grammar: an optional registry host[:port], then lowercase path components.
_IMAGE_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_NAME_RE = re.compile(r"(?:[A-Za-z0-9.-]+(?::[0-9]{1,5})?/)?%s(?:/%s)*" % (_IMAGE_COMPONENT, _IMAGE_COMPONENT),
                           re.ASCII)
_DIGITS_RE = re.compile(r"[0-9]{1,18}", re.ASCII)
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
# useradd's default NAME_REGEX, at most 32 characters.
_USER_NAME_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}", re.ASCII)
_SHOW_LIMIT = 80
# The connection variables whose text goes to ssh as arguments.
SSH_ARG_VARS = ("ansible_ssh_common_args", "ansible_ssh_args", "ansible_ssh_extra_args", "ansible_scp_extra_args",
                "ansible_sftp_extra_args")
_SSH_OPTION_RE = re.compile(r"\s*([A-Za-z]+)\s*(?:=\s*|\s+)(.*?)\s*", re.ASCII)


def host_key_checking_off(value):
    """The ssh options in ``value`` (one variable's text) that switch host key checking off.

    ``StrictHostKeyChecking=no`` (or ``off``) accepts any key, also a changed one; ``UserKnownHostsFile=/dev/null``
    forgets every key it learns. ``accept-new`` still refuses a changed key and is not reported. Returns them as
    ``Name=value`` strings, in order; [] for anything that is not a string ssh could read.
    """
    if not isinstance(value, str):
        return []
    try:
        words = shlex.split(value)
    except ValueError:
        words = value.split()
    found = []
    for index, word in enumerate(words):
        if word == "-o" and index + 1 < len(words):
            option = words[index + 1]
        elif word.startswith("-o") and len(word) > 2:
            option = word[2:]
        else:
            continue
        match = _SSH_OPTION_RE.fullmatch(option.strip("\"'"))
        if not match:
            continue
        name, setting = match.group(1).lower(), match.group(2).strip("\"'")
        if name == "stricthostkeychecking" and setting.lower() in ("no", "off"):
            found.append("StrictHostKeyChecking=%s" % setting)
        elif name == "userknownhostsfile" and "/dev/null" in setting.split():
            found.append("UserKnownHostsFile=%s" % setting)
    return found


# --- Showing values -------------------------------------------------------------------------------------------


def _char(c):
    """One character as the message shows it: printable as is, the rest escaped (\\n, \\x1b, \\u202e)."""
    if c == " " or (c.isprintable() and not c.isspace()):
        return c
    code = ord(c)
    if c == "\n":
        return "\\n"
    if c == "\t":
        return "\\t"
    if c == "\r":
        return "\\r"
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code if code < 0x10000 else "\\U%08x" % code


def _show_str(value):
    text = "".join(_char(c) for c in value[:_SHOW_LIMIT])
    if len(value) > _SHOW_LIMIT:
        text += "... (%d characters)" % len(value)
    return "'%s'" % text


def _show_int(value):
    if value.bit_length() > 64:
        digits = int(math.log10(abs(value)))
        if 10 ** digits > abs(value):
            digits -= 1
        elif 10 ** (digits + 1) <= abs(value):
            digits += 1
        return "an integer of %d digits" % (digits + 1)
    return "%d" % value


def _show(value):
    """Render a value the way the operator wrote it, with its type when it surprises. Never raises."""
    try:
        if isinstance(value, str):
            return _show_str(value)
        if isinstance(value, bool):
            return "%s (boolean)" % value
        if isinstance(value, int):
            shown = _show_int(value)
            return shown if shown.startswith("an integer") else "%s (integer)" % shown
        if isinstance(value, float):
            return "%r (number)" % value
        if isinstance(value, (list, tuple)):
            return "a list of %d item(s)" % len(value) if len(value) > 3 else "%s (list)" % _brief(value)
        if isinstance(value, dict):
            return "a mapping of %d key(s)" % len(value) if len(value) > 3 else "%s (mapping)" % _brief(value)
        if value is None:
            return "None (null)"
        return "a value of type %s" % type(value).__name__
    except Exception:  # pylint: disable=broad-except
        return "a value of type %s" % type(value).__name__


def _brief(value):
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s: %s" % (_brief(k), _brief(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "[%s]" % ", ".join(_brief(v) for v in value)
    if isinstance(value, str):
        return _show_str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return _show_int(value)
    if isinstance(value, (bool, float)) or value is None:
        return repr(value)
    return type(value).__name__


# --- Reading values -------------------------------------------------------------------------------------------


def _as_int(value):
    """Return value as int when it is an integer or a string of ASCII digits only (at most 18), else None.

    Booleans are not integers; '²' and other Unicode digits are not digits here, and
    neither is a number too long to be a port or a node count.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value.bit_length() <= 60 else None
    if isinstance(value, str) and _DIGITS_RE.fullmatch(value):
        return int(value)
    return None


def _bad_chars(value):
    """Names of the characters that cannot appear in a name or path: control characters and whitespace."""
    found = []
    for c in value:
        if c.isspace() or unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            word = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", " ": "a space"}.get(
                c, "the character %s" % _char(c) if not c.isspace() else "the space character %s" % _char(c))
            if word not in found:
                found.append(word)
    return found


def _label(value):
    """A variable or group name for a message (inventories may use other types as names)."""
    return value if isinstance(value, str) else _brief(value)


def _items(spec, key):
    """The (name, value) pairs of a mapping in spec, names as strings, sorted; [] when it is no mapping."""
    return sorted(((_label(k), v) for k, v in _dict(spec, key).items()), key=lambda kv: kv[0])


def _dict(spec, key):
    value = spec.get(key)
    return value if isinstance(value, dict) else {}


def _names(value):
    """A group's members as a list of strings (anything else is reported by the caller)."""
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


# --- Checks ---------------------------------------------------------------------------------------------------


def _check_group_names(spec, errors):
    """The two group names are group names, and two different ones; False when they are not."""
    ok = True
    for key, variable, example in (("head_group", "llm_cluster_head_group", "masters"),
                                   ("worker_group", "llm_cluster_worker_group", "workers")):
        value = spec.get(key, example)
        if not isinstance(value, str) or not _GROUP_NAME_RE.fullmatch(value):
            errors.append("%s (or a role's own *_%s) = %s: must be the name of an inventory group (letters, digits "
                          "and _, not starting with a digit); set %s: %s" % (variable, key, _brief(value), variable, example))
            ok = False
    if ok and spec.get("head_group", "masters") == spec.get("worker_group", "workers"):
        errors.append("llm_cluster_head_group and llm_cluster_worker_group are both '%s': the head and the workers are "
                      "two groups; set llm_cluster_head_group: masters and llm_cluster_worker_group: workers"
                      % spec.get("head_group", "masters"))
        ok = False
    return ok


def _check_groups(spec, errors, warnings):
    if not _check_group_names(spec, errors):
        return None
    groups = _dict(spec, "groups")
    head_group = _label(spec.get("head_group", "masters"))
    worker_group = _label(spec.get("worker_group", "workers"))
    heads = _names(groups.get(head_group))
    workers = _names(groups.get(worker_group))
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
    outside = [h for h in _names(spec.get("play_hosts")) if h not in members]
    if outside:
        errors.append(
            "host(s) %s run this play but are in neither '%s' nor '%s', the groups the roles read as head and workers "
            "(llm_cluster_head_group, llm_cluster_worker_group): the shipped playbooks target masters:workers, so keep "
            "those names there, or run playbooks of your own that target the groups you named." % (
                ", ".join(outside), head_group, worker_group))
    others = [h for h in _names(spec.get("all_hosts")) if h not in members]
    if others:
        warnings.append(
            "host(s) %s are in neither '%s' nor '%s': the playbooks do not touch them (only the cluster groups are "
            "deployed); add them to '%s' to make them cluster nodes." % (
                ", ".join(others), head_group, worker_group, worker_group))
    return members


def _check_host_names(spec, members, errors):
    by_folded = {}
    for host in members:
        bad = _bad_chars(host)
        if bad:
            errors.append("host name %s contains %s: inventory host names become node names in files and units; "
                          "rename the host (letters, digits, '.', '-', '_')." % (_show(host), ", ".join(bad)))
        by_folded.setdefault(host.casefold(), []).append(host)
    for hosts in by_folded.values():
        if len(hosts) > 1:
            errors.append("hosts %s differ only in case: host names are case-insensitive, so they name the same "
                          "machine twice; keep one of them." % ", ".join(hosts))


# The members when the group names are no names: node_num is not compared with them.
_UNKNOWN_MEMBERS = []


def _check_node_num(spec, members, errors):
    raw = spec.get("node_num")
    node_num = _as_int(raw)
    if node_num is None or node_num < 1:
        errors.append("node_num = %s: must be a positive integer; set node_num: %d (the number of hosts in the inventory)."
                      % (_show(raw), len(members)))
    elif node_num != len(members) and members is not _UNKNOWN_MEMBERS:
        errors.append(
            "node_num = %d but the inventory has %d host(s) (%s): set node_num: %d or add/remove hosts."
            % (node_num, len(members), ", ".join(members) or "none", len(members))
        )


def _port_value(name, raw, errors):
    port = _as_int(raw)
    if port is None or not 1 <= port <= 65535:
        errors.append("%s = %s: a port must be an integer between 1 and 65535; e.g. %s: %s."
                      % (name, _show(raw), name, PORT_EXAMPLES.get(name, 8000)))
        return None
    return port


def _check_ports(spec, errors):
    """Every port the cluster uses against every other one, and against every port range."""
    seen = {}
    named = _items(spec, "ports") + _items(spec, "cluster_ports")
    for name, raw in named:
        port = _port_value(name, raw, errors)
        if port is None:
            continue
        if port in seen:
            errors.append("%s = %d clashes with %s = %d: every service needs its own port; change one of them."
                          % (name, port, seen[port], port))
        else:
            seen[port] = name
    ranges = []
    for name, raw in _items(spec, "port_ranges"):
        if not isinstance(raw, (list, tuple)) or len(raw) != 2:
            errors.append("%s = %s: a port range is [first, last]." % (name, _show(raw)))
            continue
        low, high = _as_int(raw[0]), _as_int(raw[1])
        if low is None or high is None or not 1 <= low <= high <= 65535:
            errors.append("%s = %s to %s: a port range needs 1 <= first <= last <= 65535; e.g. 20000 to 20999."
                          % (name, _show(raw[0]), _show(raw[1])))
            continue
        for other_name, (other_low, other_high) in ranges:
            if low <= other_high and other_low <= high:
                errors.append("%s (%d-%d) overlaps %s (%d-%d): move one of the ranges."
                              % (name, low, high, other_name, other_low, other_high))
        ranges.append((name, (low, high)))
    for port, name in sorted(seen.items()):
        for range_name, (low, high) in ranges:
            if low <= port <= high:
                errors.append("%s = %d lies inside %s (%d-%d), the ports Ray hands to its worker processes: "
                              "choose a port outside %d-%d." % (name, port, range_name, low, high, low, high))


def _check_choices(spec, errors):
    for name, choices in (("backend_type", BACKEND_TYPES), ("model_type", MODEL_TYPES)):
        value = spec.get(name)
        if not isinstance(value, str) or value not in choices:
            errors.append("%s = %s is not supported: choose one of %s." % (name, _show(value), ", ".join(choices)))


def _path_problem(name, value, example):
    """The problem with one absolute directory path, or None."""
    if not isinstance(value, str) or not value:
        return ("%s = %s: set %s to the absolute directory %s, the same on every node (e.g. %s)."
                % (name, _show(value), name, "of the weights" if name == "model_path" else "it names", example))
    bad = _bad_chars(value)
    if bad:
        return ("%s = %s contains %s: the path reaches shell files, unit files and rsyncd.conf; "
                "use a path without control characters or whitespace." % (name, _show(value), ", ".join(bad)))
    if not posixpath.isabs(value):
        return ("%s = %s is relative: use an absolute path such as /%s (the same path on every node)."
                % (name, _show(value), value.lstrip("./")))
    if value.startswith("//") or posixpath.normpath(value) == "/":
        return "%s = %s is the root directory: point it at the model's own directory." % (name, _show(value))
    if ".." in value.split("/"):
        return "%s = %s contains '..': write the normalised path %s." % (name, _show(value), posixpath.normpath(value))
    if posixpath.normpath(value) != value:
        return ("%s = %s is not a normalised path: write %s (no '.', '//' or trailing '/')."
                % (name, _show(value), posixpath.normpath(value)))
    return None


def _check_paths(spec, errors):
    problem = _path_problem("model_path", spec.get("model_path"), "/data/models/DeepSeek-R1")
    if problem:
        errors.append(problem)
    for name, value in _items(spec, "paths"):
        problem = _path_problem(name, value, "/var/lib/llm_cluster")
        if problem:
            errors.append(problem)


def _check_interfaces(spec, members, errors):
    var = _label(spec.get("interface_var", "ray_device"))
    interfaces = _dict(spec, "interfaces")
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
        if not isinstance(value, str) or not _IFNAME_RE.fullmatch(value) or value in (".", ".."):
            errors.append("%s = %s on host %s is not a network interface name (1-15 characters, no spaces, control "
                          "characters or '/'); use the name 'ip -br link' shows, e.g. enp67s0f0np0."
                          % (var, _show(value), host))


def _cidr_problem(name, value):
    if not isinstance(value, str) or "/" not in value:
        return "%s = %s is not a CIDR: write it as address/prefix, e.g. 10.10.0.0/16." % (name, _show(value))
    try:
        net = ipaddress.ip_network(value, strict=False)
    except ValueError:
        return "%s = %s is not a CIDR: write it as address/prefix, e.g. 10.10.0.0/16." % (name, _show(value))
    if net.version != 4:
        return ("%s = %s is an IPv6 network: the cluster's firewall sets and NPU addresses are IPv4; "
                "list IPv4 networks such as 10.10.0.0/16." % (name, _show(value)))
    if str(net) != value and net.network_address != ipaddress.ip_interface(value).ip:
        return "%s = '%s' has host bits set: did you mean %s?" % (name, value, net)
    return None


def _check_cidrs(spec, errors):
    for name, raw in _items(spec, "cidrs"):
        values = raw if isinstance(raw, list) else [raw]
        for value in values:
            problem = _cidr_problem(name, value)
            if problem:
                errors.append(problem)
    for name, raw in _items(spec, "cidr_lists"):
        if raw is None or raw == "":
            continue
        if not isinstance(raw, list):
            errors.append("%s = %s must be a list of CIDRs: write %s: [%s] (one item per network)."
                          % (name, _show(raw), name, raw if isinstance(raw, str) and len(raw) < 40 else "10.0.0.0/8"))
            continue
        for value in raw:
            problem = _cidr_problem(name, value)
            if problem:
                errors.append(problem)


def _check_booleans(spec, errors):
    for name, value in _items(spec, "booleans"):
        if not isinstance(value, bool):
            errors.append("%s = %s must be a YAML boolean: write %s: true or %s: false (no quotes)."
                          % (name, _show(value), name, name))
    for name, value in _items(spec, "flags"):
        if isinstance(value, bool) or _as_int(value) in (0, 1):
            continue
        errors.append("%s = %s must be 0 or 1 (or false/true)." % (name, _show(value)))


def _normal_address(value):
    """One spelling per address: IPs in their compressed form, names case-folded without a trailing dot."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return value.casefold().rstrip(".")


def _check_addresses(spec, members, errors):
    owners = {}
    addresses = _dict(spec, "addresses")
    for host in members:
        address = addresses.get(host)
        if address is None or address == "":
            address = host
        if not isinstance(address, str):
            errors.append("ansible_host = %s on host %s is not an address: write one IP address or DNS name, "
                          "e.g. ansible_host: 192.0.2.10." % (_show(address), host))
            continue
        bad = _bad_chars(address)
        if bad:
            errors.append("ansible_host = %s on host %s contains %s: write one IP address or DNS name."
                          % (_show(address), host, ", ".join(bad)))
            continue
        owners.setdefault(_normal_address(address), []).append((host, address))
    for pairs in owners.values():
        if len(pairs) > 1:
            hosts = ", ".join(pair[0] for pair in pairs)
            spellings = sorted({pair[1] for pair in pairs})
            if len(spellings) == 1:
                errors.append("hosts %s all have ansible_host = '%s': each node needs its own address; fix ansible_host."
                              % (hosts, spellings[0]))
            else:
                errors.append("hosts %s have ansible_host %s, which are one address written differently: each node "
                              "needs its own address; fix ansible_host." % (hosts, ", ".join(_show(a) for a in spellings)))


def _check_container(spec, errors):
    container = _dict(spec, "container")
    name = container.get("container_name")
    if name is not None and not (isinstance(name, str) and _CONTAINER_NAME_RE.fullmatch(name)):
        errors.append("container_name = %s is not a valid container name: use letters, digits, '_', '.', '-' "
                      "(e.g. openeuler_ds)." % _show(name))
    # The serve role's own name for it (it defaults to container_name): Docker refuses a bad one only when the
    # serve step creates the container, long after the nodes were changed.
    own = container.get("serve_container_name")
    if own is not None and own != name and not (isinstance(own, str) and _CONTAINER_NAME_RE.fullmatch(own)):
        errors.append("serve_container_name = %s is not a valid container name: use letters, digits, '_', '.', '-' "
                      "(e.g. llm_cluster_engine), or set container_name instead." % _show(own))
    tag = container.get("image_tag")
    if isinstance(tag, float):
        errors.append("image_tag = %s: YAML read the tag as a number, so a tag such as 1.10 became 1.1; quote it "
                      "(image_tag: \"%s\" as written in the registry)." % (_show(tag), _show_tag(tag)))
    elif isinstance(tag, bool) or (tag is not None and not isinstance(tag, (str, int))):
        errors.append("image_tag = %s is not a valid image tag: quote the tag as a string, e.g. image_tag: \"20250717\"."
                      % _show(tag))
    elif isinstance(tag, int) and not (0 <= tag and tag.bit_length() <= 64):
        errors.append("image_tag = %s is not a valid image tag: quote the tag as a string, e.g. image_tag: \"20250717\"."
                      % _show(tag))
    elif isinstance(tag, str) and not IMAGE_TAG_RE.fullmatch(tag):
        errors.append("image_tag = %s is not a valid image tag: use letters, digits, '_', '.', '-' (e.g. 20250717)."
                      % _show(tag))
    image = container.get("image_name")
    if image is None:
        return
    if isinstance(image, str) and image and ":" in image.rsplit("/", 1)[-1] and not _bad_chars(image):
        errors.append("image_name = %s: give the repository without a tag (the tag goes in image_tag), "
                      "e.g. hub.oepkgs.net/oedeploy/openeuler/aarch64/mindspore." % _show(image))
    elif not isinstance(image, str) or not IMAGE_NAME_RE.fullmatch(image):
        errors.append("image_name = %s is not an image repository (lowercase path components, an optional "
                      "registry host first, no spaces or control characters), e.g. "
                      "hub.oepkgs.net/oedeploy/openeuler/aarch64/mindspore." % _show(image))


def _check_accounts(spec, errors):
    for name, value in _items(spec, "accounts"):
        if not (isinstance(value, str) and _USER_NAME_RE.fullmatch(value)):
            errors.append("%s = %s is not a user name: use lowercase letters, digits, '_' and '-', starting with a "
                          "letter or '_', at most 32 characters (e.g. llm-cluster), or root to run Ray and the engine "
                          "as root." % (name, _show(value)))


# One DNS name: labels of letters, digits and '-' (not first or last), at most 253 characters.
_DNS_NAME_RE = re.compile(r"(?=.{1,253}$)(?!-)[A-Za-z0-9-]{1,63}(?<!-)(?:\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?", re.ASCII)


def _check_tls(spec, errors):
    tls = _dict(spec, "tls")
    names = tls.get("serve_tls_names")
    if names is not None and not isinstance(names, list):
        errors.append("serve_tls_names = %s must be a list of DNS names or IP addresses, e.g. [api.example.com, 192.0.2.10]."
                      % _show(names))
        names = []
    for name in names or []:
        if isinstance(name, str):
            try:
                ipaddress.ip_address(name)
                continue
            except ValueError:
                if _DNS_NAME_RE.fullmatch(name) and not name.replace(".", "").isdigit():
                    continue
        errors.append("serve_tls_names has %s, which is neither a DNS name nor an IP address: it goes into the API "
                      "certificate's names; write e.g. api.example.com or 192.0.2.10." % _show(name))
    cert, key = tls.get("serve_tls_cert_file") or "", tls.get("serve_tls_key_file") or ""
    for name, value in (("serve_tls_cert_file", cert), ("serve_tls_key_file", key)):
        problem = None
        if not isinstance(value, str):
            problem = "%s = %s must be a path on the controller." % (name, _show(value))
        elif any(unicodedata.category(c).startswith("C") or unicodedata.category(c) in ("Zl", "Zp") for c in value):
            problem = "%s = %s contains a control character: write the path of the PEM file on the controller." % (
                name, _show(value))
        if problem:
            errors.append(problem)
    if isinstance(cert, str) and isinstance(key, str) and bool(cert) != bool(key):
        errors.append("serve_tls_cert_file = %s and serve_tls_key_file = %s: set both (the site certificate and its key, on "
                      "the controller) or neither (the serve role makes a CA and a certificate)." % (_show(cert), _show(key)))


def _check_monitoring(spec, members, errors):
    """The monitoring step's inputs, when it runs (llm_cluster_monitoring, or playbooks/monitoring.yml): its host is a
    member, its thresholds and engine are known, the exporter binaries are files on the controller. Its ports are
    checked with every other port (_check_ports)."""
    monitoring = _dict(spec, "monitoring")
    if not (monitoring.get("standalone") is True or _dict(spec, "booleans").get("llm_cluster_monitoring") is True):
        return
    group = monitoring.get("group")
    hosts = monitoring.get("hosts") or []
    if hosts and members is not _UNKNOWN_MEMBERS and hosts[0] not in members:
        errors.append("monitoring host %s (first host of the group %s) is not in the cluster's groups: the firewall lets only "
                      "members reach the exporters; list a cluster member first in %s, or leave the group out to monitor "
                      "from the head." % (_show(hosts[0]), _show(group), _show(group)))
    thresholds = monitoring.get("thresholds")
    if not isinstance(thresholds, dict):
        errors.append("monitoring_alert_thresholds = %s must be a mapping of threshold names to values, e.g. "
                      "{ttft_p99_seconds: 5, kv_cache_ratio: 0.95}." % _show(thresholds))
    else:
        try:
            _monitoring.alert_rules(thresholds)
        except ValueError as exc:
            errors.append("%s." % exc)
    engine = monitoring.get("engine")
    if engine != "auto" and engine not in _monitoring.ENGINES:
        errors.append("monitoring_engine = %s: choose auto (the engine the serve step runs) or one of %s."
                      % (_show(engine), ", ".join(_monitoring.ENGINES)))
    for name in ("monitoring_npu_exporter_src", "monitoring_dcgm_exporter_src"):
        value = monitoring.get(name)
        if value in (None, ""):
            continue
        if not isinstance(value, str) or not os.path.isfile(value):
            errors.append("%s = %s is not a file on the controller: give the path of the exporter binary from your %s "
                          "package, or leave it empty to use the one already on the nodes."
                          % (name, _show(value), "MindCluster" if "npu" in name else "DCGM"))


# The variables the offline gate reads per node (host_vars may differ); the role
# defaults are applied by offline_settings().
OFFLINE_VARS = ("llm_cluster_offline", "llm_cluster_bundle", "ray_cluster_wheelhouse", "ray_cluster_wheelhouse_src", "ray_cluster_pip_extra_args",
                "serve_wheelhouse", "serve_pip_extra_args", "serve_install", "serve_runtime", "image_name", "serve_image",
                "serve_image_archive", "model_distribution_source", "model_distribution_hub_pip_extra_args")
# Where ray_cluster copies ray_cluster_wheelhouse_src when ray_cluster_wheelhouse is "" (roles/ray_cluster/vars).
WHEELHOUSE_CACHE = "/var/cache/llm_cluster/wheelhouse"
# pip options that name an index or a remote location.
_PIP_INDEX_OPTIONS = ("-i", "--index-url", "--extra-index-url", "--trusted-host")


def _truthy(value):
    """Ansible's reading of a boolean (yes, on, 1, true...); anything it cannot read is false."""
    try:
        return boolean(value, strict=True)
    except TypeError:
        return False


def offline_settings(given):
    """One node's offline-relevant settings, with the roles' defaults applied where the node does not set them."""
    values = dict(given) if isinstance(given, dict) else {}

    def text(name, default=""):
        value = values.get(name, default)
        return value.strip() if isinstance(value, str) else ("" if value is None else value)

    # A bundle (llm_cluster_bundle) turns offline on and, where the node does not set them, gives the wheelhouse,
    # the image archive and the model, as the roles' defaults read it (the action plugin resolved it: __bundle).
    bundle = text("llm_cluster_bundle")
    items = (values.get("__bundle") or {}).get("items") or {} if bundle else {}
    wheelhouse = text("ray_cluster_wheelhouse")
    wheelhouse_src = text("ray_cluster_wheelhouse_src") if "ray_cluster_wheelhouse_src" in values else items.get("wheels", "")
    image = text("serve_image", "")
    if not image and text("image_name"):
        image = "%s" % text("image_name")
    runtime = text("serve_runtime", "auto")
    if runtime == "auto":
        runtime = "container" if image else "host"
    return {
        "offline": _truthy(values["llm_cluster_offline"]) if "llm_cluster_offline" in values else bool(bundle),
        "bundle": bundle,
        "bundle_problems": list((values.get("__bundle") or {}).get("problems") or []) if bundle else [],
        "ray_cluster_wheelhouse": wheelhouse,
        "ray_cluster_wheelhouse_src": wheelhouse_src,
        # serve_wheelhouse follows the node's copy of the wheels (roles/serve/defaults).
        "serve_wheelhouse": text("serve_wheelhouse", None) if "serve_wheelhouse" in values else
        (wheelhouse or (WHEELHOUSE_CACHE if wheelhouse_src else "")),
        "pip_args": {
            "ray_cluster_pip_extra_args": text("ray_cluster_pip_extra_args"),
            "serve_pip_extra_args": text("serve_pip_extra_args") if "serve_pip_extra_args" in values
            else text("ray_cluster_pip_extra_args"),
            "model_distribution_hub_pip_extra_args": text("model_distribution_hub_pip_extra_args"),
        },
        "serve_install": _truthy(values.get("serve_install", True)),
        "runtime": runtime,
        "serve_image_archive": text("serve_image_archive") if "serve_image_archive" in values
        else items.get("image_archive", ""),
        "model_distribution_source": text("model_distribution_source",
                                          "controller" if items.get("model") else "node"),
    }


def _pip_network_words(value):
    """The words of a pip argument string that send pip to a network: index options, URLs."""
    if isinstance(value, (list, tuple)):
        words = [str(word) for word in value]
    elif isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError:
            words = value.split()
    else:
        return []
    found = []
    for word in words:
        option = word.split("=", 1)[0]
        if option in _PIP_INDEX_OPTIONS or (option.startswith("-i") and len(option) > 2 and not option.startswith("--")) \
                or "://" in word:
            found.append(word)
    return found


def offline_problems(settings):
    """What on one node would reach a network in offline mode, as messages naming the variable and the fix."""
    if not settings.get("offline"):
        return []
    problems = []
    if not settings["ray_cluster_wheelhouse"] and not settings["ray_cluster_wheelhouse_src"]:
        problems.append("Ray would be installed from the package index: set ray_cluster_wheelhouse (a directory of "
                        "wheels on each node) or ray_cluster_wheelhouse_src (the bundle's content/wheels/<platform> on "
                        "the controller).")
    for name, value in sorted(settings["pip_args"].items()):
        words = _pip_network_words(value)
        if words:
            problems.append("%s = %s sends pip to a network (%s): remove the index options and URLs; offline, pip "
                            "reads only the wheelhouse." % (name, _show(value), ", ".join(_show(w) for w in words[:3])))
    if settings["runtime"] == "host" and settings["serve_install"] and not settings["serve_wheelhouse"]:
        problems.append("the engine would be installed from the package index: set serve_wheelhouse (or "
                        "ray_cluster_wheelhouse, which it follows) to the wheels on each node, or serve_install: false "
                        "when the engine is already in the venv.")
    if settings["runtime"] == "container" and not settings["serve_image_archive"]:
        problems.append("the engine image would be pulled from a registry: set serve_image_archive to its docker "
                        "save tarball (on the controller, or on every node with serve_image_archive_remote_src: true).")
    if settings["model_distribution_source"] == "hub":
        problems.append("model_distribution_source = 'hub' downloads the model from a hub: put the weights in "
                        "model_path on one node (source node) or on the controller (source controller).")
    return problems


def _check_offline(spec, members, errors):
    """In offline mode (llm_cluster_offline), nothing the run does may need the package index, a registry or a hub."""
    given = _dict(spec, "offline")
    found = {}
    bundles = {}
    for host in members:
        settings = offline_settings(given.get(host))
        for message in offline_problems(settings):
            found.setdefault(message, []).append(host)
        for message in settings["bundle_problems"]:
            bundles.setdefault(message, None)
    for message, hosts in found.items():
        errors.append("llm_cluster_offline is on, but on %s %s" % (_where(hosts, members), message))
    errors.extend(bundles)


# (variable, lowest, highest, what it is, a good value) of the watchdog's whole numbers.
WATCHDOG_LIMITS = (
    ("serve_watchdog_interval", 5, 86400, "seconds between two checks", 30),
    ("serve_watchdog_timeout", 1, 3600, "seconds one completion may take", 60),
    ("serve_watchdog_failures", 1, 100, "failed checks in a row before a restart", 3),
    ("serve_watchdog_start_grace", 0, 86400, "seconds a new engine may fail before failures count (0 = the readiness "
     "budget)", 0),
    ("serve_watchdog_max_restarts", 0, 100, "restarts in one window (0 = watch and report, never restart)", 3),
    ("serve_watchdog_window", 60, 604800, "seconds over which restarts are counted", 3600),
)


# (variable, lowest, highest, what it is, a good value) of the network fetches' retries.
FETCH_LIMITS = (
    ("llm_cluster_fetch_retries", 0, 20, "tries after the first of each package, wheel, image, hub or rsync fetch", 3),
    ("llm_cluster_fetch_delay", 0, 600, "seconds before a retry", 10),
)


# The host tuning's variables, read per node (host_vars may differ).
TUNING_VARS = ("prepare_tuning_profile", "prepare_tuning_sysctl", "prepare_tuning_transparent_hugepage",
               "prepare_tuning_cpu_governor")
TUNING_PROFILES = ("auto", "ascend", "nvidia", "cpu", "none")
TUNING_THP = ("", "keep", "always", "madvise", "never")
# Kernel parameters another step owns: tuning them too would fight it (and its restore).
TUNING_OWNED = {
    "kernel.numa_balancing": "the binding step owns it (affinity_apply's numa_balancing, restored by restore.yml --tags binding)",
}
_SYSCTL_NAME = re.compile(r"^[a-z0-9_]+(\.[A-Za-z0-9_-]+)+$")
_GOVERNOR = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def _tuning_problems(given):
    """Messages for one node's host tuning variables (names, values, choices); [] when they are good."""
    problems = []
    profile = given.get("prepare_tuning_profile", "auto")
    if profile not in TUNING_PROFILES:
        problems.append("prepare_tuning_profile = %s is not a profile: use one of %s." % (_show(profile), ", ".join(TUNING_PROFILES)))
    sysctl = given.get("prepare_tuning_sysctl", {})
    if not isinstance(sysctl, dict):
        problems.append("prepare_tuning_sysctl = %s must be a mapping of kernel parameters to values, "
                        "e.g. prepare_tuning_sysctl: {vm.swappiness: 1}." % _show(sysctl))
        sysctl = {}
    for name, value in sysctl.items():
        if not isinstance(name, str) or not _SYSCTL_NAME.match(name):
            problems.append("prepare_tuning_sysctl: %s is not a kernel parameter name: write it as sysctl does, "
                            "dotted, such as vm.swappiness (no '/', '..' or spaces)." % _show(name))
        elif name in TUNING_OWNED:
            problems.append("prepare_tuning_sysctl: %s is not set by the tuning step: %s; drop it here." % (name, TUNING_OWNED[name]))
        elif value is not None and (isinstance(value, (bool, dict, list)) or not str(value).strip()
                                    or any(c in str(value) for c in "\n\r\x00")):
            problems.append("prepare_tuning_sysctl: %s = %s is not one value: give a number or a word, such as "
                            "%s: 0, or null to drop the profile's." % (name, _show(value), name))
    thp = given.get("prepare_tuning_transparent_hugepage", "")
    if thp not in TUNING_THP:
        problems.append("prepare_tuning_transparent_hugepage = %s must be always, madvise or never ('' for the profile's, "
                        "keep for the host's)." % _show(thp))
    governor = given.get("prepare_tuning_cpu_governor", "")
    if governor not in ("", "keep") and not (isinstance(governor, str) and _GOVERNOR.match(governor)):
        problems.append("prepare_tuning_cpu_governor = %s is not a governor name such as performance ('' for the "
                        "profile's, keep for the host's)." % _show(governor))
    return problems


def _check_tuning(spec, members, errors):
    """Each node's host tuning variables; a problem several nodes share is one message naming them."""
    found = {}
    tuning = _dict(spec, "tuning")
    for host in members:
        given = tuning.get(host)
        for message in _tuning_problems(given if isinstance(given, dict) else {}):
            found.setdefault(message, []).append(host)
    for message, hosts in found.items():
        errors.append("%s (%s)" % (message.rstrip("."), ", ".join(hosts)) + ".")


def _whole_numbers(given, limits, errors):
    """{name: number} of the values of ``given`` within their limits; one error for each that is not."""
    values = {}
    for name, low, high, what, good in limits:
        value = given.get(name)
        number = _as_int(value)
        if number is None or not low <= number <= high:
            errors.append("%s = %s must be a whole number from %d to %d (%s), e.g. %s: %s." % (
                name, _show(value), low, high, what, name, good))
        else:
            values[name] = number
    return values


def _check_fetch(spec, errors):
    """The retries of network fetches: whole numbers in range (they reach Ansible's retries and delay)."""
    given = _dict(spec, "fetch")
    _whole_numbers(given, [limit for limit in FETCH_LIMITS if limit[0] in given], errors)


# model_distribution_locality: a rack or a switch, a label that appears in the plan and the reports.
LOCALITY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}", re.ASCII)


def _check_serving_groups(spec, members, errors):
    """llm_cluster_serving_groups: inventory group names, each with members only, every member in exactly one, with
    serve_topology replicas. The nodes' accelerators are checked once they are known (preflight, serve step)."""
    value = spec.get("serving_groups")
    if value in (None, "", []):
        return
    if not isinstance(value, list):
        errors.append("llm_cluster_serving_groups = %s: must be a list of inventory group names, one per kind of "
                      "node (e.g. [ascend, cpu]); leave it empty to serve the cluster as one group" % _brief(value))
        return
    names = []
    for name in value:
        if not isinstance(name, str) or not _GROUP_NAME_RE.fullmatch(name):
            errors.append("llm_cluster_serving_groups has %s: each entry is the name of an inventory group (letters, "
                          "digits and _, not starting with a digit)" % _brief(name))
        elif name in names:
            errors.append("llm_cluster_serving_groups lists %s twice: list each group once" % name)
        else:
            names.append(name)
    topology = spec.get("topology")
    if topology not in (None, "", "replicas"):
        errors.append("llm_cluster_serving_groups (%s) needs serve_topology replicas, not %s: each group's nodes serve "
                      "their own engines behind the router; leave llm_cluster_serving_groups empty for %s"
                      % (", ".join(names), _brief(topology), _brief(topology)))
    hosts = _dict(spec, "serving_hosts")
    found = [name for name in names if name in hosts]
    for name in names:
        if name not in hosts:
            errors.append("llm_cluster_serving_groups names group %s, which the inventory does not have: add it "
                          "with its nodes (all: children: %s: hosts: ...), or take it out of the list" % (name, name))
        elif not _names(hosts[name]):
            errors.append("serving group %s has no hosts: put nodes of '%s' or '%s' in it, or take it out of "
                          "llm_cluster_serving_groups" % (name, spec.get("head_group", "masters"),
                                                          spec.get("worker_group", "workers")))
        else:
            outside = [h for h in _names(hosts[name]) if h not in members]
            if outside and members is not _UNKNOWN_MEMBERS:
                errors.append("%s: in serving group %s but in neither '%s' nor '%s': a serving group holds cluster "
                              "nodes only; add the node to '%s' or take it out of %s"
                              % (", ".join(outside), name, spec.get("head_group", "masters"),
                                 spec.get("worker_group", "workers"), spec.get("worker_group", "workers"), name))
    if len(found) != len(names):
        return
    errors.extend(serving_group_membership(members, [(name, _names(hosts[name])) for name in names])[1])


def serving_group_membership(members, entries):
    """Each member's serving group, ``({host: group}, errors)``: ``entries`` are (group, [hosts]) pairs, and every
    member must be in exactly one of them (the inventory check and the serve step's plan both ask)."""
    group_of, errors = {}, []
    names = [entry[0] for entry in entries]
    for host in members:
        mine = [name for name, hosts in entries if host in hosts]
        if not mine:
            errors.append("%s: in none of the serving groups (%s): every node serves in one; add it to the group of "
                          "its accelerator" % (host, ", ".join(names)))
        elif len(mine) > 1:
            errors.append("%s: in serving groups %s: a node serves in one group; take it out of all but one"
                          % (host, " and ".join(mine)))
        else:
            group_of[host] = mine[0]
    return group_of, errors


def _check_localities(spec, members, errors):
    """Each node's model_distribution_locality, where set: a short label (it names the node's rack or switch)."""
    given = _dict(spec, "localities")
    for host in members:
        if host not in given or given[host] in (None, ""):
            continue
        value = given[host]
        if not isinstance(value, str) or not LOCALITY_RE.fullmatch(value):
            errors.append("model_distribution_locality = %s on host %s is not a rack or switch label: use 1 to 64 "
                          "letters, digits, '_', '.', ':', '/' or '-', starting with a letter or digit (e.g. rack-03); "
                          "nodes with the same label take the model from each other first." % (_show(value), host))


# Characters of Ansible's host patterns (a list, a union, an intersection, an exclusion, a wildcard, a range,
# a regular expression): a node to replace is named by its inventory host name, never by a pattern.
_PATTERN_CHARS = ",:&!*?[]~^$()|{}\\"


def replace_problems(old, new, groups, head_group="masters", worker_group="workers", inventory="the inventory",
                     retire=False):
    """What stops ``./deploy.sh replace-node OLD NEW`` (``new`` "" for remove-node) before any host changes.

    The inventory is already the cluster to have: NEW is a member (in the head or the worker group), and OLD, when
    it is another machine, is not a member any more. ``retire`` (``--retire``): OLD is cleaned too, so it is
    another machine than NEW and still a host of the inventory (outside both groups) to connect to. ``groups``: the
    inventory's groups ({name: [hosts]}, with "all"). Returns a list of messages, each naming the host or variable
    and the fix; empty when the replacement can go on.
    """
    problems = []
    groups = groups if isinstance(groups, dict) else {}
    all_hosts = [host for host in (groups.get("all") or []) if isinstance(host, str)]
    members = [host for name in (head_group, worker_group) for host in (groups.get(name) or [])
               if isinstance(host, str)]
    group_names = [name for name in groups if isinstance(name, str)]

    def name_problem(label, value):
        if not isinstance(value, str) or not value.strip():
            return "%s = %s is not a host name: give the inventory host name of one node." % (label, _show(value))
        bad = sorted(set("'%s'" % c for c in value if c in _PATTERN_CHARS)) + _bad_chars(value)
        if bad:
            return ("%s = %s is a host pattern, not one host name (it holds %s): give the inventory host name of "
                    "one node." % (label, _show(value), ", ".join(bad)))
        if value in group_names and value not in all_hosts:
            return ("%s = %s is a group of %s, not a host: give the inventory host name of one node."
                    % (label, _show(value), inventory))
        return None

    old_problem = name_problem("the node to replace (OLD)", old)
    if old_problem:
        problems.append(old_problem)
    if new not in (None, ""):
        new_problem = name_problem("the new node (NEW)", new)
        if new_problem:
            problems.append(new_problem)
        elif new not in members:
            problems.append("the new node %s is not in %s or %s of %s: add it there (in OLD's place) with its "
                            "ansible_host, then run the replacement again." % (new, head_group, worker_group, inventory))
    if old_problem:
        return problems
    if old != new and old in members:
        where = head_group if old in (groups.get(head_group) or []) else worker_group
        problems.append("%s is still in %s of %s: the inventory must already be the cluster to have; remove %s "
                        "from %s%s, then run this again." % (
                            old, where, inventory, old, where,
                            " and put %s in its place" % new if new not in (None, "") else ""))
    if not [host for host in members if host != old or old == new]:
        problems.append("without %s, %s has no node left in %s or %s." % (old, inventory, head_group, worker_group))
    if retire and old == new:
        problems.append("--retire cleans the machine that leaves, and %s keeps its name on new hardware: there is "
                        "nothing to retire; run the replacement without --retire." % old)
    elif retire and old not in all_hosts:
        problems.append("--retire cleans %s before it goes, and %s has no host %s to connect to: keep it there outside "
                        "%s and %s (all: hosts: %s: ansible_host: ...), or run without --retire if the machine is "
                        "gone." % (old, inventory, old, head_group, worker_group, old))
    return problems


def _check_watchdog(spec, errors):
    """The watchdog's numbers, when it runs: whole numbers in range, a window that holds one count of failures."""
    watchdog = _dict(spec, "watchdog")
    if watchdog.get("serve_watchdog") is not True:
        return
    values = _whole_numbers(watchdog, WATCHDOG_LIMITS, errors)
    interval, failures, window = (values.get("serve_watchdog_%s" % key) for key in ("interval", "failures", "window"))
    if None not in (interval, failures, window) and window < interval * failures:
        least = interval * failures
        errors.append("serve_watchdog_window = %d is shorter than one count of failures (serve_watchdog_interval %d x "
                      "serve_watchdog_failures %d = %d s), so the restart limit could never hold: set "
                      "serve_watchdog_window to at least %d." % (window, interval, failures, least, least))


def _show_tag(tag):
    text = repr(tag)
    return text if len(text) < 40 else "20250717"


# Environment names that carry credentials, and the maps where they are refused, with where
# the secret goes instead.
_SECRET_ENV_RE = re.compile(r"TOKEN|PASSWORD|SECRET|API_KEY|ACCESS_KEY", re.IGNORECASE)
SECRET_HOMES = {"model_distribution_hub_environment": "model_distribution_hub_token"}


def _check_env_names(spec, errors):
    for name, value in _items(spec, "env_maps"):
        if value is None or value == {}:
            continue
        if not isinstance(value, dict):
            errors.append("%s = %s must be a mapping of NAME: value." % (name, _show(value)))
            continue
        for key, item in value.items():
            if not isinstance(key, str) or not _ENV_NAME_RE.fullmatch(key):
                errors.append("%s has the key %s: environment variable names are letters, digits and '_', not "
                              "starting with a digit." % (name, _show(key)))
            elif isinstance(item, (dict, list)):
                errors.append("%s.%s = %s: an environment value is one string or number." % (name, key, _show(item)))
            elif name in SECRET_HOMES and _SECRET_ENV_RE.search(key):
                # The environment of a task shows in -vvv and in the process's /proc/<pid>/environ.
                errors.append("%s.%s: a secret does not go in an environment; give it to %s (from a vault), "
                              "which reaches the node in a 0600 file." % (name, key, SECRET_HOMES[name]))


# --- Communication environment (HCCL, NCCL, Gloo) -------------------------------------------------------
# Where a node's collective variables come from, in the order the engine reads them (the later wins).
COMM_SOURCES = ("prepare_env_extra", "serve_environment")
BACKEND_SOURCE = "backend"

# (name, lowest, highest, the rule and the fix). CANN's environment reference (HCCL_CONNECT_TIMEOUT,
# HCCL_EXEC_TIMEOUT, HCCL_BUFFSIZE, HCCL_RDMA_TC/SL); NCCL's environment page (NCCL_IB_GID_INDEX).
COMM_NUMBERS = (
    ("HCCL_CONNECT_TIMEOUT", 120, 7200, "seconds HCCL waits for every rank to connect; CANN accepts 120 to 7200 "
     "(the wait is the value plus 20 s), e.g. 120 for a few nodes, 1200 for many"),
    ("HCCL_EXEC_TIMEOUT", 0, 2147483647, "seconds a collective may run before HCCL aborts it (0 = never); CANN's "
     "default is 1836"),
    ("HCCL_BUFFSIZE", 1, 32768, "MB of HBM per communicator and direction; each communicator takes twice the value, "
     "so above 32768 (64 GiB, the most HBM one NPU has) none fits; CANN's default is 200"),
    ("HCCL_RDMA_TC", 0, 255, "the RoCE traffic class, the DSCP value times 4; CANN's default is 132"),
    ("HCCL_RDMA_SL", 0, 7, "the RoCE service level, the NICs' PFC priority; CANN's default is 4"),
    ("HCCL_INTRA_ROCE_ENABLE", 0, 1, "0 or 1"),
    ("HCCL_INTRA_PCIE_ENABLE", 0, 1, "0 or 1"),
)
# The AIV expansion mode caps HCCL_EXEC_TIMEOUT: a larger value has no effect.
AIV_EXEC_TIMEOUT_CAP = 1091
# Values HCCL needs to be the same on every rank of one communicator.
COMM_SAME_EVERYWHERE = ("HCCL_CONNECT_TIMEOUT", "HCCL_EXEC_TIMEOUT", "HCCL_BUFFSIZE", "HCCL_OP_EXPANSION_MODE",
                        "HCCL_DETERMINISTIC", "HCCL_RDMA_TC", "HCCL_RDMA_SL", "HCCL_INTRA_ROCE_ENABLE",
                        "HCCL_INTRA_PCIE_ENABLE")
# One node's own address: never the same on two nodes.
COMM_OWN_ADDRESS = ("HCCL_IF_IP", "VLLM_HOST_IP")
# Interface lists: NCCL's and HCCL's take '^' (exclude) and '=' (exact); Gloo's and TensorPipe's take names only.
COMM_IFNAME_LISTS = ("NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME")
COMM_IFNAME_PLAIN = ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")


def ifname_pattern(name, value):
    """(exclude, exact, items) of an interface variable: NCCL's and HCCL's take a leading '^' (exclude) and '='
    (exact), Gloo's and TensorPipe's names only (both flags False). Shared with the preflight's match."""
    exclude = exact = False
    if name in COMM_IFNAME_LISTS:
        exclude = value.startswith("^")
        value = value[1:] if exclude else value
        exact = value.startswith("=")
        value = value[1:] if exact else value
    return exclude, exact, value.split(",")


def _ip_address(value):
    """The IP address in its compressed form, or None when value is not one."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def _var(source, name):
    """How a message names one variable: the map it is in, or the backend's default."""
    if source == BACKEND_SOURCE:
        return "%s (the default of the backend_type, roles/prepare/vars/main.yml; override it in prepare_env_extra)" % name
    return "%s.%s" % (source, name)


def _comm_value(value):
    """An environment value as the env file writes it (numbers and booleans as text)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value) if isinstance(value, int) else None


def _comm_problems(env):
    """The problems of one node's merged collective variables, one message each."""
    problems = []
    numbers = {}
    for name, low, high, rule in COMM_NUMBERS:
        if name not in env:
            continue
        source, value = env[name]
        number = _as_int(value.strip()) if isinstance(value, str) else None
        if number is None or not low <= number <= high:
            problems.append("%s = %s must be a whole number from %d to %d: %s." % (
                _var(source, name), _show(value), low, high, rule))
        else:
            numbers[name] = number
    if "HCCL_RDMA_TC" in numbers and numbers["HCCL_RDMA_TC"] % 4:
        source, value = env["HCCL_RDMA_TC"]
        problems.append("%s = %s is not a multiple of 4: it is the DSCP value times 4 (DSCP 33 is "
                        "132), as the NICs' QoS (hccn_tool -i N -dscp_to_tc -g) shows." % (_var(source, "HCCL_RDMA_TC"), _show(value)))
    deterministic = env.get("HCCL_DETERMINISTIC")
    if deterministic and deterministic[1] not in ("true", "false"):
        problems.append("%s = %s must be true or false (lower case)."
                        % (_var(deterministic[0], "HCCL_DETERMINISTIC"), _show(deterministic[1])))
    mode = env.get("HCCL_OP_EXPANSION_MODE")
    if mode and mode[1] == "AIV":
        if deterministic and deterministic[1] == "true":
            problems.append("%s = 'AIV' with %s = 'true': HCCL ignores AIV in deterministic "
                            "mode; drop one of them." % (_var(mode[0], "HCCL_OP_EXPANSION_MODE"),
                                                         _var(deterministic[0], "HCCL_DETERMINISTIC")))
        elif numbers.get("HCCL_EXEC_TIMEOUT", 0) > AIV_EXEC_TIMEOUT_CAP:
            problems.append("%s = %s has no effect with %s = 'AIV': that mode caps it at %d s; "
                            "set at most %d, or set another HCCL_OP_EXPANSION_MODE." % (
                                _var(env["HCCL_EXEC_TIMEOUT"][0], "HCCL_EXEC_TIMEOUT"), _show(env["HCCL_EXEC_TIMEOUT"][1]),
                                _var(mode[0], "HCCL_OP_EXPANSION_MODE"), AIV_EXEC_TIMEOUT_CAP, AIV_EXEC_TIMEOUT_CAP))
    for name in COMM_OWN_ADDRESS:
        if name in env and _ip_address(env[name][1]) is None:
            shown = (_var(env[name][0], name), _show(env[name][1]))
            problems.append("%s = %s is not an IP address: it is this node's own address on the cluster "
                            "network; leave it unset and the env file sets each node's." % shown)
    for name in COMM_IFNAME_LISTS + COMM_IFNAME_PLAIN:
        if name not in env:
            continue
        source, value = env[name]
        if name in COMM_IFNAME_PLAIN and value[:1] in ("^", "="):
            library = "Gloo" if name.startswith("GLOO") else "TensorPipe"
            problems.append("%s = %s: %s takes interface names only (eth0, or eth0,eth1), not NCCL's '^' "
                            "(exclude) or '=' (exact); write the name." % (_var(source, name), _show(value), library))
            continue
        names = ifname_pattern(name, value)[2]
        if not all(_IFNAME_RE.fullmatch(item) and item not in (".", "..") for item in names):
            problems.append("%s = %s is not a list of interface names (1-15 characters each, separated by "
                            "','%s); use the names 'ip -br link' shows." % (
                                _var(source, name), _show(value), ", after an optional '^' and '='" if name in COMM_IFNAME_LISTS
                                else ""))
    return problems


def _comm_envs(spec, members):
    """{host: {NAME: (source, value)}} of the members' collective variables (maps of another type are skipped: the
    environment-map check names them)."""
    given = _dict(spec, "comm_env")
    envs = {}
    for host in members:
        merged = {}
        sources = dict(given.get(host) if isinstance(given.get(host), dict) else {})
        sources[BACKEND_SOURCE] = spec.get("backend_env")
        for source in (BACKEND_SOURCE,) + COMM_SOURCES:
            mapping = sources.get(source)
            if not isinstance(mapping, dict):
                continue
            for key, item in mapping.items():
                text = _comm_value(item)
                collective = isinstance(key, str) and (key.startswith(("HCCL_", "NCCL_")) or
                                                       key in COMM_OWN_ADDRESS + COMM_IFNAME_PLAIN)
                if collective and text is not None:
                    merged[key] = (source, text)
        envs[host] = merged
    return envs


def _where(hosts, members):
    return "every node" if len(hosts) == len(members) and len(members) > 1 else "host " + ", ".join(hosts)


def _check_comm_env(spec, members, errors):
    """HCCL/NCCL/Gloo variables of prepare_env_extra and serve_environment, per node and across the nodes."""
    envs = _comm_envs(spec, members)
    found = {}
    for host in members:
        for message in _comm_problems(envs.get(host, {})):
            found.setdefault(message, []).append(host)
    for message, hosts in found.items():
        errors.append("%s (%s)" % (message[:-1], _where(hosts, members)) + ".")
    for name in COMM_OWN_ADDRESS:
        by_value = {}
        for host in members:
            address = _ip_address(envs.get(host, {}).get(name, (None, ""))[1])
            if address is not None:
                by_value.setdefault(address, []).append(host)
        for value, hosts in sorted(by_value.items()):
            if len(hosts) > 1:
                errors.append("%s = %s is set for %s: it is one node's own address, so HCCL or vLLM on the others "
                              "would use an address that is not theirs; set it per host in host_vars, or leave it "
                              "unset (the env file sets each node's)." % (name, _show(value), ", ".join(hosts)))
    for name in COMM_SAME_EVERYWHERE:
        values = {host: envs.get(host, {}).get(name, (None, None))[1] for host in members}
        if len(set(values.values())) > 1:
            shown = ", ".join("%s on %s" % ("unset (CANN's default)" if value is None else _show(value), host)
                              for host, value in values.items())
            errors.append("%s differs between the nodes (%s): the ranks of one communicator need the same value; set "
                          "it once for every node (group_vars or the inventory's vars), not per host." % (name, shown))


def _check_secrets(spec, warnings):
    """Clear-text passwords in the inventory: a warning pointing at Ansible Vault."""
    for host, names in _items(spec, "cleartext_secrets"):
        for name in _names(names):
            warnings.append(
                "%s is set in clear text for %s: keep it in Ansible Vault (ansible-vault encrypt_string, then "
                "./deploy.sh --ask-vault-pass), or better use SSH keys." % (name, host))


def _check_host_keys(spec, warnings):
    """SSH host key checking switched off (llm_solution's config.yaml does): a warning with the fix."""
    for name, options in _items(spec, "host_key_checking_off"):
        for option, hosts in _items({"options": options}, "options"):
            hosts = _names(hosts)
            warnings.append(
                "%s turns SSH host key checking off with %s for %s: a node's changed key would go unnoticed. Remove "
                "the option and collect the nodes' keys once (ssh-keyscan -H <address> >> ~/.ssh/known_hosts, after "
                "checking their fingerprints)." % (name, _show(option), ", ".join(hosts) if hosts else "every node"))


def _check_unknown_variables(spec, warnings):
    known = set(_names(spec.get("known_variables")))
    if not known:
        return
    for scope, names in _items(spec, "variables"):
        unknown = sorted(n for n in _names(names) if n not in known)
        for name in unknown:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
            hint = "did you mean %s?" % close[0] if close else "check its spelling; it is not read by this collection."
            warnings.append("%s (%s) is not a variable this collection knows: %s" % (name, scope, hint))


def _checks(spec, members, errors, warnings):
    """(variables it reads, check) pairs, in the order messages appear."""
    return (
        ("node_num", lambda: _check_node_num(spec, members, errors)),
        ("host names", lambda: _check_host_names(spec, members, errors)),
        ("ports", lambda: _check_ports(spec, errors)),
        ("backend_type, model_type", lambda: _check_choices(spec, errors)),
        ("model_path and other paths", lambda: _check_paths(spec, errors)),
        (_label(spec.get("interface_var", "ray_device")), lambda: _check_interfaces(spec, members, errors)),
        ("CIDRs", lambda: _check_cidrs(spec, errors)),
        ("booleans and switches", lambda: _check_booleans(spec, errors)),
        ("ansible_host", lambda: _check_addresses(spec, members, errors)),
        ("image_name, image_tag, container_name", lambda: _check_container(spec, errors)),
        ("environment maps", lambda: _check_env_names(spec, errors)),
        ("HCCL_*, NCCL_*, GLOO_SOCKET_IFNAME, TP_SOCKET_IFNAME, VLLM_HOST_IP in %s" % ", ".join(COMM_SOURCES),
         lambda: _check_comm_env(spec, members, errors)),
        ("accounts", lambda: _check_accounts(spec, errors)),
        ("serve_tls_names, serve_tls_cert_file, serve_tls_key_file", lambda: _check_tls(spec, errors)),
        ("monitoring_group, monitoring_alert_thresholds, monitoring_engine, monitoring_*_exporter_src",
         lambda: _check_monitoring(spec, members, errors)),
        ("llm_cluster_offline and what it needs", lambda: _check_offline(spec, members, errors)),
        ("serve_watchdog_*", lambda: _check_watchdog(spec, errors)),
        ("model_distribution_locality", lambda: _check_localities(spec, members, errors)),
        ("llm_cluster_serving_groups", lambda: _check_serving_groups(spec, members, errors)),
        ("llm_cluster_fetch_retries, llm_cluster_fetch_delay", lambda: _check_fetch(spec, errors)),
        (", ".join(TUNING_VARS), lambda: _check_tuning(spec, members, errors)),
        ("passwords", lambda: _check_secrets(spec, warnings)),
        (", ".join(SSH_ARG_VARS), lambda: _check_host_keys(spec, warnings)),
        ("variable names", lambda: _check_unknown_variables(spec, warnings)),
    )


def verdict(spec):
    """Return {'errors': [...], 'warnings': [...]} for ``spec``; both empty when the inventory is good.

    ``spec`` keys: head_group, worker_group, groups {name: [hosts]}, all_hosts [hosts], node_num,
    ports {legacy var: value}, cluster_ports {var: value}, port_ranges {var: [first, last]},
    backend_type, model_type, model_path, paths {var: path}, interface_var, interfaces {host: value},
    cidrs {var: value or [values]}, cidr_lists {var: [values]}, booleans {var: value},
    flags {var: 0/1 value}, addresses {host: ansible_host}, container {var: value},
    env_maps {var: {NAME: value}}, comm_env {host: {prepare_env_extra, serve_environment}},
    backend_env {NAME: value} (the backend_type's engine environment), accounts {var: user}, tls {serve_tls_names, serve_tls_cert_file,
    serve_tls_key_file}, monitoring {standalone, group, hosts, thresholds, engine, monitoring_*_exporter_src},
    watchdog {serve_watchdog, serve_watchdog_interval, _timeout, _failures, _start_grace, _max_restarts, _window},
    fetch {llm_cluster_fetch_retries, llm_cluster_fetch_delay}, tuning {host: {prepare_tuning_* set for it}},
    offline {host: {OFFLINE_VARS set for it}}, localities {host: model_distribution_locality},
    serving_groups (llm_cluster_serving_groups), topology (serve_topology), serving_hosts {group: [hosts]},
    cleartext_secrets {host: [vars]}, host_key_checking_off {var: {option: [hosts]}},
    variables {scope: [names]}, known_variables [names].
    Never raises: a check that fails on a value reports it as an error.
    """
    errors = []
    warnings = []
    if not isinstance(spec, dict):
        return {"errors": ["the inventory could not be read: %s instead of a mapping of variables." % _show(spec)],
                "warnings": []}
    try:
        members = _check_groups(spec, errors, warnings)
        if members is None:
            members = _UNKNOWN_MEMBERS
    except Exception as exc:  # pylint: disable=broad-except
        errors.append("the groups could not be read (%s): list the hosts of 'masters' and 'workers' by name."
                      % type(exc).__name__)
        members = []
    for variables, check in _checks(spec, members, errors, warnings):
        try:
            check()
        except Exception as exc:  # pylint: disable=broad-except
            errors.append("%s could not be checked (%s: %s): fix the value's type (a string, a number or a list as "
                          "the sample inventory shows)." % (variables, type(exc).__name__, _show(str(exc))))
    return {"errors": errors, "warnings": warnings}


def validate(spec):
    """Return the list of every error found in ``spec`` (empty when the inventory is good)."""
    return verdict(spec)["errors"]
