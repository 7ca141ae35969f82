# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Prometheus's HTTP API read from inside a node, and the fakes' fault knobs, for the monitoring tests of the
default and profiles scenarios. Loaded by the tests with importlib, as perimeter.py is."""

from __future__ import annotations

import json
import time
import urllib.parse

FAKE_LIB = "/usr/local/lib/llm-cluster-fakes"


def api(node, address, path, port=9090, **params):
    """GET Prometheus's API from the node itself (the controller is no member: the nodes' tables drop it)."""
    url = "http://%s:%d%s?%s" % (address, port, path, urllib.parse.urlencode(params))
    out = node.check_output("python3 -c %s",
                            "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(%r, timeout=10)"
                            ".read().decode())" % url)
    body = json.loads(out)
    assert body["status"] == "success", body
    return body["data"]


def firing(alerts, alert):
    """(node, device) of each firing instance of `alert` in the data of /api/v1/alerts, sorted."""
    return sorted((a["labels"].get("node"), a["labels"].get("device")) for a in alerts["alerts"]
                  if a["labels"]["alertname"] == alert and a["state"] == "firing")


def wait_for(check, timeout=120, step=3):
    """check() until it returns something true or the timeout passed; its last result."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(step)


def set_fault(node, knob, device, value):
    """Set (or with None clear) a per-device knob of the node's fake accelerators in its runtime overlay, as the
    fake tools do; the fake exporters read it at their next scrape."""
    script = ("import sys; sys.path.insert(0, %r); import _fakelib as fl\n"
              "def change(r):\n"
              "    k = r.setdefault(%r, {})\n"
              "    k.pop(%r, None) if %r is None else k.update({%r: %r})\n"
              "fl.State('test').update_runtime(change)\n") % (FAKE_LIB, knob, str(device), value, str(device), value)
    node.check_output("python3 -c %s", script)
