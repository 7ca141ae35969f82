# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import math

import pytest

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _model_distribution as md

GIB = 1024 ** 3


def test_fanout_doubles_the_holders_each_round():
    rounds = md.fanout_plan(["m1"], ["w1", "w2", "w3", "w4"])
    assert rounds == [[{"src": "m1", "dst": "w1"}],
                      [{"src": "m1", "dst": "w2"}, {"src": "w1", "dst": "w3"}],
                      [{"src": "m1", "dst": "w4"}]]


@pytest.mark.parametrize("needers", [1, 2, 3, 4, 7, 8, 15, 16, 63])
def test_rounds_are_ceil_log2_of_n_plus_one(needers):
    names = ["n%d" % i for i in range(needers)]
    rounds = md.fanout_plan(["src"], names)
    assert len(rounds) == math.ceil(math.log2(needers + 1))
    sent = [pair["dst"] for round_ in rounds for pair in round_]
    assert sorted(sent) == sorted(names)
    for index, round_ in enumerate(rounds):
        senders = [pair["src"] for pair in round_]
        assert len(senders) == len(set(senders)), "a node sends to one receiver per round"
        holders = {"src"} | {pair["dst"] for earlier in rounds[:index] for pair in earlier}
        assert set(senders) <= holders, "only verified copies send"


def test_nodes_that_already_hold_a_copy_send_from_the_first_round():
    assert md.fanout_plan(["m1", "w1", "w2"], ["w3", "w4"]) == [[{"src": "m1", "dst": "w3"}, {"src": "w1", "dst": "w4"}]]
    assert md.fanout_plan(["m1"], []) == []
    with pytest.raises(ValueError):
        md.fanout_plan([], ["w1"])


def node(host, bad=(), missing=0, free=100 * GIB, mismatches=()):
    return {"host": host, "path": "/srv/models/m", "ok": not bad, "bad_files": list(bad), "missing_bytes": missing,
            "free_bytes": free, "mismatches": list(mismatches)}


def test_plan_sends_only_to_nodes_with_bad_files():
    nodes = [node("w1"), node("w2", ["a.safetensors"], GIB), node("w3", ["b"], GIB)]
    result = md.plan(nodes, {"source": "m1", "disk_factor": 1.1, "strategy": "rounds"})
    assert result == {"ok": True, "failures": [], "needers": ["w2", "w3"], "wait": False,
                      "rounds": [[{"src": "m1", "dst": "w2"}, {"src": "w1", "dst": "w3"}]]}


def test_chain_pipelines_every_empty_node_behind_the_source():
    nodes = [node("w%d" % i, ["a", "b"], GIB, mismatches=[{"path": "a", "reason": "missing"}]) for i in range(1, 5)]
    result = md.plan(nodes, {"source": "m1", "disk_factor": 1.1})
    assert result["wait"] is True
    assert result["rounds"] == [[{"src": "m1", "dst": "w1"}, {"src": "w1", "dst": "w2"}, {"src": "w2", "dst": "w3"},
                                 {"src": "w3", "dst": "w4"}]]


def test_chain_starts_one_chain_per_holder_and_repairs_damaged_copies_from_a_holder():
    damaged = node("w2", ["a"], GIB, mismatches=[{"path": "a", "reason": "sha256"}])
    empty = [node(h, ["a", "b"], GIB) for h in ("w3", "w4", "w5")]
    result = md.plan([node("w1"), damaged] + empty, {"source": "m1", "disk_factor": 1.1, "strategy": "chain"})
    assert result["rounds"] == [[{"src": "m1", "dst": "w3"}, {"src": "w1", "dst": "w4"}, {"src": "w3", "dst": "w5"},
                                 {"src": "m1", "dst": "w2"}]]


def test_star_pulls_from_the_holders_at_once():
    nodes = [node("w%d" % i, ["a"], GIB) for i in range(1, 4)]
    result = md.plan(nodes, {"source": "m1", "strategy": "star"})
    assert result["wait"] is False
    assert result["rounds"] == [[{"src": "m1", "dst": "w1"}, {"src": "m1", "dst": "w2"}, {"src": "m1", "dst": "w3"}]]


def located(host, place, bad=(), missing=0):
    record = node(host, bad, missing)
    record["locality"] = place
    return record


def test_a_replaced_node_takes_its_files_from_a_holder_in_its_own_rack():
    # The source and w1 in rack a, w2 to w4 in rack b; w4 was replaced and lacks two shards.
    nodes = [located("w1", "rack-a"), located("w2", "rack-b"), located("w3", "rack-b"),
             located("w4", "rack-b", ["s3", "s4"], GIB)]
    settings = {"source": "m1", "source_locality": "rack-a", "disk_factor": 1.1}
    assert md.plan(nodes, settings)["rounds"] == [[{"src": "w2", "dst": "w4"}]]
    # Without places, the same replacement takes them from the source, as before.
    unplaced = [dict(record, locality=None) for record in nodes]
    assert md.plan(unplaced, {"source": "m1", "disk_factor": 1.1})["rounds"] == [[{"src": "m1", "dst": "w4"}]]
    assert md.plan(nodes, dict(settings, strategy="star"))["rounds"] == [[{"src": "w2", "dst": "w4"}]]


def test_the_model_crosses_into_each_rack_once():
    empty = ["a", "b"]
    nodes = [located("b1", "rack-b", empty, GIB), located("a1", "rack-a", empty, GIB),
             located("b2", "rack-b", empty, GIB), located("c1", "rack-c", empty, GIB),
             located("b3", "rack-b", empty, GIB), located("a2", "rack-a", empty, GIB)]
    links = md.plan(nodes, {"source": "m1", "source_locality": "rack-a", "disk_factor": 1.1})["rounds"][0]
    place = {"m1": "rack-a", "a1": "rack-a", "a2": "rack-a", "b1": "rack-b", "b2": "rack-b", "b3": "rack-b",
             "c1": "rack-c"}
    assert sorted(link["dst"] for link in links) == sorted(n["host"] for n in nodes)
    crossings = [(link["src"], link["dst"]) for link in links if place[link["src"]] != place[link["dst"]]]
    assert len(crossings) == 2 and {place[dst] for _src, dst in crossings} == {"rack-b", "rack-c"}
    # Every node receives once and sends to at most one other (a chain), and the source starts it.
    senders = [link["src"] for link in links]
    assert len(senders) == len(set(senders)) and "m1" in senders


def test_damaged_copies_are_repaired_from_a_holder_in_their_rack():
    damaged = located("b2", "rack-b", ["a"], GIB)
    damaged["mismatches"] = [{"path": "a", "reason": "sha256"}]
    nodes = [located("a1", "rack-a"), located("b1", "rack-b"), damaged]
    result = md.plan(nodes, {"source": "m1", "source_locality": "rack-a", "disk_factor": 1.1})
    assert result["rounds"] == [[{"src": "b1", "dst": "b2"}]]


@pytest.mark.parametrize("place", [["rack-a"], {"rack": "a"}, 3, True])
def test_a_locality_that_is_not_a_label_is_refused_naming_the_host(place):
    with pytest.raises(ValueError, match="w1: model_distribution_locality must be a string"):
        md.plan([located("w1", place, ["a"], GIB)], {"source": "m1", "disk_factor": 1.1})


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError):
        md.plan([], {"source": "m1", "strategy": "torrent"})


def test_disk_gate_names_host_path_and_shortfall_and_plans_nothing():
    result = md.plan([node("w1", ["a"], 256 * 1024 ** 2, free=16 * 1024 ** 2)], {"source": "m1", "disk_factor": 1.1})
    assert not result["ok"] and result["rounds"] == []
    assert result["failures"] == [
        "w1: 0.02 GiB free under /srv/models/m, the model needs 0.26 GiB more (0.25 GiB missing x 1.10); "
        "free space there or set model_path to a larger disk"]


def test_shared_filesystem_is_verified_never_copied():
    bad = node("w1", ["a"], GIB, mismatches=[{"path": "a", "reason": "missing"}])
    result = md.plan([bad, node("w2")], {"source": "m1", "shared": True})
    assert result["rounds"] == [] and result["needers"] == []
    assert result["failures"] == ["w1: /srv/models/m on the shared filesystem differs from m1's view: a (missing); "
                                  "check the mount on w1"]


@pytest.mark.parametrize("hub, package", [("huggingface", "huggingface_hub"), ("modelscope", "modelscope"),
                                          ("modelers", "openmind_hub")])
def test_hub_commands_keep_the_token_out_of_argv(hub, package, tmp_path):
    argv = md.hub_command(hub, "deepseek-ai/DeepSeek-R1", "/srv/models/r1", "main", "/opt/llm_cluster/hub/bin/python",
                          "/run/llm_cluster/model/hub-token")
    assert argv[0] == "/opt/llm_cluster/hub/bin/python" and argv[1] == "-c"
    assert argv[3:] == ["deepseek-ai/DeepSeek-R1", "/srv/models/r1", "main", "/run/llm_cluster/model/hub-token"]
    assert "environ" not in argv[2] and "from %s" % package in argv[2]
    compile(argv[2], "<hub>", "exec")
    assert md.hub_package(hub) == package
    assert md.hub_command(hub, "a/b", "/srv/m")[-1] == ""


@pytest.mark.parametrize("hub", ["huggingface", "modelscope", "modelers"])
def test_hub_client_reads_the_token_from_its_file(hub, tmp_path):
    """Run the client code against a stand-in package that records what it was given (not the real hub client)."""
    import subprocess
    import sys
    stub = tmp_path / "stub"
    for module in ("huggingface_hub", "openmind_hub", "modelscope", "modelscope/hub"):
        (stub / module).mkdir(parents=True, exist_ok=True)
    record = ("import json, os\n"
              "def snapshot_download(*args, **kwargs):\n"
              "    open(os.environ['RECORD'], 'a').write(json.dumps([list(args), kwargs]) + '\\n')\n")
    for module in ("huggingface_hub", "openmind_hub", "modelscope"):
        (stub / module / "__init__.py").write_text(record)
    with open(stub / "huggingface_hub" / "__init__.py", "a") as handle:
        handle.write("class HfApi:\n    def model_info(self, repo_id, revision=None, token=None):\n"
                     "        open(os.environ['RECORD'], 'a').write(json.dumps(['model_info', repo_id, token]) + '\\n')\n"
                     "        return type('Info', (), {'sha': '0' * 40})()\n")
    (stub / "modelscope" / "hub" / "__init__.py").write_text("")
    (stub / "modelscope" / "hub" / "api.py").write_text(
        "import json, os\nclass HubApi:\n    def login(self, token):\n"
        "        open(os.environ['RECORD'], 'a').write(json.dumps(['login', token]) + '\\n')\n")
    token_file = tmp_path / "hub-token"
    token_file.write_text("hf_canary\n")
    record_file = tmp_path / "record"
    argv = md.hub_command(hub, "a/b", str(tmp_path / "dest"), "", sys.executable, str(token_file))
    env = {"PYTHONPATH": str(stub), "RECORD": str(record_file), "PATH": "/usr/bin:/bin"}
    subprocess.run(argv, env=env, check=True)
    calls = record_file.read_text()
    assert "hf_canary" in calls and "hf_canary" not in " ".join(argv)
    record_file.unlink()
    subprocess.run(md.hub_command(hub, "a/b", str(tmp_path / "dest"), "", sys.executable), env=env, check=True)
    assert "hf_canary" not in record_file.read_text()


@pytest.mark.parametrize("hub, repo", [("gitee", "a/b"), ("huggingface", "noslash"), ("modelscope", "/a/b"),
                                       ("modelscope", "")])
def test_hub_command_refuses_bad_inputs(hub, repo):
    with pytest.raises(ValueError):
        md.hub_command(hub, repo, "/srv/models/x")
