# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The perimeter after the whole deploy.yml (prepare, Ray, model, the engine serving behind Ray).

A container on the nodes' network that is in no inventory group (its address inside
llm_cluster_client_cidrs, as a client's would be) connects to every TCP port of every node: only the API
port of the head opens (and SSH where a node runs it), and no port even resets. On every node each
listening socket of an llm-cluster-* unit (Ray's, the engine's and its Ray workers') is on loopback or
behind the table. Runs before test_serve.py, which restarts and removes the engine.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import testinfra

testinfra_hosts = ["ansible://master1"]

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
NAMES = ["master1", "worker1", "worker2"]
API_PORT = 8000
_SHARED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "shared")
_SPEC = importlib.util.spec_from_file_location("perimeter", os.path.join(_SHARED, "perimeter.py"))
perimeter = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(perimeter)


@pytest.fixture(scope="module")
def nodes():
    return {name: testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY)) for name in NAMES}


@pytest.fixture(scope="module")
def addresses(nodes):
    return {name: node.check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0] for name, node in nodes.items()}


@pytest.fixture(scope="module")
def outsider():
    with perimeter.Outsider("llmc-default-outsider", "master1") as container:
        yield container


def test_a_non_member_reaches_only_the_api_port_of_the_head(nodes, addresses, outsider):
    # Ours listen beyond loopback: the engine's API, Ray's GCS and client server, the raylets.
    listening = nodes["master1"].check_output("ss -Htln")
    assert ":%d " % API_PORT in listening and ":6379 " in listening and ":10001 " in listening
    scan = outsider.scan(addresses.values())
    for name, address in addresses.items():
        sshd = nodes[name].run("ss -Htln 'sport = :22'").stdout.strip() != ""
        expected = sorted(([22] if sshd else []) + ([API_PORT] if name == "master1" else []))
        assert scan[address]["open"] == expected, (name, scan[address]["open"])
        # Dropped, not refused: nothing else on the cluster interface answers a non-member.
        assert scan[address]["refused"] == [] and scan[address]["errors"] == {}, (name, scan[address])
        assert scan[address]["unreachable"] == {}, (name, scan[address]["unreachable"])
        assert scan[address]["silent"] == 65535 - len(expected)


def test_listener_audit_finds_every_socket_of_ours_guarded_with_the_engine_running(nodes, addresses):
    for name, node in nodes.items():
        rows = perimeter.listener_audit(node, addresses[name])
        print(perimeter.audit_lines(name, rows))
        ours = [r for r in rows if r["ours"]]
        assert any(not r["address"].startswith("127.") for r in ours), (name, rows)
        assert [r for r in ours if not r["guarded"]] == [], name
    head = [r for r in perimeter.listener_audit(nodes["master1"], addresses["master1"]) if r["ours"]]
    # The engine's own unit holds the API port: the audit judged the engine, not only Ray.
    assert any(r["port"] == API_PORT and "llm-cluster-engine.service" in r["units"] for r in head), head
