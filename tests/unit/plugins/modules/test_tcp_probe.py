# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""tcp_probe on real loopback sockets: reachable, refused, silent peers, and the clock offset from a greeting."""

from __future__ import annotations

import socket
from contextlib import closing
from unittest.mock import patch

import pytest

from ansible_collections.aihost.llm_cluster.plugins.modules import tcp_probe

from ansible_collections.aihost.llm_cluster.tests.unit.plugins.modules.utils import run_module

LOOPBACK = "127.0.0.1"


def refused_port():
    """A port nothing listens on: bound, then closed."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


@pytest.fixture
def silent_port():
    """A listener that accepts into its backlog and never writes."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((LOOPBACK, 0))
    sock.listen(4)
    yield sock.getsockname()[1]
    sock.close()


def clock_from(greeting, sent_at, received_at):
    """read_peer_clock over a socket pair whose far end sent ``greeting``, with the local clock pinned."""
    near, far = socket.socketpair()
    with closing(near), closing(far):
        if greeting is not None:
            far.sendall(greeting)
        else:
            far.shutdown(socket.SHUT_WR)
        with patch.object(tcp_probe.time, "time", side_effect=[sent_at, received_at]):
            return tcp_probe.read_peer_clock(near)


def test_offset_is_the_peer_clock_minus_the_middle_of_the_round_trip():
    # Sent at 100.0, answered at 100.2: the peer read its clock at the middle, 100.1 here.
    assert clock_from(b"llm_cluster-probe 150.100000\n", 100.0, 100.2) == (50.0, 0.1)
    assert clock_from(b"llm_cluster-probe 99.600000\n", 100.0, 100.2) == (-0.5, 0.1)


@pytest.mark.parametrize("greeting", [
    b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n",   # another service on the port
    b"llm_cluster-probe \n",                           # no clock
    b"llm_cluster-probe soon\n",                       # not a number
    b"",                                               # closed without a word
    None,                                              # half-closed
])
def test_no_clock_without_a_probe_greeting(greeting):
    assert clock_from(greeting, 100.0, 100.2) == (None, None)


def test_results_keep_the_target_order_and_name_the_failed_peers(silent_port):
    closed = refused_port()
    result = run_module(tcp_probe.main, dict(targets=[
        dict(name="worker1", address=LOOPBACK, port=silent_port),
        dict(name="worker2", address=LOOPBACK, port=closed),
    ], timeout=2))
    assert result["changed"] is False
    assert [r["name"] for r in result["results"]] == ["worker1", "worker2"]
    first, second = result["results"]
    assert first["reachable"] is True and first["error"] is None and first["port"] == silent_port
    # A silent listener answers the handshake but sends no greeting: no clock offset.
    assert first["clock_offset"] is None and first["clock_uncertainty"] is None
    assert second["reachable"] is False and "refused" in second["error"].lower()
    assert second["address"] == LOOPBACK and second["port"] == closed
    assert result["failed_peers"] == ["worker2"]
    assert isinstance(result["clock"], float)


def test_source_address_that_is_not_local_fails_each_probe():
    result = run_module(tcp_probe.main, dict(targets=[dict(name="head", address=LOOPBACK, port=refused_port())],
                                             source="198.51.100.254", timeout=2))
    [entry] = result["results"]
    assert entry["reachable"] is False and "assign" in entry["error"].lower()
    assert result["failed_peers"] == ["head"]


def test_a_target_without_a_port_is_refused():
    result = run_module(tcp_probe.main, dict(targets=[dict(name="head", address=LOOPBACK)]))
    assert result["failed"] is True and "port" in result["msg"] and "targets" in result["msg"]
