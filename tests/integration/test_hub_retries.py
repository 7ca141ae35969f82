# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The model_distribution role's hub step (tasks_from source_hub), run by ansible-playbook on the controller
with the real huggingface_hub client (the controller's venv has it) against tests/fakes/hf_hub_server.py,
reached through model_distribution_hub_environment's HF_ENDPOINT.

* The Hub answering 503 twice: the step is retried and the model arrives, byte for byte.
* The Hub down for good while the model directory already holds part of the model: the step fails on the
  controller's host with the Hub's answer after its tries. (huggingface_hub alone returns the partial
  directory with exit 0 here: the role resolves the revision first.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("huggingface_hub")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAKE = os.path.join(ROOT, "tests", "fakes", "hf_hub_server.py")
BIN = os.path.dirname(sys.executable)
PLAY = """
- name: Download the model from the hub
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Run the hub step of model_distribution
      ansible.builtin.include_role:
        name: aihost.llm_cluster.model_distribution
        tasks_from: source_hub
"""


@pytest.fixture
def hub(tmp_path):
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "model.safetensors").write_bytes(os.urandom(256 * 1024))
    (repo / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}\n')
    (repo / "sub" / "tokenizer.json").write_text('{"version": "1.0"}\n')
    servers = []

    def start(fail_info):
        port_file, log = tmp_path / ("port-%d" % len(servers)), tmp_path / ("log-%d" % len(servers))
        proc = subprocess.Popen([sys.executable, FAKE, "--root", str(repo), "--repo", "org/tiny", "--port-file",
                                 str(port_file), "--fail-info", str(fail_info), "--log", str(log)])
        servers.append(proc)
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the fake hub did not start"
            time.sleep(0.1)
        return "http://127.0.0.1:%s" % port_file.read_text(), log

    yield repo, start
    for proc in servers:
        proc.terminate()
        proc.wait()


def run_step(tmp_path, endpoint, dest, retries, delay):
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps({
        "__model_distribution_source": "localhost",
        "ansible_python_interpreter": sys.executable,
        "model_distribution_hub": "huggingface",
        "model_distribution_repo": "org/tiny",
        "model_distribution_path": str(dest),
        # The controller's venv holds huggingface_hub already: pip installs nothing and needs no index.
        "model_distribution_hub_venv": sys.prefix,
        "model_distribution_hub_pip_extra_args": "--no-index",
        "model_distribution_hub_environment": {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf-home")},
        "model_distribution_fetch_retries": retries,
        "model_distribution_fetch_delay": delay,
    }))
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""), ANSIBLE_NOCOLOR="1")
    return subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", str(play), "-e", "@%s" % extra],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env,
                          timeout=600, check=False)


def info_answers(log):
    return [line.split()[-1] for line in log.read_text().splitlines() if line.startswith("GET /api/models/org/tiny ")
            or line.startswith("GET /api/models/org/tiny/revision/")]


def test_a_hub_answering_503_twice_is_retried_and_the_model_arrives(hub, tmp_path):
    repo, start = hub
    endpoint, log = start(fail_info=2)
    dest = tmp_path / "dest"
    result = run_step(tmp_path, endpoint, dest, retries=3, delay=1)
    assert result.returncode == 0, result.stdout[-4000:]
    assert info_answers(log) == ["503", "503", "200"]
    assert result.stdout.count("FAILED - RETRYING: [localhost]: Source | Run the hub's client") == 2, result.stdout[-4000:]
    for name in ("model.safetensors", "config.json", "sub/tokenizer.json"):
        assert (dest / name).read_bytes() == (repo / name).read_bytes(), name


def test_a_hub_that_stays_down_fails_after_its_tries_even_over_a_partial_copy(hub, tmp_path):
    repo, start = hub
    endpoint, log = start(fail_info=1000)
    dest = tmp_path / "dest"
    dest.mkdir()
    # What an interrupted download leaves: some files, not the weights.
    (dest / "config.json").write_bytes((repo / "config.json").read_bytes())
    result = run_step(tmp_path, endpoint, dest, retries=1, delay=0)
    assert result.returncode != 0, result.stdout[-4000:]
    assert info_answers(log) == ["503", "503"]
    # One try and one retry; then the failure names the host and carries the Hub's answer.
    assert result.stdout.count("FAILED - RETRYING: [localhost]: Source | Run the hub's client") == 1
    fatal = result.stdout[result.stdout.index("fatal: [localhost]"):]
    assert "503 Service Unavailable" in fatal, result.stdout[-4000:]
    assert not (dest / "model.safetensors").exists()
