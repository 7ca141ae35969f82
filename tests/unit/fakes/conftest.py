# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Helpers for the tests of the fake vendor tools: run them as processes on fake nodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
