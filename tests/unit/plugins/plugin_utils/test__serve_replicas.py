# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The replicas topology's plan: one whole engine per node at its own address, vLLM's router on the head."""

from __future__ import annotations

import pytest

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _serve


def nodes(count, accelerator="cpu", devices=0, family=4):
    made = []
    for i in range(count):
        address = "10.0.0.%d" % (i + 1) if family == 4 else "fd00::%x" % (i + 1)
        made.append({"host": "n%d" % i, "address": address, "accelerator": accelerator, "count": devices})
    return made


def settings(**extra):
    base = {"topology": "replicas", "model_path": "/srv/m", "model_name": "tiny", "port": 8000,
            "replica_port": 8001, "router_port": 8002, "api_args": ["--ssl-certfile", "/c", "--ssl-keyfile", "/k"],
            "extra_args": ["--middleware", "llm_cluster_api_auth.ApiKeyGuard"]}
    base.update(extra)
    return base


def test_every_node_serves_its_own_engine_on_its_address_and_the_router_lists_them_all():
    plan = _serve.plan(nodes(3), settings())
    assert plan["errors"] == []
    assert plan["topology"] == "replicas" and plan["dp"] == 1 and plan["tp"] == 1
    assert plan["engine_hosts"] == plan["install_hosts"] == ["n0", "n1", "n2"]
    for index, host in enumerate(["n0", "n1", "n2"]):
        entry = plan["nodes"][host]
        assert entry["role"] == "replica"
        assert entry["url"] == "http://10.0.0.%d:8001" % (index + 1)
        assert entry["argv"] == ["vllm", "serve", "/srv/m", "--served-model-name", "tiny",
                                 "--host", "10.0.0.%d" % (index + 1), "--port", "8001", "--tensor-parallel-size", "1",
                                 "--middleware", "llm_cluster_api_auth.ApiKeyGuard"]
    # TLS ends at the front on the head: no replica takes the certificate.
    assert not any("--ssl-certfile" in entry["argv"] for entry in plan["nodes"].values())
    # The router's metrics on the head's cluster address (the monitoring host scrapes them; members only).
    assert plan["router"] == {"host": "n0", "port": 8002, "metrics_address": "10.0.0.1", "metrics_port": 8003,
                              "workers": ["http://10.0.0.1:8001", "http://10.0.0.2:8001", "http://10.0.0.3:8001"]}


def test_an_ipv6_cluster_address_is_bracketed_in_the_replica_s_url():
    plan = _serve.plan(nodes(2, family=6), settings())
    assert plan["router"]["workers"] == ["http://[fd00::1]:8001", "http://[fd00::2]:8001"]
    # vllm-router takes an IPv6 --prometheus-host without brackets (0.1.17 listened on [::1] given "::1").
    assert plan["router"]["metrics_address"] == "fd00::1"
    assert plan["nodes"]["n1"]["argv"][5:9] == ["--host", "fd00::2", "--port", "8001"]


def test_a_replica_takes_its_node_s_devices_and_a_node_with_fewer_is_named():
    npus = nodes(3, "npu", 8)
    npus[2]["count"] = 4
    plan = _serve.plan(npus, settings(backend="vllm_ascend"))
    assert plan["tp"] == 8
    assert plan["errors"] == ["n2: serve_tensor_parallel_size 8 x serve_pipeline_parallel_size 1 needs 8 devices, the "
                              "node has 4; every replica is one node's engine: lower them, or take the node out of "
                              "the group"]
    plan = _serve.plan(npus, settings(backend="vllm_ascend", tensor_parallel_size=4))
    assert plan["errors"] == [] and plan["nodes"]["n2"]["argv"][9:11] == ["--tensor-parallel-size", "4"]


@pytest.mark.parametrize("ports", [{"replica_port": 8000}, {"router_port": 8001}, {"router_port": 8000}])
def test_the_three_ports_of_the_head_must_differ(ports):
    plan = _serve.plan(nodes(2), settings(**ports))
    assert len(plan["errors"]) == 1
    assert plan["errors"][0].startswith("serve_port, serve_replica_port and serve_router_port must differ (")
    assert plan["nodes"] == {}


def test_a_node_without_a_cluster_address_is_named():
    missing = nodes(2)
    missing[1]["address"] = ""
    plan = _serve.plan(missing, settings())
    assert plan["errors"] == ["n1: no cluster address (LLM_CLUSTER_NODE_ADDRESS): the router reaches each replica "
                              "there; run the prepare step first"]


def test_replicas_is_never_chosen_by_auto_and_unknown_names_list_it():
    assert _serve.resolve_topology("auto", "vllm", 4) == "ray"
    assert _serve.resolve_topology("replicas", "vllm", 1) == "replicas"
    with pytest.raises(ValueError, match="single, ray, dp, replicas"):
        _serve.resolve_topology("replica", "vllm", 2)


def test_a_cpu_tier_is_counted_once_per_replica():
    plan = _serve.plan(nodes(2), settings(kv_offload_size_gib=2))
    assert plan["errors"] == []
    assert {entry["kv_tier_bytes"] for entry in plan["nodes"].values()} == {2 * 1024 ** 3}


def test_the_status_document_names_the_router_and_every_replica():
    plan = _serve.plan(nodes(2), settings())
    doc = _serve.status([{"host": "n0", "address": "10.0.0.1"}, {"host": "n1", "address": "10.0.0.2"}], plan,
                        {"url": "http://10.0.0.1:8000", "probe": {"ready": True}})
    assert doc["topology"] == "replicas"
    assert doc["router"] == {"host": "n0", "port": 8002, "metrics_address": "10.0.0.1", "metrics_port": 8003,
                             "workers": ["http://10.0.0.1:8001", "http://10.0.0.2:8001"]}
    assert [n["role"] for n in doc["nodes"]] == ["replica", "replica"]
    single = _serve.plan(nodes(1), {"topology": "single", "model_path": "/m", "model_name": "m"})
    assert "router" not in _serve.status([{"host": "n0"}], single, {})


def test_the_status_shows_the_head_replica_s_watchdog_and_every_other_replica_s():
    plan = _serve.plan(nodes(2), settings())
    state = {"result": "ok", "failures": 0, "restarts": []}
    doc = _serve.status([{"host": "n0", "address": "10.0.0.1", "watchdog": {"enabled": True, "state": state}},
                         {"host": "n1", "address": "10.0.0.2", "watchdog": {"enabled": True, "state": dict(state, result="failing")}}],
                        plan, {"url": "http://10.0.0.1:8000", "probe": {"ready": True}})
    # Not "off": there is no API-role node with replicas, the head's replica's watchdog is the endpoint's.
    assert doc["watchdog"]["result"] == "ok"
    table = _serve.status_table(doc)
    assert "watchdog: ok, 0 restart(s) in its window" in table
    assert "  n1 (replica): watchdog: failing, 0 restart(s) in its window" in table
    assert not any(line.startswith("  n0 (") for line in table)


def reads(listed, health):
    """status.yml's uri results: the router's GET /workers (None: no answer) and each replica's GET /health."""
    router = ({"status": 200, "json": {"workers": [{"url": url, "is_healthy": True} for url in listed]}}
              if listed is not None else {"status": -1, "msg": "Connection refused"})
    return {"router_read": router, "replica_reads": [{"item": url, "status": status} for url, status in health.items()]}


def test_the_status_names_a_replica_the_router_no_longer_sends_requests_to():
    # A rolling restart that stopped on n1: its replica is out of the router, its engine answers /health.
    plan = _serve.plan(nodes(3), settings())
    doc = _serve.status(nodes(3), plan, dict(reads(["http://10.0.0.3:8001", "http://10.0.0.1:8001"],
                                                   {"http://10.0.0.1:8001": 200, "http://10.0.0.2:8001": 200,
                                                    "http://10.0.0.3:8001": -1}),
                                             url="http://10.0.0.1:8000", probe={"ready": True}))
    assert doc["router"]["answered"] is True
    assert doc["router"]["listed"] == ["http://10.0.0.1:8001", "http://10.0.0.3:8001"]
    assert [(n["host"], n["replica"]["routed"], n["replica"]["health"]) for n in doc["nodes"]] == [
        ("n0", True, 200), ("n1", False, 200), ("n2", True, 0)]
    line = [line for line in _serve.status_table(doc) if line.startswith("router: ")]
    assert line == ["router: sends requests to 2 of 3 replica(s); not routed: n1 (http://10.0.0.2:8001, health 200): "
                    "./deploy.sh -t serve puts every planned replica back; routed but not healthy: n2 (health no answer)"]


def test_the_status_names_the_vllm_release_of_each_replica_when_they_differ():
    # A rollout of another release that stopped after n0: n0 answers GET /version with 0.31.0, n1 with 0.32.0,
    # n2 not at all (its engine is down).
    plan = _serve.plan(nodes(3), settings())
    urls = ["http://10.0.0.1:8001", "http://10.0.0.2:8001", "http://10.0.0.3:8001"]
    versions = [{"item": urls[0], "status": 200, "json": {"version": "0.31.0"}},
                {"item": urls[1], "status": 200, "json": {"version": "0.32.0"}},
                {"item": urls[2], "status": -1, "msg": "Connection refused"}]
    doc = _serve.status(nodes(3), plan, dict(reads(urls[:2], {urls[0]: 200, urls[1]: 200, urls[2]: -1}),
                                             replica_versions=versions, probe={"ready": True}))
    assert [n["replica"]["release"] for n in doc["nodes"]] == ["0.31.0", "0.32.0", None]
    table = _serve.status_table(doc)
    assert "replicas on 2 vLLM releases: 0.31.0 on n0; 0.32.0 on n1: a rolling restart that stopped midway, or not " \
        "yet run on every node" in table
    # One release (or none read: no key, the serve step's own report): no line.
    same = [dict(reply, json={"version": "0.32.0"}) if reply["status"] == 200 else reply for reply in versions]
    for reads_of_versions in (same, []):
        doc = _serve.status(nodes(3), plan, dict(reads(urls, {url: 200 for url in urls}),
                                                 replica_versions=reads_of_versions, probe={"ready": True}))
        assert not any(line.startswith("replicas on ") for line in _serve.status_table(doc))


def test_the_status_says_when_the_router_does_not_answer_and_what_it_routes_that_is_not_planned():
    plan = _serve.plan(nodes(2), settings())
    down = _serve.status(nodes(2), plan, dict(reads(None, {}), probe={"ready": False}))
    assert down["router"]["answered"] is False
    assert [n["replica"]["routed"] for n in down["nodes"]] == [None, None]
    assert "router: no answer from its API on n0 (127.0.0.1:8002): journalctl -u llm-cluster-router there" in \
        _serve.status_table(down)
    healthy = {"http://10.0.0.1:8001": 200, "http://10.0.0.2:8001": 200}
    extra = _serve.status(nodes(2), plan, dict(reads(list(healthy) + ["http://10.0.0.9:8001"], healthy),
                                               probe={"ready": True}))
    assert "router: sends requests to 2 of 2 replica(s); routed but not planned: http://10.0.0.9:8001" in \
        _serve.status_table(extra)
    # Not read (the serve step's own report; a skipped read has no status): no line, no field.
    quiet = _serve.status(nodes(2), plan, {"probe": {"ready": True}, "router_read": {"skipped": True}, "replica_reads": []})
    assert "answered" not in quiet["router"] and not any(n.get("replica") for n in quiet["nodes"])
    assert not any(line.startswith("router:") for line in _serve.status_table(quiet))


def test_the_cluster_is_not_healthy_while_a_replica_is_out_of_the_router():
    plan = _serve.plan(nodes(2), settings())
    healthy = {"http://10.0.0.1:8001": 200, "http://10.0.0.2:8001": 200}
    ray = {"complete": True, "nodes": []}
    accelerators = {"n0": {"type": "none", "devices": []}, "n1": {"type": "none", "devices": []}}

    def summary(listed, health=None):
        doc = _serve.status(nodes(2), plan, dict(reads(listed, health or healthy), probe={"ready": True}))
        return _serve.cluster_status(ray, doc, accelerators)

    assert summary(list(healthy))["healthy"] is True
    out = summary(["http://10.0.0.1:8001"])
    assert out["healthy"] is False and [n["replica"]["routed"] for n in out["nodes"]] == [True, False]
    table = _serve.cluster_status_table(out)
    assert any(line.startswith("router: sends requests to 1 of 2 replica(s); not routed: n1 ") for line in table)
    assert table[-1] == "cluster: NOT healthy"
    assert summary(list(healthy), dict(healthy, **{"http://10.0.0.2:8001": 503}))["healthy"] is False
    assert summary(None)["healthy"] is False
