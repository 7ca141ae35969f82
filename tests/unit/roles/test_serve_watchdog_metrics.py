# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The inference watchdog's gauges for node_exporter's textfile collector (roles/serve/files/llm_cluster_watchdog.py):
Prometheus's own promtool reads them, hostile names stay inside their labels, and the monitoring role's
LLMEngineNotServing reads results the watchdog writes."""

from __future__ import annotations

import os
import re
import stat
import subprocess

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _monitoring
from role_files import load_role_file

watchdog = load_role_file("serve", "llm_cluster_watchdog.py")

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
PROMTOOL = os.environ.get("LLM_CLUSTER_PROMTOOL") or os.path.join(ROOT, ".cache", "bin", "promtool")
CONFIG = {"name": "llm-cluster-engine.service", "mode": "leader"}
STATE = {"result": "failing", "failures": 2, "restarts": [{"at": 100.0}], "checked_at": 1764930000.25}


def promtool_lint(text):
    assert os.access(PROMTOOL, os.X_OK), "promtool missing at %s: make unit fetches it (tests/promtool/get-promtool.sh)" % PROMTOOL
    return subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60, check=False)


def samples(text):
    return dict(re.findall(r"^(llm_cluster_watchdog_[a-z_]+\{[^}]*\}) (\S+)$", text, re.M))


def test_promtool_reads_the_gauges_without_a_complaint():
    result = promtool_lint(watchdog.metrics_text(CONFIG, STATE))
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_the_gauges_say_what_the_state_says():
    values = samples(watchdog.metrics_text(CONFIG, STATE))
    labels = 'engine="llm-cluster-engine.service",mode="leader"'
    assert values == {"llm_cluster_watchdog_serving{%s}" % labels: "0",
                      "llm_cluster_watchdog_failures{%s}" % labels: "2",
                      "llm_cluster_watchdog_restarts{%s}" % labels: "1",
                      "llm_cluster_watchdog_held{%s}" % labels: "0",
                      "llm_cluster_watchdog_last_check_timestamp_seconds{%s}" % labels: "1764930000.25",
                      'llm_cluster_watchdog_result{%s,result="failing"}' % labels: "1"}
    serving = samples(watchdog.metrics_text(CONFIG, {"result": "ok", "checked_at": 5.0}))
    assert serving["llm_cluster_watchdog_serving{%s}" % labels] == "1"
    # A state file from before the first check: every gauge still has a value.
    assert samples(watchdog.metrics_text(CONFIG, {}))['llm_cluster_watchdog_result{%s,result="unknown"}' % labels] == "1"


def test_a_hostile_container_name_stays_inside_its_label():
    config = {"name": 'evil"} 1\nllm_cluster_watchdog_serving{engine="x"} 1\\', "mode": "leader"}
    text = watchdog.metrics_text(config, {"result": "ok", "checked_at": 1.0})
    assert promtool_lint(text).returncode == 0
    # Six families, one sample each: the name added none.
    assert len([line for line in text.splitlines() if not line.startswith("#")]) == 6


def test_written_whole_where_the_textfile_directory_exists_and_nowhere_else(tmp_path):
    target = tmp_path / "node-exporter" / "llm_cluster_watchdog.prom"
    config = dict(CONFIG, textfile=str(target))
    assert watchdog.write_metrics(config, STATE) is False and not target.parent.exists()
    target.parent.mkdir()
    assert watchdog.write_metrics(config, STATE) is True
    assert target.read_text() == watchdog.metrics_text(CONFIG, STATE)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["llm_cluster_watchdog.prom"]
    assert watchdog.write_metrics(dict(CONFIG, textfile=""), STATE) is False


def test_the_alert_reads_results_the_watchdog_writes():
    with open(os.path.join(ROOT, "roles", "serve", "files", "llm_cluster_watchdog.py"), encoding="utf-8") as handle:
        source = handle.read()
    # Each as the watchdog sets it: result="failing", or the conditional result="restarted" if ... else "restart failed".
    written = set(re.findall(r'result="([a-z ]+)"', source)) | set(re.findall(r'result="[a-z ]+" if \w+ else "([a-z ]+)"', source))
    assert set(_monitoring.WATCHDOG_NOT_SERVING) <= written, written
    # Neither a deploy's pause nor a first start is an outage.
    assert not {"paused", "starting", "ok"} & set(_monitoring.WATCHDOG_NOT_SERVING)
