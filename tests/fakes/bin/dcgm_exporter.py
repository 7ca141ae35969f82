# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Fake NVIDIA dcgm-exporter (binary mode, on the host) for the container test harness.

Serves GET /metrics on ``-a``/``--address`` (``[host]:port``, ":9400" by default, as the real binary takes it) from
the node's fake state, re-read on every scrape: a fault set in the state (``xid`` and ``uncorrectable_remapped_rows``
knobs per GPU index) shows at the next scrape.

Format, from real dcgm-exporter pages (tests/fixtures/vendor/README.md): the HELP and TYPE lines of the families it
serves are the GPU Operator 25.10.0 capture's, word for word; the label set is the one of the EKS capture's GPUs
without a pod (``gpu``, ``UUID``, ``pci_bus_id``, ``device`` nvidia<N>, ``modelName``, ``Hostname``,
``DCGM_FI_DRIVER_VERSION``: no container/namespace/pod labels outside Kubernetes), and ``DCGM_FI_DEV_XID_ERRORS``
carries ``err_code`` and ``err_msg`` as the GPU Operator capture shows ("0", "No Error"). What no public sample
shows, and is this fake's choice: the err_msg of a non-zero XID ("XID <code>"), and a page of only these families
(the real default set has more, each its own family).
"""

from __future__ import annotations

import sys

import _fakelib as fl

# (family, TYPE, HELP text as the real exporter prints it, value of a device) in the capture's order.
FAMILIES = (
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda d, s: d.get("temperature", 0)),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda d, s: "%.6f" % float(d.get("power_draw", 0))),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda d, s: d.get("utilization", 0)),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", lambda d, s: int(s.knob("xid", d["index"], 0))),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
     lambda d, s: int(d.get("memory_total", 0)) - int(d.get("memory_used", 0))),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", lambda d, s: int(d.get("memory_used", 0))),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors",
     lambda d, s: int(s.knob("uncorrectable_remapped_rows", d["index"], 0))),
)


def _labels(dev, state, family):
    labels = [("gpu", dev["index"]), ("UUID", dev.get("uuid", "")), ("pci_bus_id", dev.get("bus_id", "")),
              ("device", "nvidia%s" % dev["index"]), ("modelName", dev.get("name", "")), ("Hostname", state.hostname),
              ("DCGM_FI_DRIVER_VERSION", state.get("driver_version", ""))]
    if family == "DCGM_FI_DEV_XID_ERRORS":
        code = int(state.knob("xid", dev["index"], 0))
        labels += [("err_code", code), ("err_msg", "No Error" if code == 0 else "XID %d" % code)]
    return ",".join('%s="%s"' % (name, value) for name, value in labels)


def render():
    state = fl.State("dcgm-exporter")
    devices = state.devices("gpu", "index")
    out = []
    for name, kind, text, value in FAMILIES:
        out += ["# HELP %s %s" % (name, text), "# TYPE %s %s" % (name, kind)]
        for dev in devices:
            out.append("%s{%s} %s" % (name, _labels(dev, state, name), value(dev, state)))
    return "\n".join(out) + "\n"


def address(argv):
    """The listen address of -a/--address (Go's flag syntax: -a value, -a=value, --address value)."""
    args = list(argv)
    value = ":9400"
    while args:
        arg = args.pop(0)
        name, equals, given = arg.lstrip("-").partition("=")
        if name in ("a", "address"):
            value = given if equals else (args.pop(0) if args else "")
    host, _colon, port = value.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port or 9400)


def main(argv):
    fl.serve_metrics(address(argv), render)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
