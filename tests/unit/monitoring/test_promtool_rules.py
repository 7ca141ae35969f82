# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The rules and alerts the monitoring role writes, through Prometheus's own promtool: `check rules` on what the
role renders (annotation templates included), and `test rules` (tests/promtool/alerts_test.yml) with every alert
firing where it must and silent where it must not."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _monitoring

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
PROMTOOL = os.environ.get("LLM_CLUSTER_PROMTOOL") or os.path.join(ROOT, ".cache", "bin", "promtool")
ALERTS_TEST = os.path.join(ROOT, "tests", "promtool", "alerts_test.yml")


def promtool(*args, cwd=None):
    assert os.access(PROMTOOL, os.X_OK), "promtool missing at %s: make unit fetches it (tests/promtool/get-promtool.sh)" % PROMTOOL
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def write_rules(directory, thresholds=None):
    """recording.yml and alerts.yml as the role renders them, for vLLM 0.32.0 on NPU and GPU nodes behind vLLM's router
    (its regular mode). The test copy of
    the alerts leaves out the annotations (promtool compares them verbatim; `check rules` checks their templates on
    the role's own rendering)."""
    recording = _monitoring.recording_rules("vllm", "0.32.0", ["npu", "gpu"], "regular")
    alerts = _monitoring.alert_rules(thresholds or {})
    for group in alerts["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations")
    for name, doc in (("recording.yml", recording), ("alerts.yml", alerts)):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            yaml.safe_dump(doc, handle, width=1000, sort_keys=False)
    shutil.copy(ALERTS_TEST, directory)


@pytest.mark.parametrize("engine, version, accelerators, router", [
    ("vllm", "0.32.0", ["npu", "gpu"], ""),
    ("vllm", "0.32.0", ["npu", "gpu"], "regular"),
    ("vllm", "0.8.5", ["npu"], ""),
    ("vllm_ascend", "0.9.1", ["npu"], "pd"),
    ("sglang", "0.5.0", ["gpu"], ""),
    ("mindie", "2.3.0", ["npu"], ""),
])
def test_promtool_accepts_every_rule_file_the_role_can_write(tmp_path, engine, version, accelerators, router):
    (tmp_path / "recording.yml").write_text(
        yaml.safe_dump(_monitoring.recording_rules(engine, version, accelerators, router), width=1000, sort_keys=False))
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(_monitoring.alert_rules(), width=1000, sort_keys=False))
    result = promtool("check", "rules", "recording.yml", "alerts.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    alerts = len(_monitoring.alert_rules()["groups"][0]["rules"])
    assert alerts == 19 and "SUCCESS: %d rules found" % alerts in result.stdout


def test_every_alert_fires_where_it_must_and_nowhere_else(tmp_path):
    write_rules(str(tmp_path))
    result = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    # Every alert of the role is exercised by the test file.
    with open(ALERTS_TEST, encoding="utf-8") as handle:
        tested = {case["alertname"] for test in yaml.safe_load(handle)["tests"] for case in test["alert_rule_test"]}
    assert tested == {rule["alert"] for rule in _monitoring.alert_rules()["groups"][0]["rules"]}


@pytest.mark.parametrize("thresholds, alert", [
    ({"ttft_p99_seconds": 30}, "LLMTimeToFirstTokenHigh"),
    ({"kv_cache_ratio": 0.999}, "LLMKVCacheFull"),
    ({"queue_waiting": 50}, "LLMQueueGrowing"),
    ({"pfc_rx_frames_per_second": 5000}, "AcceleratorPFCStorm"),
    ({"temperature_celsius": 105}, "AcceleratorHot"),
    ({"accel_memory_ratio": 0.999}, "AcceleratorMemoryNearFull"),
    ({"not_serving_for": "10m"}, "LLMEngineNotServing"),
])
def test_a_threshold_above_the_fault_silences_its_alert_and_the_test_says_so(tmp_path, thresholds, alert):
    # The same test file against rules whose threshold sits above the injected fault: promtool must fail on
    # exactly that alert, which shows the test reads the thresholds and can fail.
    write_rules(str(tmp_path), thresholds)
    result = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    failed = {line.split("alertname: ")[1].split(",")[0] for line in output.splitlines() if "alertname: " in line}
    assert failed == {alert}, output
