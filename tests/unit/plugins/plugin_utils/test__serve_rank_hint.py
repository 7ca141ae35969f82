# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The readiness probe's failure line for data-parallel ranks that answered nothing beside ranks that did: a headless
rank started alone (its node rebooted, a run stopped after starting it) waits for an API node's engine that never
takes it in (measured on the demo, docs/node-replacement.md). The ranks are the probe's own ``ranks`` as
plugins/modules/serve_probe.py returns them; the plans are _serve.plan's for llm_solution's data-parallel layout."""

from __future__ import annotations

import pytest

from ansible_collections.aihost.llm_cluster.plugins.filter import serve as serve_filter
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _serve


def dp_plan(nodes, per_node):
    hosts = [{"host": name, "address": "10.0.0.%d" % (i + 1), "accelerator": "npu", "count": per_node}
             for i, name in enumerate(nodes)]
    return _serve.plan(hosts, {"backend": "vllm", "topology": "dp", "model_path": "/models/m", "model_name": "m",
                               "port": 8000, "tensor_parallel_size": per_node})


def ranks(*statuses):
    # A rank that answered has its HTTP status; one that did not, None (serve_probe.py's generate()).
    return [{"rank": i, "status": status, "completion_tokens": 1 if status == 200 else None}
            for i, status in enumerate(statuses)]


def test_a_silent_headless_rank_is_named_with_its_node_and_the_ways_to_start_the_group():
    plan = dp_plan(["master1", "worker1"], 8)
    assert [(n, plan["nodes"][n]["dp_start_rank"]) for n in ("master1", "worker1")] == [("master1", 0), ("worker1", 1)]
    [line] = serve_filter.serve_rank_hint(ranks(200, None), plan)
    assert line.startswith("rank 1 (worker1) answered nothing while rank 0 answered: ")
    assert "./deploy.sh rolling-restart" in line and "serve_watchdog_failures" in line


def test_several_silent_ranks_on_several_nodes_are_each_named():
    plan = dp_plan(["master1", "worker1", "worker2", "worker3"], 8)
    [line] = _serve.silent_ranks_hint(ranks(200, None, 200, None), plan)
    assert line.startswith("rank 1 (worker1), rank 3 (worker3) answered nothing while ranks 0, 2 answered: ")


@pytest.mark.parametrize("statuses", [
    (200, 200),          # every rank answered: nothing to say
    (None, None),        # none answered: the engine itself is down, the diagnosis says why
    (200, 500),          # an answer with an error: the probe's own message names it
    (None, 200),         # the API node's own rank: not one left outside its engine
    (),
])
def test_no_line_unless_some_ranks_answered_and_others_did_not(statuses):
    assert _serve.silent_ranks_hint(ranks(*statuses), dp_plan(["master1", "worker1"], 8)) == []


@pytest.mark.parametrize("value", [None, "rank 1", {"rank": 1}, [None, "x", {"rank": "1", "status": None}]])
def test_what_is_no_list_of_ranks_gives_no_line(value):
    assert _serve.silent_ranks_hint(value, dp_plan(["master1", "worker1"], 8)) == []


@pytest.mark.parametrize("plan", [None, {}, "dp", {"nodes": None}, {"nodes": ["worker1"]}, {"nodes": {"worker1": None}},
                                  {"nodes": {"worker1": {"dp_start_rank": "1", "dp_local": 1}}}])
def test_a_plan_without_ranks_still_names_the_rank(plan):
    [line] = _serve.silent_ranks_hint(ranks(200, None), plan)
    assert line.startswith("rank 1 answered nothing while rank 0 answered: ")
