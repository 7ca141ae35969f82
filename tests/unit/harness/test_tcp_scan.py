# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The non-member scan of the Molecule scenarios (molecule/shared/tcp_scan.py).

connect() reads a firewall's ICMP port-unreachable and a closed port's reset alike; the scan tells them apart
by the ICMP answers it reads on a raw socket. Its parser against the kernel's own ICMP answers (captures in
tests/fixtures/system, README there), and the scan itself against a listener, a closed port and a firewall's
rejects in a network namespace of its own (root: a raw socket, and nftables for the rejects).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCAN = os.path.join(ROOT, "molecule", "shared", "tcp_scan.py")
CAPTURES = os.path.join(ROOT, "tests", "fixtures", "system")
_SPEC = importlib.util.spec_from_file_location("tcp_scan", SCAN)
tcp_scan = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(tcp_scan)

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="a raw ICMP socket needs root (CI runs as root)")


def capture(name):
    with open(os.path.join(CAPTURES, name), "rb") as handle:
        return handle.read()


@pytest.mark.parametrize("name, expected", [
    ("icmp-iptables-reject-port-unreachable.bin", (3, "10.99.0.2", 5)),
    ("icmp-nft-reject-admin-prohibited.bin", (13, "10.99.0.2", 6)),
])
def test_the_parser_reads_the_code_and_the_quoted_destination_of_a_real_reject(name, expected):
    assert tcp_scan.quoted_tcp(capture(name)) == expected


def test_the_parser_ignores_what_is_not_a_tcp_destination_unreachable():
    packet = bytearray(capture("icmp-iptables-reject-port-unreachable.bin"))
    assert tcp_scan.quoted_tcp(bytes(packet[:40])) is None  # cut inside the quoted header
    echo_reply = bytearray(packet)
    echo_reply[20] = 0
    assert tcp_scan.quoted_tcp(bytes(echo_reply)) is None
    udp = bytearray(packet)
    udp[20 + 8 + 9] = socket.IPPROTO_UDP
    assert tcp_scan.quoted_tcp(bytes(udp)) is None


@ROOT_ONLY
def test_a_listener_is_open_and_a_closed_port_is_a_reset():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    free = closed.getsockname()[1]
    closed.close()
    try:
        result = tcp_scan.scan(["127.0.0.1"], 1, 100, ports=[port, free])["127.0.0.1"]
    finally:
        listener.close()
    assert result["open"] == [port]
    assert result["refused"] == [free] and result["reset"] == [free]
    assert result["unreachable"] == {} and result["silent"] == 0


NAMESPACE = r"""
set -e
ip link set lo up
nft add table inet t
nft add chain inet t in '{ type filter hook input priority 0; }'
nft add rule inet t in tcp dport 5 reject with icmp type port-unreachable
nft add rule inet t in tcp dport 6 reject with icmpx type admin-prohibited
nft add rule inet t in tcp dport 8 drop
exec "$0" -c 'import json, sys; sys.path.insert(0, sys.argv[1]); import tcp_scan
print(json.dumps(tcp_scan.scan(["127.0.0.1"], 1, 100, ports=[5, 6, 7, 8])))' "$1"
"""


@ROOT_ONLY
@pytest.mark.skipif(not (shutil.which("unshare") and shutil.which("nft")), reason="needs unshare and nft")
def test_a_firewall_s_reject_is_told_from_a_reset_in_a_namespace_of_its_own():
    # A new network namespace: the rules touch nothing of the machine's own.
    out = subprocess.run(["unshare", "--net", "bash", "-c", NAMESPACE, sys.executable, os.path.dirname(SCAN)],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    result = json.loads(out.splitlines()[-1])["127.0.0.1"]
    # Port 5: refused by the reject's ICMP, not a reset. 6: admin-prohibited (EHOSTUNREACH). 7: nothing
    # rejects and nothing listens, the host's reset. 8: dropped, silent.
    assert result["refused"] == [5, 7]
    assert result["reset"] == [7]
    assert result["errors"] == {"6": "EHOSTUNREACH"}
    assert result["unreachable"] == {"port": 1, "admin-prohibited": 1}
    assert result["silent"] == 1 and result["open"] == []
