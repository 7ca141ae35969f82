# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A scenario's node replaced by new hardware with the same name, for the replacement tests: the node's container
removed and made again from the scenario's own platform (molecule.yml, through molecule/shared/create.yml), then
made a fake server again by the scenario's prepare step, limited to that node. Loaded by the tests with importlib,
as perimeter.py is."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile

import yaml

SHARED = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(SHARED))


def playbook(inventory, path, *extra, timeout=900):
    """ansible-playbook against Molecule's inventory: (the completed process, {host: changed count})."""
    env = dict(os.environ)
    env.setdefault("LLM_CLUSTER_FAKES", os.path.join(ROOT, "tests", "fakes"))
    result = subprocess.run(["ansible-playbook", "-i", inventory, path] + list(extra), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout, check=False, env=env)
    changed = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", result.stdout, re.M)}
    return result, changed


def renew(scenario, name, inventory, new_address=False):
    """Replace container `name` of the scenario in directory `scenario` by a fresh one, prepared as at the start.
    Docker gives the new container the address the old one freed; with `new_address`, a container holds that
    address while the new one is made, which then gets another (as new hardware would)."""
    with open(os.path.join(scenario, "molecule.yml"), encoding="utf-8") as handle:
        config = yaml.safe_load(handle.read().replace("${MOLECULE_PROJECT_DIRECTORY}", ROOT))
    platforms = [platform for platform in config["platforms"] if platform["name"] == name]
    assert len(platforms) == 1, name
    # create.yml reads one scenario variable besides the platforms: the device cgroup rules.
    shared = (((config.get("provisioner") or {}).get("inventory") or {}).get("group_vars") or {}).get("all") or {}
    rules = {key: shared[key] for key in ("llmc_device_cgroup_rules",) if key in shared}
    molecule_yml = {"platforms": platforms, "provisioner": {"inventory": {"group_vars": {"all": rules}}}}
    subprocess.run(["docker", "rm", "-f", name], check=True, capture_output=True)
    holder = "%s-address-holder" % name
    if new_address:
        subprocess.run(["docker", "run", "--detach", "--name", holder, "--network", platforms[0]["networks"][0]["name"],
                        "--entrypoint", "sleep", platforms[0]["image"], "infinity"], check=True, capture_output=True)
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".json") as spec:
            json.dump({"molecule_yml": molecule_yml}, spec)
            spec.flush()
            result, _changed = playbook(inventory, os.path.join(SHARED, "create.yml"), "-e", "@" + spec.name)
    finally:
        if new_address:
            subprocess.run(["docker", "rm", "--force", holder], check=True, capture_output=True)
    assert result.returncode == 0, result.stdout[-3000:]
    prepare = os.path.join(scenario, "prepare.yml")
    if not os.path.exists(prepare):
        prepare = os.path.join(SHARED, "prepare.yml")
    result, _changed = playbook(inventory, prepare, "--limit", name)
    assert result.returncode == 0, result.stdout[-3000:]


def shrunk_inventory(inventory, leaving, directory):
    """A copy of Molecule's inventory (its file, group_vars and host_vars) in `directory` where host `leaving` is in
    no group but all (still a host to connect to, as ./deploy.sh remove-node --retire needs) and node_num counts one
    node less. Returns the copy's inventory file."""
    source = os.path.dirname(inventory)
    target = os.path.join(directory, "inventory")
    shutil.copytree(source, target)
    path = os.path.join(target, os.path.basename(inventory))
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    for name, group in data.items():
        if name != "all" and leaving in ((group or {}).get("hosts") or {}):
            del group["hosts"][leaving]
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(data, handle, sort_keys=False)
    all_vars = os.path.join(target, "group_vars", "all")
    with open(all_vars, encoding="utf-8") as handle:
        variables = yaml.safe_load(handle)
    variables["node_num"] = int(variables["node_num"]) - 1
    with open(all_vars, "w", encoding="utf-8") as handle:
        yaml.safe_dump(variables, handle, sort_keys=False)
    return path


def replace_node(inventory, old, new, *extra):
    """playbooks/replace_node.yml as ./deploy.sh replace-node OLD NEW runs it, with `extra` options."""
    return playbook(inventory, os.path.join(ROOT, "playbooks", "replace_node.yml"),
                    "-e", json.dumps({"replace_node_old": old, "replace_node_new": new}), *extra)
