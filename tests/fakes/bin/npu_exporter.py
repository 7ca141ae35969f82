# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Fake Ascend npu-exporter (MindCluster NPU Exporter, binary mode) for the container test harness.

Serves GET /metrics on ``-ip``:``-port`` (Go-style flags, as the real binary takes them) from the node's fake state,
re-read on every scrape, so a fault set in the state (``health``, ``link``, ``net_health``, ``ecc_double_bit``,
``pfc_rx_per_second`` knobs) shows at the next scrape, as the real exporter shows it after its next update.

Format, from the real exporter: the label set and value format of a v5.0.0.5 capture on the host
(``id``, ``model_name`` ``<chip>-Ascend-V1``, ``pcie_bus_info``, ``vdie_id`` with dashes, a millisecond timestamp;
tests/fixtures/vendor/npu-exporter-metrics-910b3x8-v5.0.0.5-excerpt.txt), and the HELP/TYPE text and families of
the exporter's own golden output (npu-exporter-metrics-testdata-mindcluster.txt). Values and semantics from its
metric reference (health and network status 1 healthy / 0 not / -1 unknown, link 1 UP / 0 DOWN, HBM in MB).
What no public sample shows, and is this fake's choice: the HELP text of the ECC and PFC families (from the
reference's descriptions), and "Init" network health (no detect address yet) as -1.
"""

from __future__ import annotations

import sys
import time

import _fakelib as fl

VERSION = "v7.1.RC1"


def _network(dev, state):
    status = state.knob("net_health", dev["id"])
    if status is None:
        return 1 if str(state.knob("link", dev["id"], "UP")).upper() == "UP" else 0
    return {"Success": 1, "Init": -1}.get(str(status), 0)


# (family, HELP text, value of a device) in the golden output's order.
FAMILIES = (
    ("npu_chip_info_hbm_total_memory", "the npu hbm total memory", lambda d, s: d.get("hbm_total", 0)),
    ("npu_chip_info_hbm_used_memory", "the npu hbm used memory", lambda d, s: d.get("hbm_used", 0)),
    ("npu_chip_info_health_status", "the npu health status",
     lambda d, s: 1 if str(s.knob("health", d["id"], d.get("health", "OK"))) == "OK" else 0),
    ("npu_chip_info_link_status", "the npu link status",
     lambda d, s: 1 if str(s.knob("link", d["id"], "UP")).upper() == "UP" else 0),
    ("npu_chip_info_network_status", "the npu network health status", _network),
    ("npu_chip_info_power", "the npu power", lambda d, s: d.get("power", 0)),
    ("npu_chip_info_temperature", "the npu temperature", lambda d, s: d.get("temp", 0)),
    ("npu_chip_info_utilization", "the ai core utilization", lambda d, s: d.get("aicore", 0)),
    ("npu_chip_info_hbm_ecc_double_bit_error_cnt", "the npu hbm double bit error count",
     lambda d, s: int(s.knob("ecc_double_bit", d["id"], 0))),
    ("npu_chip_mac_rx_pfc_pkt_num", "the npu mac received pfc packet number",
     lambda d, s: int(float(s.knob("pfc_rx_per_second", d["id"], 0)) * time.time())),
)


def _labels(dev):
    vdie = "-".join(str(dev.get("vdie_id", "")).split())
    model = "%s-%s-%s" % (dev.get("name", ""), dev.get("chip_type", "Ascend"), dev.get("chip_version", "V1"))
    return 'id="%s",model_name="%s",pcie_bus_info="%s",vdie_id="%s"' % (dev["id"], model, dev.get("bus_id", ""), vdie)


def render():
    state = fl.State("npu-exporter")
    devices = state.devices("npu", "id")
    stamp = int(time.time() * 1000)
    out = ["# HELP machine_npu_nums Amount of npu installed on the machine.", "# TYPE machine_npu_nums gauge",
           "machine_npu_nums %d" % len(devices)]
    for name, text, value in FAMILIES:
        out += ["# HELP %s %s" % (name, text), "# TYPE %s gauge" % name]
        for dev in devices:
            out.append("%s{%s} %s %d" % (name, _labels(dev), value(dev, state), stamp))
    out += ["# HELP npu_exporter_version_info exporter version with value '1'", "# TYPE npu_exporter_version_info gauge",
            'npu_exporter_version_info{exporterVersion="%s"} 1' % VERSION]
    return "\n".join(out) + "\n"


def flags(argv):
    """-name=value or -name value (Go's flag package; one or two dashes)."""
    values = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        if not arg.startswith("-"):
            raise SystemExit("npu-exporter (fake): unexpected argument %r" % arg)
        name, equals, value = arg.lstrip("-").partition("=")
        if not equals and args and not args[0].startswith("-"):
            value = args.pop(0)
        values[name] = value
    return values


def main(argv):
    opts = flags(argv)
    if not opts.get("ip"):
        # The real exporter refuses to start without -ip.
        sys.stderr.write("npu-exporter (fake): the parameter -ip is required\n")
        return 1
    fl.serve_metrics((opts["ip"], int(opts.get("port") or 8082)), render)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
