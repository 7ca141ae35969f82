# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""port_listener on real sockets of this machine: start, greet, refuse a taken port, stop only its own listener."""

from __future__ import annotations

import os
import socket
from contextlib import closing

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils._procnet import listening_ports
from ansible_collections.aihost.llm_cluster.plugins.modules import port_listener, tcp_probe

from ansible_collections.aihost.llm_cluster.tests.unit.plugins.modules.utils import run_module

LOOPBACK = "127.0.0.1"


def free_port():
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


@pytest.fixture
def held_port():
    """A port this test process listens on (never accepts)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((LOOPBACK, 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


def test_started_listener_greets_with_its_clock_and_stops_on_request():
    port = free_port()
    started = run_module(port_listener.main, dict(port=port, address=LOOPBACK, seconds=120))
    assert started["changed"] is False and started["listening"] is True and started["owners"] == []
    pid = started["pid"]
    assert pid and pid != os.getpid()
    assert [o["pid"] for o in listening_ports()[port]] == [pid]

    # tcp_probe reads the greeting: the peer's clock offset and its uncertainty come back.
    probe = tcp_probe.probe(dict(name="self", address=LOOPBACK, port=port), LOOPBACK, 3.0)
    assert probe["reachable"] is True and probe["error"] is None
    assert isinstance(probe["clock_offset"], float) and probe["clock_uncertainty"] >= 0

    stopped = run_module(port_listener.main, dict(port=port, address=LOOPBACK, state="stopped"))
    assert stopped == dict(changed=False, listening=False, pid=pid, owners=[])
    assert port not in listening_ports()
    # Stopping again finds nothing to stop.
    assert run_module(port_listener.main, dict(port=port, address=LOOPBACK, state="stopped"))["pid"] is None


def test_a_taken_port_reports_its_owner_and_starts_nothing(held_port):
    result = run_module(port_listener.main, dict(port=held_port, address=LOOPBACK, seconds=5))
    assert result["listening"] is False and result["pid"] is None
    assert os.getpid() in [o["pid"] for o in result["owners"]]
    assert [o["pid"] for o in listening_ports()[held_port]] == [os.getpid()]


def test_stop_leaves_a_listener_that_is_not_a_probe_alone(held_port):
    result = run_module(port_listener.main, dict(port=held_port, address=LOOPBACK, state="stopped"))
    assert result["listening"] is False and result["pid"] is None
    assert os.getpid() in [o["pid"] for o in result["owners"]]
    # Still listening: a new connection is accepted into its backlog.
    with closing(socket.create_connection((LOOPBACK, held_port), timeout=2)):
        pass
    assert held_port in listening_ports()


def test_an_address_of_no_interface_fails_with_the_address_and_port():
    port = free_port()
    # 198.51.100.0/24 is TEST-NET-2 (RFC 5737): assigned to no interface of a test machine.
    result = run_module(port_listener.main, dict(port=port, address="198.51.100.254", seconds=5))
    assert result["failed"] is True
    assert result["msg"].startswith("cannot bind 198.51.100.254:%d: " % port)
    assert port not in listening_ports()


def test_state_is_checked():
    result = run_module(port_listener.main, dict(port=1, state="running"))
    assert result["failed"] is True and "state" in result["msg"] and "started, stopped" in result["msg"]
