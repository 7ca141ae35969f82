# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The bundle carries the router the serve role installs: its fallback pin is the serve role's default."""

from __future__ import annotations

import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def defaults(role):
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_the_bundle_s_router_fallback_is_the_serve_role_s_pin_for_the_router_topologies():
    template = defaults("bundle")["bundle_router_packages"]
    fallback = re.search(r"serve_router_packages \| default\((\[[^]]*\])\)", template)
    assert fallback, template
    assert yaml.safe_load(fallback.group(1)) == defaults("serve")["serve_router_packages"]
    assert re.search(r"in \['replicas', 'pd'\]", template), template
