# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""TCP connect() scan of every port of the given addresses; prints one JSON document.

usage: tcp_scan.py TIMEOUT CONCURRENCY ADDRESS...  ->  {address: {"open": [...], "refused": [...], "silent": N}}
A port is open when the handshake completes, refused when the host answers with a reset, silent when nothing
comes back within TIMEOUT seconds (a firewall drop). Non-blocking sockets under one epoll, CONCURRENCY at a
time. Runs inside a container that is not a cluster member.
"""

import errno
import json
import selectors
import socket
import sys
import time


def scan(addresses, timeout, concurrency):
    todo = [(address, port) for port in range(1, 65536) for address in addresses]
    todo.reverse()
    results = {address: {"open": [], "refused": [], "silent": 0, "errors": {}} for address in addresses}
    selector = selectors.DefaultSelector()
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
    for result in results.values():
        result["open"].sort()
        result["refused"].sort()
    return results


if __name__ == "__main__":
    print(json.dumps(scan(sys.argv[3:], float(sys.argv[1]), int(sys.argv[2])), sort_keys=True))
