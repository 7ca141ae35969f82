# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""TCP connect() scan of every port of the given addresses; prints one JSON document.

usage: tcp_scan.py TIMEOUT CONCURRENCY ADDRESS...
  ->  {address: {"open": [...], "refused": [...], "reset": [...], "unreachable": {code: count}, "silent": N,
                 "errors": {port: errno name}}}

A port is open when the handshake completes, silent when nothing comes back within TIMEOUT seconds (a
firewall's drop, or a reject whose ICMP the kernel rate-limited). connect() reads a reset and an ICMP
port-unreachable alike (both ECONNREFUSED): a firewall's reject looks like a closed port. So the scan also
reads every ICMP destination-unreachable that reaches this host (a raw socket: CAP_NET_RAW, which Docker gives
a container by default) and matches the TCP header each one quotes (RFC 792) to the port it answers:
``refused`` lists every refused port, ``reset`` those no ICMP answered (the host's TCP stack itself refused:
the port got through every firewall), ``unreachable`` counts the ICMP answers per code (3 port, 13 admin
prohibited, 10 host prohibited...). Runs inside a container that is not a cluster member.
"""

import collections
import errno
import json
import selectors
import socket
import struct
import sys
import time

ICMP_UNREACHABLE = 3
CODES = {0: "net", 1: "host", 3: "port", 9: "net-prohibited", 10: "host-prohibited", 13: "admin-prohibited"}


def quoted_tcp(packet):
    """(code, destination address, destination port) of an ICMP destination-unreachable about a TCP segment, in
    an IPv4 packet as a raw socket reads it (its IP header first); None for anything else."""
    if len(packet) < 20:
        return None
    outer = (packet[0] & 0x0F) * 4
    icmp = packet[outer:]
    if len(icmp) < 8 + 20 or icmp[0] != ICMP_UNREACHABLE:
        return None
    inner = icmp[8:]
    inner_length = (inner[0] & 0x0F) * 4
    # The quoted datagram: its IP header and at least the first 8 bytes of its payload (the ports).
    if inner[9] != socket.IPPROTO_TCP or len(inner) < inner_length + 4:
        return None
    dummy, port = struct.unpack("!HH", inner[inner_length:inner_length + 4])
    return icmp[1], socket.inet_ntoa(inner[16:20]), port


def icmp_socket():
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    sock.setblocking(False)
    return sock


def drain(sock, answered):
    """Read every ICMP answer queued on the raw socket into ``answered`` ({(address, port): code})."""
    while True:
        try:
            packet = sock.recv(65535)
        except BlockingIOError:
            return
        quoted = quoted_tcp(packet)
        if quoted:
            code, address, port = quoted
            answered[(address, port)] = code


def scan(addresses, timeout, concurrency, ports=range(1, 65536)):
    # Open before the first SYN: an ICMP reaches a raw socket only if it exists when the ICMP arrives.
    icmp = icmp_socket()
    todo = [(address, port) for port in ports for address in addresses]
    todo.reverse()
    results = {address: {"open": [], "refused": [], "silent": 0, "errors": {}} for address in addresses}
    answered = {}
    selector = selectors.DefaultSelector()
    selector.register(icmp, selectors.EVENT_READ)
    pending = {}
    while todo or pending:
        while todo and len(pending) < concurrency:
            address, port = todo.pop()
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            code = sock.connect_ex((address, port))
            if code not in (0, errno.EINPROGRESS):
                results[address]["errors"][str(port)] = errno.errorcode.get(code, str(code))
                sock.close()
                continue
            pending[sock] = (address, port, time.monotonic() + timeout)
            selector.register(sock, selectors.EVENT_WRITE)
        for key, dummy in selector.select(timeout=0.05):
            sock = key.fileobj
            if sock is icmp:
                drain(icmp, answered)
                continue
            address, port, dummy = pending.pop(sock)
            selector.unregister(sock)
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code == 0:
                results[address]["open"].append(port)
            elif code == errno.ECONNREFUSED:
                results[address]["refused"].append(port)
            else:
                results[address]["errors"][str(port)] = errno.errorcode.get(code, str(code))
            sock.close()
        now = time.monotonic()
        for sock, (address, port, deadline) in list(pending.items()):
            if now >= deadline:
                del pending[sock]
                selector.unregister(sock)
                sock.close()
                results[address]["silent"] += 1
    # The kernel queues an ICMP on the raw socket before the TCP socket it refuses learns of it.
    drain(icmp, answered)
    icmp.close()
    for address, result in results.items():
        result["open"].sort()
        result["refused"].sort()
        result["reset"] = [port for port in result["refused"] if (address, port) not in answered]
        result["unreachable"] = dict(collections.Counter(
            CODES.get(code, str(code)) for (where, dummy), code in answered.items() if where == address))
    return results


if __name__ == "__main__":
    print(json.dumps(scan(sys.argv[3:], float(sys.argv[1]), int(sys.argv[2])), sort_keys=True))
