# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Monitoring: one metric vocabulary across engines, engine versions and accelerators.

Dashboards break when an engine renames a metric (vLLM's ``vllm:gpu_cache_usage_perc`` became
``vllm:kv_cache_usage_perc``). Here every name a dashboard or an alert reads is a recording rule of ours
(``llm:*`` for the engine, ``accel:*`` for NPUs and GPUs), built from a table with one row per engine
metric and version range: a rename is one new row. The names and version bounds come from the engines'
documentation and GPUStack's per-version mapping (docs/monitoring.md cites each).

Pure functions (no Ansible objects), used by the filters of plugins/filter/monitoring.py:

* ``recording_rules(engine, version, accelerators, router)``: Prometheus rule groups for the live engine version
  (and vLLM's router in front of replicas or prefill/decode engines).
* ``alert_rules(thresholds)``: the alerts, each with a runbook line.
* ``used_metric_names(expr)``: the metric names a PromQL expression reads.
* ``exposed_metric_names(text)``: the metric names a ``/metrics`` page serves (samples, HELP and TYPE).
* ``missing_metrics(required, pages)``: the truth check, per target.
"""

from __future__ import annotations

import re

# Scrape jobs, by what serves the page.
JOBS = ("engine", "router", "npu", "gpu", "node", "ray")

# Engines whose metrics the table knows. vllm_ascend and vllm_mindspore are vLLM platform plugins: they serve
# vLLM's metrics, and the version that selects a row is vLLM's.
ENGINES = ("vllm", "vllm_ascend", "vllm_mindspore", "sglang", "mindie")
_ENGINE_FAMILY = {"vllm": "vllm", "vllm_ascend": "vllm", "vllm_mindspore": "vllm", "sglang": "sglang", "mindie": "mindie"}

# The engine vocabulary: (our name, engine family, version range, the engine's metric).
# A range is "*" or comparisons joined by ",": "<0.11.0", ">=0.9.2,<0.11.0". The first matching row wins, so
# narrower ranges come first.
ENGINE_METRICS = (
    ("requests_running", "vllm", "*", "vllm:num_requests_running"),
    ("requests_waiting", "vllm", "*", "vllm:num_requests_waiting"),
    ("kv_cache_usage", "vllm", "<0.9.2", "vllm:gpu_cache_usage_perc"),
    ("kv_cache_usage", "vllm", "*", "vllm:kv_cache_usage_perc"),
    ("prefix_cache_hits", "vllm", "<0.9.2", "vllm:gpu_prefix_cache_hits_total"),
    ("prefix_cache_hits", "vllm", "*", "vllm:prefix_cache_hits_total"),
    ("prefix_cache_queries", "vllm", "<0.9.2", "vllm:gpu_prefix_cache_queries_total"),
    ("prefix_cache_queries", "vllm", "*", "vllm:prefix_cache_queries_total"),
    ("prompt_tokens", "vllm", "*", "vllm:prompt_tokens_total"),
    ("generation_tokens", "vllm", "*", "vllm:generation_tokens_total"),
    ("requests_finished", "vllm", "*", "vllm:request_success_total"),
    ("ttft_seconds", "vllm", "*", "vllm:time_to_first_token_seconds"),
    ("itl_seconds", "vllm", "<0.11.0", "vllm:time_per_output_token_seconds"),
    ("itl_seconds", "vllm", "*", "vllm:inter_token_latency_seconds"),
    ("e2e_seconds", "vllm", "*", "vllm:e2e_request_latency_seconds"),
    ("queue_seconds", "vllm", "*", "vllm:request_queue_time_seconds"),
    ("requests_running", "sglang", "*", "sglang:num_running_reqs"),
    ("requests_waiting", "sglang", "*", "sglang:num_queue_reqs"),
    ("kv_cache_usage", "sglang", "*", "sglang:token_usage"),
    ("prompt_tokens", "sglang", "*", "sglang:prompt_tokens_total"),
    ("generation_tokens", "sglang", "*", "sglang:generation_tokens_total"),
    ("ttft_seconds", "sglang", "*", "sglang:time_to_first_token_seconds"),
    ("itl_seconds", "sglang", "*", "sglang:inter_token_latency_seconds"),
    ("e2e_seconds", "sglang", "*", "sglang:e2e_request_latency_seconds"),
    ("requests_running", "mindie", "*", "num_requests_running"),
    ("requests_waiting", "mindie", "*", "num_requests_waiting"),
    ("kv_cache_usage", "mindie", "*", "npu_cache_usage_perc"),
    ("prompt_tokens", "mindie", "*", "prompt_tokens_total"),
    ("generation_tokens", "mindie", "*", "generation_tokens_total"),
    ("ttft_seconds", "mindie", "*", "time_to_first_token_seconds"),
    ("itl_seconds", "mindie", "*", "time_per_output_token_seconds"),
)

# Histograms among them: their rules read the _bucket series.
_HISTOGRAMS = ("ttft_seconds", "itl_seconds", "e2e_seconds", "queue_seconds")
# Counters: their rules read a rate.
_COUNTERS = ("prompt_tokens", "generation_tokens", "requests_finished", "prefix_cache_hits", "prefix_cache_queries")

# The accelerator vocabulary: (our name, job, PromQL over the exporter's metric). Ascend's npu-exporter reports
# HBM in MB and utilisation in percent; dcgm-exporter framebuffer in MiB and utilisation in percent.
ACCEL_METRICS = (
    ("healthy", "npu", "npu_chip_info_health_status"),
    ("utilization_ratio", "npu", "npu_chip_info_utilization / 100"),
    ("memory_used_bytes", "npu", "npu_chip_info_hbm_used_memory * 1048576"),
    ("memory_total_bytes", "npu", "npu_chip_info_hbm_total_memory * 1048576"),
    ("temperature_celsius", "npu", "npu_chip_info_temperature"),
    ("ecc_uncorrectable_errors", "npu", "npu_chip_info_hbm_ecc_double_bit_error_cnt"),
    ("link_up", "npu", "npu_chip_info_link_status"),
    ("network_healthy", "npu", "npu_chip_info_network_status"),
    ("pfc_rx_frames_rate", "npu", "rate(npu_chip_mac_rx_pfc_pkt_num[1m])"),
    ("healthy", "gpu", "DCGM_FI_DEV_XID_ERRORS == bool 0"),
    ("utilization_ratio", "gpu", "DCGM_FI_DEV_GPU_UTIL / 100"),
    ("memory_used_bytes", "gpu", "DCGM_FI_DEV_FB_USED * 1048576"),
    ("memory_total_bytes", "gpu", "(DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) * 1048576"),
    ("temperature_celsius", "gpu", "DCGM_FI_DEV_GPU_TEMP"),
    ("ecc_uncorrectable_errors", "gpu", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"),
)
# vLLM's router (vllm-router, in front of the replicas and pd topologies), by the mode it runs in: "regular"
# (replicas) or "pd" (its PD mode). (our name, mode, the router's metric), read from what vllm-router 0.1.17
# serves on its metrics port (tests/fixtures/vendor/vllm-router-0.1.17-metrics-*.txt). Both modes serve the
# per-replica health gauge (from its first health check) and the per-replica request counter (from the first
# request); the latency histogram has another name in each mode, and only the regular mode counts failures.
ROUTER_METRICS = (
    ("healthy", "*", "vllm_router_worker_health"),
    ("requests", "*", "vllm_router_processed_requests_total"),
    ("request_seconds", "regular", "vllm_router_generate_duration_seconds"),
    ("request_seconds", "pd", "vllm_router_pd_request_duration_seconds"),
    ("failures", "regular", "vllm_router_cb_outcomes_total"),
)
ROUTER_MODES = ("regular", "pd")

# The inference watchdog's results (roles/serve/files/llm_cluster_watchdog.py, its llm_cluster_watchdog_result gauge)
# in which the engine answers no completion and nothing explains it: not a deploy's pause, not its first start.
WATCHDOG_NOT_SERVING = ("failing", "restart failed", "engine down", "held")

# The label that names the device: npu-exporter's "id", dcgm-exporter's "gpu"; the rules copy it to "device".
_DEVICE_LABEL = {"npu": "id", "gpu": "gpu"}

# Alert thresholds and their defaults (monitoring_alert_thresholds overrides any of them).
DEFAULT_THRESHOLDS = {
    "target_down_for": "5m",
    "not_serving_for": "5m",
    "accel_fault_for": "1m",
    "accel_memory_ratio": 0.98,
    "kv_cache_ratio": 0.95,
    "queue_waiting": 8,
    "ttft_p99_seconds": 5.0,
    "pfc_rx_frames_per_second": 1000,
    "temperature_celsius": 95,
}

_OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
}


def parse_version(text):
    """The leading numbers of a version (``0.11.0rc1`` and ``0.11.0+cpu`` give (0, 11, 0)); None when it has none."""
    numbers = re.findall(r"\d+", re.split(r"[^0-9.]", str(text or "").strip().lstrip("vV"), maxsplit=1)[0])
    return tuple(int(n) for n in numbers) or None


def version_in(version, spec):
    """Whether ``version`` (a string) is inside ``spec`` ("*", or comparisons joined by ",")."""
    spec = (spec or "*").strip()
    if spec == "*":
        return True
    have = parse_version(version)
    if have is None:
        return False
    for clause in spec.split(","):
        match = re.match(r"\s*(<=|>=|==|<|>)\s*(\S+)\s*$", clause)
        if not match:
            raise ValueError("version range %r: %r is not a comparison" % (spec, clause))
        want = parse_version(match.group(2))
        width = max(len(have), len(want))
        if not _OPS[match.group(1)](have + (0,) * (width - len(have)), want + (0,) * (width - len(want))):
            return False
    return True


def engine_metrics(engine, version):
    """Our name -> the engine's metric, for ``engine`` at ``version`` (unknown version: the newest rows)."""
    if engine not in _ENGINE_FAMILY:
        raise ValueError("monitoring knows the metrics of %s, not %r" % (", ".join(ENGINES), engine))
    family = _ENGINE_FAMILY[engine]
    chosen = {}
    for name, row_family, spec, metric in ENGINE_METRICS:
        if row_family != family or name in chosen:
            continue
        if spec == "*" or (parse_version(version) is not None and version_in(version, spec)):
            chosen[name] = metric
    return chosen


def _engine_rules(engine, version):
    metrics = engine_metrics(engine, version)
    by = "instance, model_name"
    rules = []
    for name, record, how in (("requests_running", "llm:num_requests_running", "sum"),
                              ("requests_waiting", "llm:num_requests_waiting", "sum"),
                              ("kv_cache_usage", "llm:kv_cache_usage_ratio", "max")):
        if name in metrics:
            rules.append({"record": record, "expr": "%s by (%s) (%s{job=\"llm_cluster_engine\"})" % (how, by, metrics[name])})
    for name in _COUNTERS:
        if name in metrics:
            rules.append({"record": "llm:%s:rate5m" % name,
                          "expr": "sum by (%s) (rate(%s{job=\"llm_cluster_engine\"}[5m]))" % (by, metrics[name])})
    for name in _HISTOGRAMS:
        if name in metrics:
            rules.append({"record": "llm:%s_bucket:rate5m" % name,
                          "expr": "sum by (%s, le) (rate(%s_bucket{job=\"llm_cluster_engine\"}[5m]))" % (by, metrics[name])})
    if "prefix_cache_hits" in metrics and "prefix_cache_queries" in metrics:
        rules.append({"record": "llm:prefix_cache_hit_ratio",
                      "expr": "llm:prefix_cache_hits:rate5m / (llm:prefix_cache_queries:rate5m > 0)"})
    if "ttft_seconds" in metrics:
        rules.append({"record": "llm:ttft_seconds:p99_5m",
                      "expr": "histogram_quantile(0.99, llm:ttft_seconds_bucket:rate5m)"})
    if "itl_seconds" in metrics:
        rules.append({"record": "llm:itl_seconds:p99_5m",
                      "expr": "histogram_quantile(0.99, llm:itl_seconds_bucket:rate5m)"})
    return rules


def _accel_rules(accelerators):
    rules = []
    for name, job, expr in ACCEL_METRICS:
        if job not in accelerators:
            continue
        selected = re.sub(r"\b((?:npu|DCGM)_[A-Za-z0-9_]+)\b(?!\s*\{)", r'\1{job="llm_cluster_%s"}' % job, expr)
        rules.append({"record": "accel:%s" % name,
                      "expr": 'label_replace(%s, "device", "$1", "%s", "(.*)")' % (selected, _DEVICE_LABEL[job]),
                      "labels": {"accelerator": job}})
    return rules


def router_metrics(mode):
    """Our name -> the router's metric in ``mode`` ("regular" or "pd")."""
    if mode not in ROUTER_MODES:
        raise ValueError("the router's mode must be %s, got %r" % (" or ".join(ROUTER_MODES), mode))
    return {name: metric for name, row_mode, metric in ROUTER_METRICS if row_mode in ("*", mode)}


def _router_rules(mode):
    metrics = router_metrics(mode)
    job = 'job="llm_cluster_router"'
    rules = [{"record": "llm:router_replicas", "expr": "count by (instance) (%s{%s})" % (metrics["healthy"], job)},
             {"record": "llm:router_replicas_healthy", "expr": "sum by (instance) (%s{%s})" % (metrics["healthy"], job)},
             {"record": "llm:router_requests:rate5m",
              "expr": "sum by (instance, worker) (rate(%s{%s}[5m]))" % (metrics["requests"], job)},
             {"record": "llm:router_request_seconds_bucket:rate5m",
              "expr": "sum by (instance, le) (rate(%s_bucket{%s}[5m]))" % (metrics["request_seconds"], job)},
             {"record": "llm:router_request_seconds:p99_5m",
              "expr": "histogram_quantile(0.99, llm:router_request_seconds_bucket:rate5m)"}]
    if "failures" in metrics:
        rules.append({"record": "llm:router_failures:rate5m",
                      "expr": 'sum by (instance, worker) (rate(%s{%s,outcome="failure"}[5m]))' % (metrics["failures"], job)})
    return rules


def recording_rules(engine, version, accelerators=("npu", "gpu"), router=""):
    """The rule groups of ``llm:*`` (for ``engine`` at ``version``, and for vLLM's router in ``router`` mode:
    "regular", "pd" or "" for none) and ``accel:*`` (for ``accelerators``)."""
    unknown = [a for a in accelerators if a not in _DEVICE_LABEL]
    if unknown:
        raise ValueError("accelerators must be npu and/or gpu, got %s" % ", ".join(map(str, unknown)))
    groups = [{"name": "llm_cluster_engine", "rules": _engine_rules(engine, version)}]
    if router:
        groups.append({"name": "llm_cluster_router", "rules": _router_rules(router)})
    # One group per exporter: the same record from two expressions in one group is a duplicate to promtool.
    for job in ("npu", "gpu"):
        if job in accelerators:
            groups.append({"name": "llm_cluster_%s" % job, "rules": _accel_rules([job])})
    return {"groups": groups}


def _alert(name, expr, duration, severity, summary, runbook):
    alert = {"alert": name, "expr": expr, "labels": {"severity": severity},
             "annotations": {"summary": summary, "runbook": runbook}}
    if duration:
        alert["for"] = duration
    return alert


def alert_rules(thresholds=None):
    """The alerts on our vocabulary, with ``thresholds`` over DEFAULT_THRESHOLDS; each has a runbook line."""
    t = dict(DEFAULT_THRESHOLDS)
    unknown = sorted(set(thresholds or {}) - set(t))
    if unknown:
        raise ValueError("monitoring_alert_thresholds: unknown %s (known: %s)" % (", ".join(unknown), ", ".join(sorted(t))))
    t.update(thresholds or {})
    for key, value in t.items():
        if key.endswith("_for"):
            if not re.match(r"^\d+[smh]$", str(value)):
                raise ValueError("monitoring_alert_thresholds.%s must be a duration such as 5m, got %r" % (key, value))
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError("monitoring_alert_thresholds.%s must be a positive number, got %r" % (key, value))
    rules = [
        _alert("LLMClusterTargetDown", 'up{job=~"llm_cluster_.*"} == 0', t["target_down_for"], "warning",
               "{{ $labels.job }} on {{ $labels.instance }} does not answer Prometheus",
               "Check the unit behind the job on the node (systemctl status), then its port from the monitoring host."),
        _alert("LLMEngineDown", 'up{job="llm_cluster_engine"} == 0', "1m", "critical",
               "The engine's API on {{ $labels.instance }} is down",
               "playbooks/status.yml names the failing node; journalctl -u llm-cluster-engine on it tells why."),
        _alert("LLMRouterDown", 'up{job="llm_cluster_router"} == 0', "1m", "critical",
               "vLLM's router on {{ $labels.instance }} does not answer: the API in front of the replicas is down",
               "systemctl status llm-cluster-router on the head; journalctl -u llm-cluster-router tells why."),
        _alert("LLMRouterReplicaUnhealthy", 'vllm_router_worker_health{job="llm_cluster_router"} == 0', "2m", "warning",
               "The router takes {{ $labels.worker }} out of rotation: its health checks fail",
               "The others serve meanwhile; systemctl status llm-cluster-engine on that replica's node, then "
               "./deploy.sh -t serve to start it again."),
        _alert("LLMRouterNoReplica", "llm:router_replicas_healthy == 0", "1m", "critical",
               "The router on {{ $labels.instance }} has no healthy replica: every request fails",
               "playbooks/status.yml names each engine's state; journalctl -u llm-cluster-engine on the nodes."),
        # The serve role's inference watchdog, through node_exporter's textfile collector: whether a completion
        # answers, which /metrics cannot tell (a wedged engine still serves its page).
        _alert("LLMEngineNotServing",
               "max by (instance, node, engine) (llm_cluster_watchdog_result{result=~\"%s\"}) == 1" % "|".join(WATCHDOG_NOT_SERVING),
               t["not_serving_for"], "critical",
               "The watchdog on {{ $labels.node }} finds {{ $labels.engine }} answering no completion",
               "journalctl -u llm-cluster-watchdog -u llm-cluster-engine on the node; ./deploy.sh status names the engine's "
               "state. The watchdog restarts it after serve_watchdog_failures failed completions."),
        _alert("LLMWatchdogHolding", "llm_cluster_watchdog_held == 1", "", "critical",
               "The watchdog on {{ $labels.node }} restarted {{ $labels.engine }} as often as it may and holds",
               "The engine fails again after each restart: read its journal, fix the cause, then ./deploy.sh -t serve."),
        _alert("LLMWatchdogStale", "time() - llm_cluster_watchdog_last_check_timestamp_seconds > 300", "5m", "warning",
               "The watchdog on {{ $labels.node }} has not checked {{ $labels.engine }} for more than 5 minutes",
               "systemctl status llm-cluster-watchdog.timer llm-cluster-watchdog.service on the node."),
        # The head's reading of its GCS connections (monitoring_ray_members), or Ray's agent where it runs.
        _alert("RayNodeLost", 'llm_cluster_ray_member_connected == 0 or up{job="llm_cluster_ray"} == 0', "2m",
               "critical",
               "{{ with $labels.member }}{{ . }} holds no connection to the head's Ray GCS{{ else }}Ray's metrics agent "
               "on {{ $labels.instance }} stopped{{ end }}: the node left the Ray cluster",
               "systemctl status llm-cluster-ray-* on the node; a TP x PP group stalls until it rejoins."),
        _alert("AcceleratorUnhealthy", "accel:healthy == 0", t["accel_fault_for"], "critical",
               "Accelerator {{ $labels.device }} on {{ $labels.instance }} reports a fault",
               "npu-smi info -t health -i <id> (or nvidia-smi -q) on the node; drain the node before a reset."),
        _alert("AcceleratorUncorrectableECC", "accel:ecc_uncorrectable_errors > 0", "", "critical",
               "Accelerator {{ $labels.device }} on {{ $labels.instance }} has uncorrectable memory errors",
               "Double-bit ECC errors corrupt results: drain the node and have the card's pages isolated or replaced."),
        _alert("AcceleratorLinkDown", "accel:link_up == 0", t["accel_fault_for"], "critical",
               "The RoCE link of NPU {{ $labels.device }} on {{ $labels.instance }} is down",
               "hccn_tool -i <id> -link -g on the node; check the cable and the switch port; HCCL collectives hang."),
        _alert("AcceleratorNetworkUnhealthy", "accel:network_healthy == 0", "2m", "warning",
               "NPU {{ $labels.device }} on {{ $labels.instance }} cannot reach its detect address",
               "hccn_tool -i <id> -net_health -g; check the gateway and the detect IP (npu_network in prepare)."),
        _alert("AcceleratorPFCStorm", "accel:pfc_rx_frames_rate > %s" % t["pfc_rx_frames_per_second"], "2m", "warning",
               "NPU {{ $labels.device }} on {{ $labels.instance }} receives {{ $value }} PFC frames/s",
               "A PFC storm stalls RoCE traffic: find the congested switch port; check the priority and buffer settings."),
        _alert("AcceleratorMemoryNearFull", "accel:memory_used_bytes / accel:memory_total_bytes > %s" % t["accel_memory_ratio"],
               "10m", "warning",
               "Accelerator {{ $labels.device }} on {{ $labels.instance }} memory is {{ $value | humanizePercentage }} used",
               "Lower serve_gpu_memory_utilization or serve_max_num_seqs, or look for a process outside the engine."),
        _alert("AcceleratorHot", "accel:temperature_celsius > %s" % t["temperature_celsius"], "5m", "warning",
               "Accelerator {{ $labels.device }} on {{ $labels.instance }} is at {{ $value }} C",
               "Check the node's fans and airflow; the card throttles and then stops."),
        _alert("LLMKVCacheFull", "llm:kv_cache_usage_ratio > %s" % t["kv_cache_ratio"], "10m", "warning",
               "The KV cache on {{ $labels.instance }} is {{ $value | humanizePercentage }} used",
               "Requests are preempted: add replicas, lower serve_max_num_seqs, or raise the memory share."),
        _alert("LLMQueueGrowing",
               "llm:num_requests_waiting > %s and deriv(llm:num_requests_waiting[5m]) > 0" % t["queue_waiting"], "5m", "warning",
               "{{ $value }} requests wait on {{ $labels.instance }} and the queue grows",
               "The engine is saturated: add capacity or lower the load; see llm:ttft_seconds:p99_5m."),
        _alert("LLMTimeToFirstTokenHigh", "llm:ttft_seconds:p99_5m > %s" % t["ttft_p99_seconds"], "10m", "warning",
               "p99 time to first token on {{ $labels.instance }} is {{ $value }} s",
               "Long prompts or a full queue: compare llm:num_requests_waiting and llm:prompt_tokens:rate5m."),
    ]
    return {"groups": [{"name": "llm_cluster_alerts", "rules": rules}]}


# PromQL words that are not metric names.
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset",
             "inf", "nan", "atan2"}
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def used_metric_names(expr):
    """The metric names ``expr`` (PromQL) reads: identifiers that are not functions, keywords, label names,
    label values, durations or numbers."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', str(expr))
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in _NAME.finditer(text):
        word = match.group(0)
        start, end = match.span()
        if start and (text[start - 1].isdigit() or text[start - 1] == "."):
            continue
        if word.lower() in _KEYWORDS or re.match(r"^\d", word):
            continue
        if text[end:].lstrip().startswith("("):
            continue
        names.add(word)
    return names


_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created", "_info")


def exposed_metric_names(text):
    """The metric names a Prometheus exposition page serves: each sample's name, and for a family announced by
    HELP or TYPE (a labelled family with no child yet has no sample) the family name with its series suffixes."""
    names = set()
    for line in str(text).splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                family = parts[2]
                names.add(family)
                kind = parts[3].strip() if parts[1] == "TYPE" and len(parts) > 3 else ""
                if kind in ("histogram", "gaugehistogram"):
                    names.update(family + s for s in ("_bucket", "_sum", "_count"))
                elif kind == "summary":
                    names.update(family + s for s in ("_sum", "_count"))
                elif kind == "counter" and not family.endswith("_total"):
                    names.add(family + "_total")
            continue
        match = _NAME.match(line)
        if match:
            names.add(match.group(0))
    return names


def required_metrics(rule_groups, dashboards=()):
    """Job -> {metric name -> [where it is used]} for every name the rules and dashboards read, without the
    names the rules themselves record, ``up`` and ``ALERTS``. A name's job comes from the rule's job selector,
    else from its prefix (vllm:/sglang: engine, vllm_router_ router, npu_ npu, DCGM_ gpu, node_ node, ray_ ray);
    a name that fits no job is filed under ""."""
    recorded = set()
    uses = []
    for group in (rule_groups or {}).get("groups", []):
        for rule in group.get("rules", []):
            if "record" in rule:
                recorded.add(rule["record"])
            uses.append((rule.get("record") or rule.get("alert"), rule["expr"]))
    for dashboard in dashboards or ():
        for panel in _panels(dashboard):
            for target in panel.get("targets", []) or []:
                if target.get("expr"):
                    uses.append(("%s: %s" % (dashboard.get("title", "dashboard"), panel.get("title", "panel")),
                                 target["expr"]))
    required = {}
    for where, expr in uses:
        for name in sorted(used_metric_names(expr)):
            if name in recorded or name in ("up", "ALERTS", "ALERTS_FOR_STATE"):
                continue
            job = _job_of(name, expr)
            required.setdefault(job, {}).setdefault(name, [])
            if where not in required[job][name]:
                required[job][name].append(where)
    return required


def _panels(dashboard):
    for panel in dashboard.get("panels", []) or []:
        yield panel
        yield from panel.get("panels", []) or []


def _job_of(name, expr):
    match = re.search(re.escape(name) + r'\s*\{[^}]*job="llm_cluster_([a-z]+)"', expr)
    if match and match.group(1) in JOBS:
        return match.group(1)
    for prefix, job in (("vllm:", "engine"), ("sglang:", "engine"), ("vllm_router_", "router"), ("npu_", "npu"),
                        ("DCGM_", "gpu"), ("node_", "node"), ("ray_", "ray")):
        if name.startswith(prefix):
            return job
    return ""


def missing_metrics(required, pages):
    """The truth check: for each target page ``{'job', 'instance', 'text'}``, the names its job needs that it
    does not serve, as ``[{'job', 'instance', 'missing': {name: [where used]}}]`` (targets with none missing
    are left out)."""
    report = []
    for page in pages:
        needed = (required or {}).get(page["job"], {})
        served = exposed_metric_names(page.get("text") or "")
        missing = {name: where for name, where in sorted(needed.items()) if name not in served}
        if missing:
            report.append({"job": page["job"], "instance": page["instance"], "missing": missing})
    return report


def host_port(address, port):
    """``address:port``, with an IPv6 address in brackets."""
    address = str(address)
    return "[%s]:%d" % (address, int(port)) if ":" in address else "%s:%d" % (address, int(port))


def _engine_endpoint(serve, engine, version):
    """The engine target from artifacts/serve.json (or the operator's engine and version): {name, version, url,
    scheme, target, ca_file}; None where no engine was deployed."""
    endpoint = (serve or {}).get("endpoint") or {}
    url = endpoint.get("url") or ""
    name = serve.get("backend") if (engine or "auto") == "auto" else engine
    if not url or not name:
        return None
    match = re.match(r"^(https?)://(\[[^\]]+\]|[^/:]+)(?::(\d+))?", url)
    if not match:
        raise ValueError("artifacts/serve.json: the endpoint URL %r is not http(s)://host:port" % url)
    scheme, host, port = match.group(1), match.group(2).strip("[]"), match.group(3)
    port = int(port) if port else (443 if scheme == "https" else 80)
    replicas = [str(u) for u in ((serve.get("router") or {}).get("workers") or [])]
    if replicas:
        scheme = "http"
    return {"name": name, "version": str(endpoint.get("version") or "") if (version or "auto") == "auto" else str(version),
            "url": url, "scheme": scheme, "address": host, "target": host_port(host, port),
            "ca_file": "" if replicas else endpoint.get("ca_file") or "", "replicas": replicas}


def _router_endpoint(serve, problems):
    """vLLM's router from artifacts/serve.json: {host, address, port, mode}; None where the topology has no router,
    or the serve step that wrote the file kept the router's metrics on the head's loopback (before they moved to its
    cluster address: a serve run writes them)."""
    router = serve.get("router") or {}
    if not router or not router.get("metrics_address"):
        return None
    value = router.get("metrics_port")
    # An integer, or a string of ASCII digits (not a bool, a float, or digits of another script that int() reads).
    port = int(value) if (isinstance(value, int) and not isinstance(value, bool)) or re.fullmatch(r"[0-9]+", str(value)) else 0
    if not 1 <= port <= 65535:
        problems.append("artifacts/serve.json: the router's metrics port %r is not a port" % router.get("metrics_port"))
        return None
    return {"host": str(router.get("host") or ""), "address": str(router["metrics_address"]), "port": port,
            "mode": "pd" if serve.get("topology") == "pd" else "regular"}


def plan(nodes, settings):
    """Everything the role renders, from the member records ``{host, address, accelerator, exporter}`` (exporter:
    "npu", "gpu" or "" where none runs) and the settings of tasks/context.yml. ``problems`` names each bad input
    with its fix; the role fails on them before any change."""
    problems = []
    ports = {key: int(value) for key, value in settings["ports"].items()}
    members = list(settings.get("members") or [])
    host = settings["host"]
    if host not in members:
        problems.append("monitoring host %s (first host of the monitoring group) is not a cluster member: the firewall lets "
                        "only members reach the exporters; put a member first in the group, or leave the group out to use "
                        "the head" % host)
    used = {}
    for key, port in sorted(ports.items()):
        if not 1 <= port <= 65535:
            problems.append("monitoring_%s port %d is outside 1-65535" % (key, port))
        used.setdefault(port, []).append(key)
    for port, keys in sorted(used.items()):
        if len(keys) > 1:
            problems.append("the monitoring ports of %s are all %d: give each its own port" % (" and ".join(keys), port))
    by_host = {}
    for node in nodes:
        by_host[node["host"]] = node
        if not node.get("address"):
            problems.append("%s has no cluster address: run the prepare step first (./deploy.sh -t prepare)" % node["host"])
    engine = None
    try:
        engine = _engine_endpoint(settings.get("serve") or {}, settings.get("engine"), settings.get("engine_version"))
        if engine and engine["name"] not in ENGINES:
            problems.append("monitoring_engine %r: the metric table knows %s" % (engine["name"], ", ".join(ENGINES)))
    except ValueError as exc:
        problems.append(str(exc))
    accelerators = sorted({n.get("exporter") for n in nodes if n.get("exporter") in _DEVICE_LABEL})
    router = _router_endpoint(settings.get("serve") or {}, problems) if engine else None
    recording = alerts = {"groups": []}
    try:
        alerts = alert_rules(settings.get("thresholds") or {})
        mode = router["mode"] if router else ""
        if engine and engine["name"] in ENGINES:
            recording = recording_rules(engine["name"], engine["version"], accelerators, mode)
        else:
            recording = recording_rules("vllm", "", accelerators, mode)
    except ValueError as exc:
        problems.append(str(exc))

    head = settings.get("head")
    targets = {}

    def add(job, node, port, extra=None):
        labels = {"node": node["host"], "role": "head" if node["host"] == head else "worker",
                  "accelerator": node.get("accelerator") or "cpu"}
        labels.update(extra or {})
        targets.setdefault(job, []).append({"targets": [host_port(node["address"], port)], "labels": labels})

    for node in nodes:
        if not node.get("address"):
            continue
        if settings.get("node_exporter"):
            add("node", node, ports["node"])
        if node.get("exporter") == "npu":
            add("npu", node, ports["npu"])
        elif node.get("exporter") == "gpu":
            add("gpu", node, ports["gpu"])
        if settings.get("ray"):
            add("ray", node, ports["ray"])
    if engine:
        # The replicas topology: every replica's own /metrics (plain HTTP on the cluster network), not the API
        # port, where each scrape would reach whichever replica the router picks.
        for url in engine["replicas"] or [engine["url"]]:
            found = re.match(r"^https?://(\[[^\]]+\]|[^/:]+):(\d+)", url)
            if not found:
                problems.append("artifacts/serve.json: the replica URL %r is not http(s)://host:port" % url)
                continue
            address = found.group(1).strip("[]")
            owner = next((n for n in nodes if n.get("address") == address), None)
            labels = {"node": owner["host"] if owner else address,
                      "role": "head" if owner and owner["host"] == head else "worker",
                      "backend": engine["name"], "engine_version": engine["version"] or "unknown"}
            targets.setdefault("engine", []).append({"targets": [host_port(address, int(found.group(2)))],
                                                     "labels": labels})
    if router:
        # vLLM's router on the head, at the cluster address it serves its metrics on.
        targets["router"] = [{"targets": [host_port(router["address"], router["port"])],
                              "labels": {"node": router["host"], "role": "head" if router["host"] == head else "worker",
                                         "mode": router["mode"]}}]

    etc = settings.get("etc") or "/etc/prometheus/llm_cluster"
    host_address = (by_host.get(host) or {}).get("address") or ""
    config = {"global": {"scrape_interval": settings.get("scrape_interval") or "15s",
                         "evaluation_interval": settings.get("evaluation_interval") or "15s"},
              "rule_files": [etc + "/rules/*.yml"],
              "scrape_configs": [{"job_name": "prometheus",
                                  "static_configs": [{"targets": [host_port(host_address or "127.0.0.1", ports["prometheus"])],
                                                      "labels": {"node": host}}]}]}
    if settings.get("alertmanager"):
        config["alerting"] = {"alertmanagers": [{"static_configs": [
            {"targets": [host_port(host_address or "127.0.0.1", ports["alertmanager"])]}]}]}
    for job in JOBS:
        if job not in targets:
            continue
        scrape = {"job_name": "llm_cluster_%s" % job, "file_sd_configs": [{"files": ["%s/targets/%s.yml" % (etc, job)]}]}
        if job == "engine" and engine["scheme"] == "https":
            scrape["scheme"] = "https"
            if engine["ca_file"]:
                scrape["tls_config"] = {"ca_file": etc + "/engine-ca.pem"}
        config["scrape_configs"].append(scrape)
    return {"host": host, "host_address": host_address, "engine": engine, "router": router, "accelerators": accelerators,
            "jobs": list(JOBS), "targets": targets, "prometheus": config, "recording_rules": recording, "alert_rules": alerts,
            "problems": problems}


def scrape_list(targets):
    """[{job, target}] for every address of every job's file_sd entries, in job order."""
    pairs = []
    for job in JOBS:
        for entry in (targets or {}).get(job, []):
            pairs.extend({"job": job, "target": target} for target in entry.get("targets", []))
    return pairs


def pages(results):
    """The truth check's pages from the uri results of scrape_list's items."""
    return [{"job": r["item"]["job"], "instance": r["item"]["target"], "text": r.get("content") or ""}
            for r in results if not r.get("skipped")]


def missing_lines(report):
    """One line per missing name: "<job> <instance>: <name> (used by ...)"."""
    return ["%s %s: %s (used by %s)" % (entry["job"], entry["instance"], name, ", ".join(where))
            for entry in report for name, where in entry["missing"].items()]


def report(plan_result, targets_api, missing):
    """artifacts/monitoring.json: where Prometheus and Alertmanager answer, each target's health from Prometheus's
    /api/v1/targets (``targets_api``: the uri result of that call, {} where Prometheus did not answer), and the
    truth check's result (None: not run)."""
    answered = bool((targets_api or {}).get("json"))
    active = (((targets_api or {}).get("json") or {}).get("data") or {}).get("activeTargets") or []
    targets = [{"job": t.get("labels", {}).get("job") or t.get("scrapePool"), "instance": t.get("labels", {}).get("instance"),
                "node": t.get("labels", {}).get("node"), "health": t.get("health"), "last_error": t.get("lastError") or None}
               for t in active]
    targets.sort(key=lambda t: (str(t["job"]), str(t["instance"])))
    address = plan_result.get("host_address") or ""
    config = plan_result.get("prometheus") or {}
    prometheus = next((c["static_configs"][0]["targets"][0] for c in config.get("scrape_configs", [])
                       if c.get("job_name") == "prometheus"), None)
    alertmanager = None
    if config.get("alerting"):
        alertmanager = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"][0]
    return {"host": plan_result.get("host"), "address": address, "prometheus_answered": answered,
            "prometheus": "http://%s" % prometheus if prometheus else None,
            "alertmanager": "http://%s" % alertmanager if alertmanager else None,
            "engine": plan_result.get("engine"), "router": plan_result.get("router"),
            "rules": {"recording": sum(len(g["rules"]) for g in plan_result.get("recording_rules", {}).get("groups", [])),
                      "alerts": sum(len(g["rules"]) for g in plan_result.get("alert_rules", {}).get("groups", []))},
            "targets": targets,
            "up": sum(1 for t in targets if t["health"] == "up"),
            "down": [t for t in targets if t["health"] != "up"],
            "truth_check": None if missing is None else {"passed": not missing, "missing": missing}}


def report_lines(doc):
    """The report as lines for the play output."""
    if not doc.get("prometheus_answered"):
        return ["Prometheus %s (on %s) did not answer: monitoring not deployed (./deploy.sh monitoring) or down" % (
            doc.get("prometheus"), doc.get("host"))]
    lines = ["Prometheus %s, Alertmanager %s (on %s)" % (doc.get("prometheus"), doc.get("alertmanager") or "off", doc.get("host")),
             "%d recording rules, %d alerts; targets up %d of %d" % (
                 doc["rules"]["recording"], doc["rules"]["alerts"], doc.get("up", 0), len(doc.get("targets", [])))]
    for target in doc.get("down", []):
        lines.append("DOWN %s %s (%s): %s" % (target["job"], target["instance"], target.get("node"), target.get("last_error")))
    truth = doc.get("truth_check")
    if truth is not None:
        verdict = ("every name the rules and dashboards read is served" if truth["passed"]
                   else "%d target(s) miss names" % len(truth["missing"]))
        lines.append("metric truth check: %s" % verdict)
    return lines
