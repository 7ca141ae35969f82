# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The Molecule scenarios against the test loop's shared settings and its stage list.

Every scenario must use the shared create and destroy playbooks (a ``provisioner.playbooks`` map in a
scenario replaces the shared one instead of merging with it, and the Docker driver's bundled playbooks
then wait forever on asynchronous jobs under Mitogen), and every scenario must be a stage of
``tests/bench/stage-budgets.txt`` that names each container it creates, so that two stages that create
the same container never run at once.
"""

from __future__ import annotations

import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCENARIOS = sorted(glob.glob(os.path.join(ROOT, "molecule", "*", "molecule.yml")))


def load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def stages():
    table = {}
    with open(os.path.join(ROOT, "tests", "bench", "stage-budgets.txt")) as handle:
        for line in handle:
            if line.strip() and not line.startswith("#"):
                name, budget, names = line.split()
                table[name] = (int(budget), set() if names == "-" else set(names.split(",")))
    return table


def scenario_id(path):
    return os.path.basename(os.path.dirname(path))


def test_the_shared_settings_name_the_shared_create_and_destroy():
    shared = load(os.path.join(ROOT, ".config", "molecule", "config.yml"))
    assert shared["ansible"]["playbooks"]["create"] == "../shared/create.yml"
    assert shared["ansible"]["playbooks"]["destroy"] == "../shared/destroy.yml"
    for name in ("create", "destroy"):
        assert os.path.isfile(os.path.join(ROOT, "molecule", "shared", name + ".yml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=scenario_id)
def test_scenario_merges_its_playbooks_into_the_shared_map(path):
    config = load(path)
    assert "playbooks" not in (config.get("provisioner") or {}), (
        "%s: provisioner.playbooks replaces the shared map (and its create and destroy); "
        "list the scenario's own playbooks under ansible.playbooks" % path)
    own = (config.get("ansible") or {}).get("playbooks") or {}
    assert not set(own) & {"create", "destroy"}, path


@pytest.mark.parametrize("path", SCENARIOS, ids=scenario_id)
def test_scenario_is_a_stage_naming_every_container_it_creates(path):
    table = stages()
    stage = "molecule-" + scenario_id(path)
    assert stage in table, "%s has no line in tests/bench/stage-budgets.txt" % stage
    created = {platform["name"] for platform in load(path)["platforms"]}
    missing = created - table[stage][1]
    assert not missing, "%s creates %s, not listed in tests/bench/stage-budgets.txt" % (stage, sorted(missing))


def test_every_stage_listed_exists():
    known = {"lint", "sanity", "unit", "integration", "demo-check"}
    known |= {"molecule-" + scenario_id(path) for path in SCENARIOS}
    assert set(stages()) <= known
