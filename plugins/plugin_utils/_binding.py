# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Controller-side rules of the process binding: affinity_apply's rules from the planner's process plan."""

from __future__ import annotations


def affinity_rules(plan, optional=False):
    """One affinity_apply rule per planned process with cores, in plan order: each engine core process
    (``VLLM::EngineCore_DP<n>``) by its full title; each worker by its own title and its engine's (its parent:
    vLLM leaves the DP part out of a dense model's worker titles). Full titles are matched in the command line,
    as the planner writes them, so DP1 never matches DP10."""
    rules = []
    for group in (plan or {}).get("groups") or []:
        if group.get("engine_cores"):
            rules.append({"cmdline": group.get("engine_match"), "cpus": group["engine_cores"], "optional": optional})
        for worker in group.get("workers") or []:
            if worker.get("cores"):
                rules.append({"cmdline": worker.get("match"), "parent_cmdline": worker.get("parent_match"),
                              "cpus": worker["cores"], "optional": optional})
    return rules
