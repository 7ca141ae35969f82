# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The head's Ray membership reading (roles/monitoring/files/llm_cluster_ray_members.py): established connections
to the GCS port in the kernel's own socket tables, live sockets of this test included (IPv4, IPv6, IPv4-mapped)."""

from __future__ import annotations

import json
import os
import socket
import stat

import pytest

from ansible_collections.aihost.llm_cluster.tests.unit.role_files import load_role_file

MEMBERS = load_role_file("monitoring", "llm_cluster_ray_members.py")

# Rows as the kernel writes them (include/net/tcp_states.h: 01 ESTABLISHED, 0A LISTEN, 06 TIME_WAIT): the head
# 10.0.0.10 with its GCS on 6379 (0x18EB); worker1 10.0.0.11 connected, worker2 10.0.0.12 only in TIME_WAIT, a
# connection from worker2 to another port, and the head's own raylet.
TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0A00000A:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 31337 1 0000000000000000 100 0 0 10 0
   1: 0A00000A:18EB 0B00000A:C350 01 00000000:00000000 00:00000000 00000000   999        0 5555 1 0000000000000000 20 4 1 10 -1
   2: 0A00000A:18EB 0C00000A:C351 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
   3: 0A00000A:1F40 0C00000A:C352 01 00000000:00000000 00:00000000 00000000   999        0 5556 1 0000000000000000 20 4 1 10 -1
   4: 0A00000A:18EB 0A00000A:D000 01 00000000:00000000 00:00000000 00000000   999        0 5557 1 0000000000000000 20 4 1 10 -1
"""


def test_only_established_connections_to_the_gcs_port_count():
    assert MEMBERS.established_peers([TCP], 6379) == {"10.0.0.11", "10.0.0.10"}
    text = MEMBERS.exposition({"master1": "10.0.0.10", "worker1": "10.0.0.11", "worker2": "10.0.0.12"},
                              MEMBERS.established_peers([TCP], 6379), 6379, 1700000000.0)
    assert 'llm_cluster_ray_member_connected{member="master1",address="10.0.0.10",port="6379"} 1' in text
    assert 'llm_cluster_ray_member_connected{member="worker1",address="10.0.0.11",port="6379"} 1' in text
    assert 'llm_cluster_ray_member_connected{member="worker2",address="10.0.0.12",port="6379"} 0' in text
    assert "llm_cluster_ray_members_expected 3\n" in text
    assert text.count("# TYPE ") == 3 and text.endswith("\n")


def test_a_hostile_member_name_stays_inside_its_label():
    text = MEMBERS.exposition({'w"1\\\n} 1\nfake 2': "10.0.0.11"}, set(), 6379, 0.0)
    line = [row for row in text.splitlines() if row.startswith("llm_cluster_ray_member_connected{")]
    assert line == ['llm_cluster_ray_member_connected{member="w\\"1\\\\\\n} 1\\nfake 2",address="10.0.0.11",'
                    'port="6379"} 0']


def _connected_pair(family, listen, connect):
    server = socket.socket(family, socket.SOCK_STREAM)
    server.bind((listen, 0))
    server.listen(1)
    client = socket.create_connection((connect, server.getsockname()[1]))
    accepted, _peer = server.accept()
    return server, client, accepted


@pytest.mark.parametrize("family, listen, connect, member", [
    (socket.AF_INET, "127.0.0.1", "127.0.0.1", "127.0.0.1"),
    (socket.AF_INET6, "::1", "::1", "::1"),
    # A dual-stack listener: the kernel writes the IPv4 client as ::ffff:127.0.0.1 in tcp6.
    (socket.AF_INET6, "::", "127.0.0.1", "127.0.0.1"),
])
def test_the_kernel_s_own_tables_show_a_live_connection_and_not_a_missing_one(
        tmp_path, family, listen, connect, member):
    if family == socket.AF_INET6 and not socket.has_ipv6:
        pytest.fail("this machine has no IPv6: the tcp6 table cannot be read live")
    server, client, accepted = _connected_pair(family, listen, connect)
    try:
        port = server.getsockname()[1]
        config = tmp_path / "ray_members.json"
        output = tmp_path / "llm_cluster_ray.prom"
        config.write_text(json.dumps({"port": port, "members": {"head": member, "gone": "192.0.2.99"},
                                      "output": str(output)}), encoding="utf-8")
        assert MEMBERS.main(["--config", str(config)]) == 0
        text = output.read_text(encoding="utf-8")
        assert 'member="head",address="%s",port="%d"} 1' % (member, port) in text, text
        assert 'member="gone",address="192.0.2.99",port="%d"} 0' % port in text, text
        assert stat.S_IMODE(os.stat(output).st_mode) == 0o644
        assert [name for name in os.listdir(tmp_path) if name.startswith(".llm_cluster_ray.")] == []
    finally:
        for sock in (accepted, client, server):
            sock.close()
    # The connection closed: the next reading says so.
    assert MEMBERS.main(["--config", str(config)]) == 0
    assert 'member="head",address="%s",port="%d"} 1' % (member, port) not in output.read_text(encoding="utf-8")


def test_without_socket_tables_nothing_is_written(tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"port": 6379, "members": {}, "output": str(tmp_path / "out.prom")}), encoding="utf-8")
    assert MEMBERS.main(["--config", str(config), "--proc", str(tmp_path / "none")]) == 1
    assert not (tmp_path / "out.prom").exists()
    assert "no socket table" in capsys.readouterr().err
