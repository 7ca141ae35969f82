# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE to the collection: systemd command-line escaping and the address sets of the firewall table.

Pure functions, no Ansible imports, so the filters and the unit tests share them.
"""

from __future__ import annotations

import ipaddress
import json
import re

# A word made only of these needs no quotes in a systemd command line.
_PLAIN = re.compile(r"^[A-Za-z0-9_@%$+=:,./-]+$")
_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def systemd_word(value):
    """One argument of an ExecStart= line, as systemd reads it back unchanged.

    systemd resolves %-specifiers in the whole line and expands $VAR / ${VAR} in ExecStart=: both are doubled.
    A word with anything else than [A-Za-z0-9_@%$+=:,./-] is single-quoted; inside the quotes systemd reads C
    escapes, so a backslash, a quote and every control character (a newline would end the directive and start
    another one) are written as escapes.
    """
    word = str(value).replace("%", "%%").replace("$", "$$")
    if _PLAIN.match(word):
        return word
    out = []
    for char in word:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append("\\x%02x" % ord(char))
        else:
            out.append(char)
    return "'" + "".join(out) + "'"


def systemd_exec_args(argv, joiner=" \\\n    "):
    """argv as the words of one ExecStart= command; one word per continued line by default."""
    if not argv:
        raise ValueError("an empty command line")
    words = [systemd_word(word) for word in argv]
    if words[0][:1] in "@-:+!":
        # A leading @ - : + ! is a prefix of systemd, not part of the path.
        raise ValueError("the command %r starts with a character systemd reads as a prefix" % str(argv[0]))
    return joiner.join(words)


def systemd_environment(name, value):
    """One Environment= assignment: the name must be a variable name, the value is escaped like a word."""
    name = str(name)
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        raise ValueError("%r is not an environment variable name" % name)
    # Environment= does not expand $VAR, but it resolves % specifiers and C escapes inside quotes.
    value = str(value).replace("%", "%%")
    out = []
    for char in value:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char == '"':
            out.append('\\"')
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append("\\x%02x" % ord(char))
        else:
            out.append(char)
    return '"%s=%s"' % (name, "".join(out))


def address_sets(cidrs, variable):
    """Split addresses and networks into the ipv4 and ipv6 elements of an nftables set.

    Host bits are cleared (10.0.0.7/24 -> 10.0.0.0/24); anything that is not an address or a network is a
    ValueError naming the variable.
    """
    if isinstance(cidrs, (str, bytes)) or not isinstance(cidrs, (list, tuple)):
        raise ValueError("%s must be a list of addresses or CIDRs, got %r" % (variable, cidrs))
    sets = {"ipv4": [], "ipv6": []}
    for item in cidrs:
        try:
            net = ipaddress.ip_network(str(item).strip(), strict=False)
        except ValueError:
            raise ValueError("%s: %r is not an IPv4/IPv6 address or CIDR (like 10.0.0.0/24)" % (variable, item))
        text = str(net.network_address) if net.prefixlen == net.max_prefixlen else str(net)
        key = "ipv4" if net.version == 4 else "ipv6"
        if text not in sets[key]:
            sets[key].append(text)
    return sets


def _port_spec(value, variable):
    text = str(value).strip()
    match = re.match(r"^(\d{1,5})(?:-(\d{1,5}))?$", text)
    if isinstance(value, bool) or not match:
        raise ValueError("%s: port %r is not a port or a range like 9100-9110" % (variable, value))
    low, high = int(match.group(1)), int(match.group(2) or match.group(1))
    if not 1 <= low <= high <= 65535:
        raise ValueError("%s: port %r is outside 1-65535 or its range runs backwards" % (variable, value))
    return str(low) if low == high else "%d-%d" % (low, high)


def allow_rules(entries, variable="llm_cluster_firewall_allow"):
    """The site's extra openings: [{port, protocol (tcp|udp, default tcp), sources (CIDRs; [] = any)}].

    Returns [{protocol, port, ipv4, ipv6, any}] ready for the table, or raises ValueError naming the entry.
    """
    if not isinstance(entries, (list, tuple)):
        raise ValueError("%s must be a list of {port, protocol, sources}, got %r" % (variable, entries))
    rules = []
    for index, entry in enumerate(entries):
        where = "%s[%d]" % (variable, index)
        if not isinstance(entry, dict) or "port" not in entry:
            raise ValueError("%s must be a mapping with a port (and protocol, sources), got %r" % (where, entry))
        unknown = sorted(set(entry) - {"port", "protocol", "sources"})
        if unknown:
            raise ValueError("%s: unknown key(s) %s; use port, protocol, sources" % (where, ", ".join(unknown)))
        protocol = str(entry.get("protocol") or "tcp").lower()
        if protocol not in ("tcp", "udp"):
            raise ValueError("%s: protocol %r; use tcp or udp" % (where, entry.get("protocol")))
        sources = address_sets(list(entry.get("sources") or []), where + ".sources")
        rules.append({"protocol": protocol, "port": _port_spec(entry["port"], where), "ipv4": sources["ipv4"],
                      "ipv6": sources["ipv6"], "any": not (sources["ipv4"] or sources["ipv6"])})
    return rules


def firewalld_rule(item, port=None):
    """A firewalld rich rule from {family, address[, port, protocol]}: accept from the address (on the port)."""
    parts = ["rule"]
    if item.get("address"):
        parts.append('family="%s" source address="%s"' % (item["family"], item["address"]))
    port = item.get("port", port)
    if port is not None:
        parts.append('port port="%s" protocol="%s"' % (port, item.get("protocol") or "tcp"))
    parts.append("accept")
    return " ".join(parts)


def firewalld_record(zone, rules):
    """What the role records of the rich rules it keeps in a zone ('' is firewalld's default zone)."""
    return {"rules": [{"zone": str(zone or ""), "rule": str(rule)} for rule in sorted(set(rules))]}


def firewalld_recorded(text, path):
    """The [{zone, rule}] entries of a record firewalld_record wrote, from the file's text ('' when the file is
    missing). Anything else names the file: the rules it listed can then not be told from the site's own."""
    if not text:
        return []
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ValueError("%s is not the record of firewalld rules this role writes (%s): remove the rules of members "
                         "that left by hand (firewall-cmd --list-rich-rules), then the file" % (path, exc))
    entries = doc.get("rules") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("zone"), str) and isinstance(e.get("rule"), str) and e["rule"]
            for e in entries):
        raise ValueError("%s is not the record of firewalld rules this role writes (no list of zone and rule): "
                         "remove the rules of members that left by hand (firewall-cmd --list-rich-rules), then the file"
                         % path)
    return [{"zone": e["zone"], "rule": e["rule"]} for e in entries]


def firewalld_stale(recorded, zone, rules):
    """The recorded entries the zone's wanted rules no longer hold (a member that left, an address changed, another
    zone), in the record's order."""
    wanted = firewalld_record(zone, rules)["rules"]
    return [entry for entry in recorded if entry not in wanted]


def firewalld_union(recorded, zone, rules):
    """A record of what was recorded and what is about to be added: written before any rule is added, so that a
    run stopped halfway still knows every rule it may have left."""
    entries = firewalld_record(zone, rules)["rules"]
    return {"rules": entries + [entry for entry in recorded if entry not in entries]}
