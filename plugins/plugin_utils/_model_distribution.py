# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Controller-side rules of model_distribution: the transfer plans, the disk gate, the hub commands."""

from __future__ import annotations


GIB = 1024 ** 3
HUBS = ("modelscope", "huggingface", "modelers")


def fanout_plan(holders, needers):
    """Rounds of transfers in which every node that holds a verified copy sends to one node that needs it.

    holders: hosts with a verified copy (the source first); needers: hosts that need files, in order.
    Returns [[{"src": h, "dst": n}, ...], ...]: the number of holders doubles each round, so N needers
    from one source take ceil(log2(N + 1)) rounds instead of N transfers from one machine.
    """
    holders = list(holders)
    waiting = [host for host in needers if host not in holders]
    if waiting and not holders:
        raise ValueError("no node holds a verified copy to send from")
    rounds = []
    while waiting:
        pairs = [{"src": src, "dst": dst} for src, dst in zip(holders, waiting)]
        rounds.append(pairs)
        waiting = waiting[len(pairs):]
        holders.extend(pair["dst"] for pair in pairs)
    return rounds


STRATEGIES = ("chain", "rounds", "star")


def chain_plan(holders, needers, repairs, places=None):
    """One round of simultaneous links that pipelines the model file by file.

    Nodes with nothing of their own to repair (only missing files) form chains behind the holders: each
    receives from the node before it while passing on what it already has. Nodes holding damaged files are
    repaired straight from a holder, so that no node ever passes on a file before it is right.

    places: {host: locality} (a rack, a switch: model_distribution_locality); "" or absent is unknown.
    Without any place, the holders head one chain each, round robin. With places, the nodes go place by place
    (the places that have a holder first), and each takes the nearest sender: a holder of its own place that
    sends to no one yet, else the oldest end of a chain there; only the first node of a place without a
    holder takes a holder or a chain end elsewhere, and the others of that place chain behind it, so the
    model crosses into each place once.
    """
    places = places or {}
    holders = list(holders)
    chained = [host for host in needers if host not in repairs]
    direct = [host for host in needers if host in repairs]
    if any(places.get(host) for host in holders + list(needers)):
        links = _chains_by_place(holders, chained, places)
    else:
        links = _chains_round_robin(holders, chained)
    links += _from_nearest(holders, direct, places)
    return [links] if links else []


def _chains_round_robin(holders, chained):
    count = max(1, min(len(holders), len(chained)))
    tails = holders[:count]
    links = []
    for index, host in enumerate(chained):
        links.append({"src": tails[index % count], "dst": host})
        tails[index % count] = host
    return links


def _chains_by_place(holders, chained, places):
    held = {places.get(host) for host in holders if places.get(host)}
    order = []
    for host in chained:
        if places.get(host) not in order:
            order.append(places.get(host))
    rank = {place: (0 if place in held else 1 if place else 2, index) for index, place in enumerate(order)}
    idle, tails, links = list(holders), [], []

    def near(candidates, place):
        return [host for host in candidates if place and places.get(host) == place]

    for host in sorted(chained, key=lambda name: rank[places.get(name)]):
        place = places.get(host) or ""
        for candidates, is_tail in ((near(idle, place), False), (near(tails, place), True),
                                    (idle, False), (tails, True)):
            if candidates:
                src = candidates[0]
                break
        (tails if is_tail else idle).remove(src)
        links.append({"src": src, "dst": host})
        tails.append(host)
    return links


def _from_nearest(holders, hosts, places):
    """One link per host from a holder of its own place, else from any holder; round robin within each pool."""
    links, turns = [], {}
    for host in hosts:
        place = places.get(host) or ""
        local = [holder for holder in holders if place and places.get(holder) == place]
        pool, key = (local, place) if local else (holders, "")
        turn = turns.get(key, 0)
        turns[key] = turn + 1
        links.append({"src": pool[turn % len(pool)], "dst": host})
    return links


def star_plan(holders, needers, places=None):
    """One round in which every node that needs files pulls from a holder (round robin), from one in its
    own place (places: {host: locality}) when there is one."""
    links = _from_nearest(list(holders), needers, places or {})
    return [links] if links else []


def plan(nodes, settings):
    """The whole decision: which nodes need files, whether they fit, and the rounds that send them.

    nodes: [{host, path, ok, bad_files, missing_bytes, free_bytes, mismatches, locality}] for every node but the
    source (locality: model_distribution_locality, a rack or a switch; None or "" is unknown).
    settings: {source, source_locality, shared (bool), disk_factor, strategy (chain, rounds, star)}.
    Returns {ok, failures, needers, rounds, wait}: wait is true when a receiver may have to wait for the
    node it receives from (a chain).
    """
    strategy = settings.get("strategy", "chain")
    if strategy not in STRATEGIES:
        raise ValueError("model_distribution_strategy must be one of %s, got %r" % (", ".join(STRATEGIES), strategy))
    needers = [node["host"] for node in nodes if node.get("bad_files")]
    if settings.get("shared"):
        failures = ["%s: %s on the shared filesystem differs from %s's view: %s; check the mount on %s" % (
            node["host"], node.get("path"), settings.get("source"),
            ", ".join("%s (%s)" % (m["path"], m["reason"]) for m in (node.get("mismatches") or [])[:10]), node["host"])
            for node in nodes if node["host"] in needers]
        return {"ok": not failures, "failures": failures, "needers": [], "rounds": [], "wait": False}
    failures = disk_gate([node for node in nodes if node["host"] in needers], settings.get("disk_factor", 1.1))
    holders = [settings["source"]] + [node["host"] for node in nodes if node["host"] not in needers]
    repairs = {node["host"] for node in nodes
               if any(m.get("reason") in ("size", "sha256") for m in node.get("mismatches") or [])}
    places = localities(nodes, settings)
    rounds = []
    if not failures:
        if strategy == "chain":
            rounds = chain_plan(holders, needers, repairs, places)
        elif strategy == "star":
            rounds = star_plan(holders, needers, places)
        else:
            rounds = fanout_plan(holders, needers)
    return {"ok": not failures, "failures": failures, "needers": needers, "rounds": rounds,
            "wait": strategy == "chain"}


def localities(nodes, settings):
    """{host: locality} of the source and the nodes; a locality that is not a string is refused, naming the host."""
    given = [(settings.get("source"), settings.get("source_locality"))]
    given += [(node["host"], node.get("locality")) for node in nodes]
    places = {}
    for host, place in given:
        if place is None:
            continue
        if not isinstance(place, str):
            raise ValueError("%s: model_distribution_locality must be a string (a rack or a switch name), got %r; "
                             "set it in that host's variables" % (host, place))
        if place.strip():
            places[host] = place.strip()
    return places


def disk_gate(nodes, factor):
    """Free space at each destination must cover what is missing times factor.

    nodes: [{host, path, missing_bytes, free_bytes}]. Returns a list of failure lines (empty when fine).
    """
    failures = []
    for node in nodes:
        need = int(node.get("missing_bytes") or 0) * float(factor)
        free = node.get("free_bytes")
        if need and free is not None and free < need:
            failures.append("%s: %.2f GiB free under %s, the model needs %.2f GiB more (%.2f GiB missing x %.2f); "
                            "free space there or set model_path to a larger disk" % (
                                node["host"], free / GIB, node.get("path"), (need - free) / GIB,
                                int(node["missing_bytes"]) / GIB, float(factor)))
    return failures


# Each hub's own Python client, run on the source node. The token comes from a
# 0600 file whose path is the last argument ("" = no token): never from argv or
# the environment of the task, where ps and -vvv would show it.
_TOKEN = "tf = sys.argv[4]; token = (open(tf).read().strip() if tf else '') or None; "
# huggingface_hub's snapshot_download, asked for a branch or tag while the Hub cannot be
# reached (503, connection refused), returns a local_dir that already holds files as it
# is, with a warning and exit 0 (2.4.0, seen against tests/fakes/hf_hub_server.py): a
# partial download would pass as the model. The revision is resolved to its commit
# first, which fails when the Hub cannot be reached (so the step is retried), and with
# a commit the client returns a local_dir only when its listing of that commit says
# the directory is complete.
_HUB_CODE = {
    "huggingface": ("import sys; from huggingface_hub import HfApi, snapshot_download; " + _TOKEN +
                    "sha = HfApi().model_info(sys.argv[1], revision=sys.argv[3] or None, token=token).sha; "
                    "snapshot_download(repo_id=sys.argv[1], local_dir=sys.argv[2], revision=sha, token=token)"),
    "modelscope": ("import sys; from modelscope.hub.api import HubApi; from modelscope import snapshot_download; " +
                   _TOKEN + "token and HubApi().login(token); "
                   "snapshot_download(sys.argv[1], local_dir=sys.argv[2], revision=sys.argv[3] or None)"),
    "modelers": ("import sys; from openmind_hub import snapshot_download; " + _TOKEN +
                 "snapshot_download(repo_id=sys.argv[1], local_dir=sys.argv[2], revision=sys.argv[3] or None, "
                 "token=token)"),
}
_HUB_PACKAGE = {"huggingface": "huggingface_hub", "modelscope": "modelscope", "modelers": "openmind_hub"}


def hub_command(hub, repo, dest, revision="", python="python3", token_file=""):
    """argv that downloads repo into dest with the hub's Python client (which resumes partial files).

    token_file: path of a file holding the hub token ("" = anonymous); only the path is in argv.
    """
    if hub not in HUBS:
        raise ValueError("model_distribution_hub must be one of %s, got %r" % (", ".join(HUBS), hub))
    if not repo or repo.count("/") != 1 or repo.startswith("/") or repo.endswith("/"):
        raise ValueError("model_distribution_repo must be an owner/name repository id, got %r" % repo)
    return [python, "-c", _HUB_CODE[hub], repo, dest, revision or "", token_file or ""]


def hub_package(hub):
    """The pip package that provides the hub's client."""
    return _HUB_PACKAGE[hub]


def progress_line(label, progress):
    """One line of a running transfer's progress, from model_fetch's progress file (a dict; {} when unread)."""
    progress = progress if isinstance(progress, dict) else {}
    mib = 1048576.0

    def number(key):
        value = progress.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0

    parts = []
    if progress.get("waiting"):
        parts.append("waiting for %s," % progress.get("file", "?"))
    parts.append("%.1f of %.1f MiB (%s %%), %.1f MiB/s," % (
        number("bytes_done") / mib, number("bytes_total") / mib, progress.get("percent", "?"), number("rate") / mib))
    parts.append("file %d of %s" % (number("files_done") + 1, progress.get("files_total", "?")))
    return "%s: %s" % (label, " ".join(parts))
