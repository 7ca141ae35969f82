# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Ray membership without Ray's metrics agent, for node_exporter's textfile collector.

Every Ray node's raylet keeps a TCP connection open to the head's GCS port for as long as it is in the cluster.
On the head this reads the kernel's socket tables (/proc/net/tcp and tcp6) and writes, for each member of the
inventory, whether an established connection from its address to the GCS port exists:

    llm_cluster_ray_member_connected{member="worker1",address="10.0.0.12"} 1

No Ray API is called (a driver would register a job in the GCS at every run), and nothing listens. The file is
replaced atomically; node_exporter serves it with the head's other metrics. Configuration (JSON, written by the
monitoring role): {"port": 6379, "members": {"name": "address", ...}, "output": "/path/llm_cluster_ray.prom"}.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
import tempfile
import time

ESTABLISHED = "01"


def _address(hex_address):
    """An address of /proc/net/tcp{,6} ("0100007F:18EB") as (ip, port); IPv4-mapped IPv6 read as IPv4."""
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = ipaddress.IPv4Address(raw[::-1])
    else:
        # Four 32-bit words, each in the host's (little-endian) byte order.
        ip = ipaddress.IPv6Address(b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
    return str(ip), int(port, 16)


def established_peers(tables, port):
    """The remote addresses of the established connections to local ``port`` in the text of socket tables."""
    peers = set()
    for text in tables:
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 4 or fields[3] != ESTABLISHED:
                continue
            try:
                local, remote = _address(fields[1]), _address(fields[2])
            except ValueError:
                continue
            if local[1] == port:
                peers.add(remote[0])
    return peers


def _label(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def exposition(members, peers, port, now):
    """The textfile's content: one gauge per member, the count of members, the time of the reading."""
    lines = ["# HELP llm_cluster_ray_member_connected 1 when the member holds a TCP connection to the head's Ray "
             "GCS port (its raylet is in the cluster), else 0.",
             "# TYPE llm_cluster_ray_member_connected gauge"]
    for name, address in sorted(members.items()):
        try:
            address = str(ipaddress.ip_address(address))
        except ValueError:
            pass
        lines.append('llm_cluster_ray_member_connected{member="%s",address="%s",port="%d"} %d'
                     % (_label(name), _label(address), port, 1 if address in peers else 0))
    lines += ["# HELP llm_cluster_ray_members_expected The members of the inventory's Ray cluster.",
              "# TYPE llm_cluster_ray_members_expected gauge",
              "llm_cluster_ray_members_expected %d" % len(members),
              "# HELP llm_cluster_ray_members_read_timestamp_seconds When the socket tables were read.",
              "# TYPE llm_cluster_ray_members_read_timestamp_seconds gauge",
              "llm_cluster_ray_members_read_timestamp_seconds %.3f" % now]
    return "\n".join(lines) + "\n"


def write_atomically(path, text):
    directory = os.path.dirname(path) or "."
    handle, temporary = tempfile.mkstemp(prefix=".llm_cluster_ray.", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the JSON configuration the monitoring role writes")
    parser.add_argument("--proc", default="/proc", help="where the socket tables are (tests)")
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as handle:
        config = json.load(handle)
    port, members, output = int(config["port"]), dict(config["members"]), config["output"]
    tables = []
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(args.proc, "net", name), encoding="ascii") as handle:
                tables.append(handle.read())
        except OSError:
            continue
    if not tables:
        print("no socket table under %s/net: nothing written" % args.proc, file=sys.stderr)
        return 1
    write_atomically(output, exposition(members, established_peers(tables, port), port, time.time()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
