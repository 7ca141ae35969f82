# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""deploy.yml's monitoring step: Prometheus and Alertmanager from Debian's packages on the head scrape the real
node_exporter, the fake npu-exporter and the real vLLM engine; the llm:* rules have values
after completions, the accel:* rules read every NPU, a fault set in a node's fake NPU fires its alert and clears,
and the metric truth check fails on a dashboard written for an older vLLM.

Runs after test_model.py and before test_perimeter.py (whose scan of all ports from a non-member covers the
exporters) and test_serve.py (which stops the engine). Never asserts on generated text.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import ssl
import subprocess
import urllib.parse
import urllib.request

import pytest
import testinfra

testinfra_hosts = ["ansible://master1"]

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
EPHEMERAL = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "")
ARTIFACTS = os.path.join(EPHEMERAL, "artifacts")
TLS_CA = os.path.join(EPHEMERAL, "credentials", "tls", "ca.crt")
KEY_FILE = os.path.join(EPHEMERAL, "credentials", "serve_api_key")
PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", "")
NAMES = ["master1", "worker1", "worker2"]
NPUS = 8
_SPEC = importlib.util.spec_from_file_location(
    "prometheus", os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "shared", "prometheus.py"))
prom = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(prom)


@pytest.fixture(scope="module")
def nodes():
    return {name: testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY)) for name in NAMES}


@pytest.fixture(scope="module")
def addresses(nodes):
    return {name: node.check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0] for name, node in nodes.items()}


def prometheus(nodes, addresses, path, **params):
    """GET Prometheus's API from the head itself."""
    return prom.api(nodes["master1"], addresses["master1"], path, **params)


def query(nodes, addresses, expr):
    return prometheus(nodes, addresses, "/api/v1/query", query=expr)["result"]


def test_every_target_is_up_with_its_node_label(nodes, addresses):
    def targets():
        active = prometheus(nodes, addresses, "/api/v1/targets", state="active")["activeTargets"]
        return active if active and all(t["health"] == "up" for t in active) else None
    active = prom.wait_for(targets) or prometheus(nodes, addresses, "/api/v1/targets", state="active")["activeTargets"]
    by_job = {}
    for target in active:
        assert target["health"] == "up", (target["labels"], target["lastError"])
        by_job.setdefault(target["labels"]["job"], set()).add(target["labels"].get("node"))
    # Ray's metrics agent needs ray[default], which the Ray step does not install: no Ray job (monitoring_ray).
    assert by_job == {"prometheus": {"master1"}, "llm_cluster_node": set(NAMES), "llm_cluster_npu": set(NAMES),
                      "llm_cluster_engine": {"master1"}}


def test_exporters_listen_on_the_cluster_address_only(nodes, addresses):
    for name, node in nodes.items():
        listening = node.check_output("ss -Htln")
        for port in (9100, 8082):
            assert re.search(r"\s%s:%d\s" % (re.escape(addresses[name]), port), listening), (name, port, listening)
            assert not re.search(r"\s(\*|0\.0\.0\.0|\[::\]):%d\s" % port, listening), (name, port)
    head = nodes["master1"].check_output("ss -Htln")
    for port in (9090, 9093):
        assert re.search(r"\s%s:%d\s" % (re.escape(addresses["master1"]), port), head), (port, head)
    # Alertmanager's gossip port is off: one Alertmanager needs no peers.
    assert ":9094 " not in head


def test_the_engine_rules_have_values_after_completions(nodes, addresses):
    with open(KEY_FILE, encoding="utf-8") as handle:
        key = handle.read().strip()
    context = ssl.create_default_context(cafile=TLS_CA)
    for attempt in range(3):
        body = json.dumps({"model": "tiny", "prompt": "metrics %d" % attempt, "max_tokens": 8, "temperature": 0, "ignore_eos": True})
        req = urllib.request.Request("https://%s:8000/v1/completions" % addresses["master1"], data=body.encode(),
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
        with urllib.request.urlopen(req, timeout=120, context=context) as response:
            assert json.loads(response.read())["usage"]["completion_tokens"] == 8
    generated = prom.wait_for(lambda: [r for r in query(nodes, addresses, "llm:generation_tokens:rate5m") if float(r["value"][1]) > 0])
    assert generated and generated[0]["metric"]["model_name"] == "tiny"
    for record in ("llm:num_requests_running", "llm:num_requests_waiting", "llm:kv_cache_usage_ratio",
                   "llm:ttft_seconds:p99_5m", "llm:requests_finished:rate5m"):
        assert prom.wait_for(lambda record=record: query(nodes, addresses, record)), record
    # The engine target carries the backend and the version the engine reported.
    [up] = query(nodes, addresses, 'up{job="llm_cluster_engine"}')
    assert up["metric"]["backend"] == "vllm" and up["metric"]["engine_version"].startswith("0.32.0")


def test_a_central_prometheus_federates_the_recorded_series(nodes, addresses):
    # docs/monitoring.md: a site's own Prometheus outside the cluster federates from the monitoring host, through a
    # firewall opening of its port for that Prometheus's address. worker1 stands for it here (a member, so the table
    # lets it in): Prometheus's /federate serves the recorded llm:/accel: series in the text format a scrape reads.
    params = urllib.parse.urlencode({"match[]": '{__name__=~"llm:.*|accel:.*"}'})
    url = "http://%s:9090/federate?%s" % (addresses["master1"], params)
    page = nodes["worker1"].check_output("python3 -c %s", "import sys, urllib.request; sys.stdout.write("
                                         "urllib.request.urlopen(%r, timeout=10).read().decode())" % url)
    names = {line.split("{")[0] for line in page.splitlines() if line and not line.startswith("#")}
    assert {"llm:generation_tokens:rate5m", "llm:num_requests_running", "accel:healthy"} <= names, sorted(names)
    # Each series keeps the labels that name where it comes from.
    assert re.search(r'^accel:healthy\{[^}]*node="worker2"', page, re.M), page[:2000]


def test_the_accelerator_rules_read_every_npu(nodes, addresses):
    healthy = prom.wait_for(lambda: [r for r in query(nodes, addresses, "accel:healthy") if r["value"][1] == "1"])
    assert sorted((r["metric"]["node"], r["metric"]["device"]) for r in healthy) == sorted(
        (name, str(i)) for name in NAMES for i in range(NPUS))
    total = query(nodes, addresses, 'accel:memory_total_bytes{node="worker1", device="0"}')
    assert float(total[0]["value"][1]) == 32768 * 1048576


def test_ray_membership_is_read_on_the_head_without_ray_s_agent(nodes, addresses):
    """Ray's metrics agent does not run here (ray[client]); the head's timer reads its GCS connections instead:
    every member's raylet holds one, and RayNodeLost does not fire."""
    head = nodes["master1"]
    assert head.service("llm-cluster-ray-members.timer").is_running
    connected = prom.wait_for(lambda: [r for r in query(nodes, addresses, "llm_cluster_ray_member_connected")
                                       if r["value"][1] == "1"])
    assert sorted((r["metric"]["member"], r["metric"]["address"], r["metric"]["port"]) for r in connected) == sorted(
        (name, addresses[name], "6379") for name in NAMES)
    assert all(r["metric"]["node"] == "master1" for r in connected)
    [expected] = query(nodes, addresses, "llm_cluster_ray_members_expected")
    assert expected["value"][1] == "3"
    assert firing(nodes, addresses, "RayNodeLost") == []
    # The same reader on the live tables, for a member that is not there: 0.
    head.check_output("python3 -c %s", "import json; json.dump({'port': 6379, 'members': {'gone': '192.0.2.99', "
                      "'worker1': %r}, 'output': '/tmp/llmc-ray-members.prom'}, open('/tmp/llmc-ray-members.json', 'w'))"
                      % addresses["worker1"])
    head.check_output("python3 /opt/llm_cluster/monitoring/llm_cluster_ray_members.py --config /tmp/llmc-ray-members.json")
    text = head.file("/tmp/llmc-ray-members.prom").content_string
    head.run("rm -f /tmp/llmc-ray-members.json /tmp/llmc-ray-members.prom")
    assert 'member="gone",address="192.0.2.99",port="6379"} 0' in text
    assert 'member="worker1",address="%s",port="6379"} 1' % addresses["worker1"] in text


def test_the_watchdog_s_state_reaches_prometheus_through_node_exporter(nodes, addresses):
    # The serve role's inference watchdog writes its state into node_exporter's textfile directory at each check
    # (docs/watchdog.md): the API node's watchdog, whose completions answer. LLMEngineNotServing reads it.
    serving = prom.wait_for(lambda: [r for r in query(nodes, addresses, "llm_cluster_watchdog_serving") if r["value"][1] == "1"])
    assert [(r["metric"]["node"], r["metric"]["mode"], r["metric"]["engine"]) for r in serving] == [
        ("master1", "leader", "llm-cluster-engine.service")], serving
    [result] = query(nodes, addresses, "llm_cluster_watchdog_result")
    assert result["metric"]["result"] == "ok", result
    assert query(nodes, addresses, "time() - llm_cluster_watchdog_last_check_timestamp_seconds < 300")
    assert not query(nodes, addresses, 'ALERTS{alertname=~"LLMEngineNotServing|LLMWatchdogHolding|LLMWatchdogStale"}')


def firing(nodes, addresses, alert):
    return prom.firing(prometheus(nodes, addresses, "/api/v1/alerts"), alert)


def test_an_npu_going_critical_and_a_link_down_fire_their_alerts_and_clear(nodes, addresses):
    assert firing(nodes, addresses, "AcceleratorUnhealthy") == []
    try:
        prom.set_fault(nodes["worker1"], "health", 3, "Critical")
        prom.set_fault(nodes["worker2"], "link", 5, "DOWN")
        assert prom.wait_for(lambda: firing(nodes, addresses, "AcceleratorUnhealthy"), timeout=90) == [("worker1", "3")]
        assert prom.wait_for(lambda: firing(nodes, addresses, "AcceleratorLinkDown"), timeout=90) == [("worker2", "5")]
        # Alertmanager got them from Prometheus.
        alerts = json.loads(nodes["master1"].check_output(
            "python3 -c %s", "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
            "'http://%s:9093/api/v2/alerts', timeout=10).read().decode())" % addresses["master1"]))
        assert {"AcceleratorUnhealthy", "AcceleratorLinkDown"} <= {a["labels"]["alertname"] for a in alerts}
    finally:
        prom.set_fault(nodes["worker1"], "health", 3, None)
        prom.set_fault(nodes["worker2"], "link", 5, None)
    assert prom.wait_for(lambda: not firing(nodes, addresses, "AcceleratorUnhealthy")
                         and not firing(nodes, addresses, "AcceleratorLinkDown"), timeout=90)


def test_the_report_names_the_targets_and_the_truth_check_passed():
    with open(os.path.join(ARTIFACTS, "monitoring.json"), encoding="utf-8") as handle:
        doc = json.load(handle)
    assert doc["host"] == "master1" and doc["truth_check"] == {"passed": True, "missing": []}
    assert doc["rules"] == {"recording": 24, "alerts": 19}
    assert doc["down"] == [] and doc["up"] == len(doc["targets"]) == 8
    for name in ("grafana-llm-cluster-serving.json", "grafana-llm-cluster-accelerators.json"):
        assert os.path.isfile(os.path.join(ARTIFACTS, name))


def test_the_truth_check_fails_on_production_stack_s_dashboard_naming_the_renamed_metrics():
    dashboard = os.path.join(PROJECT, "tests", "fixtures", "dashboards", "production-stack-vllm-dashboard.json")
    result = subprocess.run(["ansible-playbook", "-i", INVENTORY, "aihost.llm_cluster.monitoring",
                             "-e", json.dumps({"monitoring_truth_check_dashboards": [dashboard]})],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=900, check=False)
    assert result.returncode == 2, result.stdout[-3000:]
    assert "Metrics the rules or dashboards read that a live target does not serve" in result.stdout
    for name in ("vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total"):
        assert re.search(r"engine \S+:8000: %s \(used by vLLM Dashboard: " % re.escape(name), result.stdout), name
    # Nothing changed on the way: the check runs after every node was already as the plan says.
    assert re.search(r"master1\s+: ok=\d+\s+changed=0 ", result.stdout), result.stdout[-2000:]
