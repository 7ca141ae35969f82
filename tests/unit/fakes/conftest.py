# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Helpers for the tests of the fake vendor tools: run them as processes on fake nodes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FAKES = ROOT / "tests" / "fakes"
VENDOR = ROOT / "tests" / "fixtures" / "vendor"


class FakeNode:
    """One fake host: its own state file and hccn.conf, a fabric directory shared with other nodes."""

    def __init__(self, base: Path, hostname: str, fabric: Path) -> None:
        self.dir = base / hostname
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state_path = self.dir / "state.json"
        self.hccn_conf = self.dir / "hccn.conf"
        self.env = {
            **os.environ,
            # the wrappers run `python3`: make it the interpreter running the tests
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
            "LLM_CLUSTER_FAKE_STATE": str(self.state_path),
            "LLM_CLUSTER_FAKE_HCCN_CONF": str(self.hccn_conf),
            "LLM_CLUSTER_FAKE_FABRIC": str(fabric),
            "LLM_CLUSTER_FAKE_HOSTNAME": hostname,
        }

    def write(self, state: dict) -> FakeNode:
        self.state_path.write_text(json.dumps(state, indent=2), encoding="utf-8")
        return self

    def run(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(FAKES / "bin" / tool), *args], env=self.env, capture_output=True, text=True, check=False, timeout=60
        )


@pytest.fixture
def make_node(tmp_path):
    """``make_node(hostname, state)`` -> a FakeNode on the test's shared fabric directory."""

    def make(hostname: str, state: dict) -> FakeNode:
        return FakeNode(tmp_path, hostname, tmp_path / "fabric").write(state)

    return make


@pytest.fixture(name="vendor")
def fixture_vendor():
    """``vendor(name)`` -> the text of a verbatim vendor sample in tests/fixtures/vendor."""
    return lambda name: (VENDOR / name).read_text(encoding="utf-8")


@pytest.fixture(name="profile")
def fixture_profile():
    """``profile(name)`` -> a fresh copy of a state profile from tests/fakes/profiles."""
    return lambda name: json.loads((FAKES / "profiles" / f"{name}.json").read_text(encoding="utf-8"))


def scrape(url: str) -> str:
    """A fake exporter's page, checked for Prometheus's text format 0.0.4 as a real exporter announces it."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return response.read().decode()


@pytest.fixture(name="run_exporter")
def fixture_run_exporter():
    """``run_exporter(node, script, arguments)`` -> the URL of a fake exporter's /metrics, started as a process on
    the node with ``arguments(port)`` on a free loopback port; stopped after the test."""
    processes = []

    def run(node: FakeNode, script: str, arguments) -> str:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        processes.append(subprocess.Popen([sys.executable, "-B", str(FAKES / "bin" / script), *arguments(port)],
                                          env=node.env))
        url = "http://127.0.0.1:%d/metrics" % port
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                time.sleep(0.1)
        return url

    yield run
    for process in processes:
        process.terminate()
        process.wait(timeout=10)
