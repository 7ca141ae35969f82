# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _monitoring


def monitoring_recording_rules(engine, version, accelerators=("npu", "gpu"), router=""):
    """The ``llm:*`` and ``accel:*`` recording rules for ``engine`` at ``version`` (and vLLM's router in ``router``
    mode, "regular" or "pd"); see plugin_utils/_monitoring.py."""
    try:
        return _monitoring.recording_rules(str(engine), str(version or ""), list(accelerators), str(router or ""))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("monitoring_recording_rules: %s" % exc)


def monitoring_alert_rules(thresholds=None):
    """The alerts with ``thresholds`` (monitoring_alert_thresholds) over the defaults."""
    if thresholds is not None and not isinstance(thresholds, Mapping):
        raise AnsibleFilterError("monitoring_alert_rules expects a mapping of thresholds, got %s" % type(thresholds).__name__)
    try:
        return _monitoring.alert_rules(dict(thresholds or {}))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def monitoring_required_metrics(rule_files, dashboards=()):
    """Job -> {metric name: [where used]} for the rule files (each a parsed rule file) and Grafana dashboards."""
    if not isinstance(rule_files, (list, tuple)):
        rule_files = [rule_files]
    merged = {"groups": []}
    for rules in rule_files:
        if not isinstance(rules, Mapping):
            raise AnsibleFilterError("monitoring_required_metrics expects parsed rule files, got %s" % type(rules).__name__)
        merged["groups"].extend(rules.get("groups", []))
    return _monitoring.required_metrics(merged, list(dashboards or ()))


def monitoring_missing_metrics(pages, required):
    """The truth check: for each scraped page {job, instance, text}, the required names it does not serve."""
    if not isinstance(pages, (list, tuple)) or not all(isinstance(page, Mapping) and "job" in page for page in pages):
        raise AnsibleFilterError("monitoring_missing_metrics expects a list of pages {job, instance, text}")
    return _monitoring.missing_metrics(required, pages)


def monitoring_plan(nodes, settings):
    """Targets, rules and Prometheus's configuration from the member records; see plugin_utils/_monitoring.py."""
    if not isinstance(nodes, (list, tuple)) or not isinstance(settings, Mapping):
        raise AnsibleFilterError("monitoring_plan expects the member records and the settings mapping")
    try:
        return _monitoring.plan(list(nodes), dict(settings))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("monitoring_plan: %s" % exc)


def monitoring_host_port(address, port):
    """``address:port``, an IPv6 address in brackets."""
    try:
        return _monitoring.host_port(address, port)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("monitoring_host_port: %s" % exc)


def monitoring_scrape_list(targets):
    """[{job, target}] for every address Prometheus scrapes."""
    if not isinstance(targets, Mapping):
        raise AnsibleFilterError("monitoring_scrape_list expects the plan's targets, got %s" % type(targets).__name__)
    return _monitoring.scrape_list(targets)


def monitoring_pages(results):
    """The truth check's pages {job, instance, text} from the uri results of monitoring_scrape_list's items."""
    try:
        return _monitoring.pages(list(results))
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("monitoring_pages expects the results of the /metrics reads: %s" % exc)


def monitoring_missing_lines(report):
    """The truth check's report as one line per missing name."""
    return _monitoring.missing_lines(list(report))


def monitoring_report(plan, targets_api, missing=None):
    """artifacts/monitoring.json from the plan, the uri result of Prometheus's /api/v1/targets and the truth check."""
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("monitoring_report expects the monitoring plan")
    return _monitoring.report(dict(plan), dict(targets_api) if isinstance(targets_api, Mapping) else {}, missing)


def monitoring_report_lines(doc):
    """artifacts/monitoring.json as lines for the play output."""
    return _monitoring.report_lines(doc)


def monitoring_exposed_metrics(text):
    """The metric names a /metrics page serves, sorted."""
    return sorted(_monitoring.exposed_metric_names(text))


class FilterModule(object):
    def filters(self):
        return {
            "monitoring_alert_rules": monitoring_alert_rules,
            "monitoring_exposed_metrics": monitoring_exposed_metrics,
            "monitoring_host_port": monitoring_host_port,
            "monitoring_missing_lines": monitoring_missing_lines,
            "monitoring_missing_metrics": monitoring_missing_metrics,
            "monitoring_pages": monitoring_pages,
            "monitoring_scrape_list": monitoring_scrape_list,
            "monitoring_plan": monitoring_plan,
            "monitoring_recording_rules": monitoring_recording_rules,
            "monitoring_report": monitoring_report,
            "monitoring_report_lines": monitoring_report_lines,
            "monitoring_required_metrics": monitoring_required_metrics,
        }
