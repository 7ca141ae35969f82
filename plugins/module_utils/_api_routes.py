# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module_utils file this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""PRIVATE to the collection: which engine routes may answer without the API key, and the routes to check.

OPEN_ROUTES must equal the allow-list of the serve role's key guard
(roles/serve/files/llm_cluster_api_auth.py); a unit test holds them together.
"""

from __future__ import annotations

import re

OPEN_ROUTES = frozenset({
    ("GET", "/health"),
    ("GET", "/ping"),
    ("GET", "/metrics"),
})

# A path no engine serves: with a default-deny guard it answers 401 without
# the key, without one 404. Checked before any other route is sent a request
# without the key, so that a state-changing route is never reached unguarded.
CANARY_PATH = "/llm-cluster-probe/unlisted-route"

# Methods whose requests the walk sends (OpenAPI operation keys).
METHODS = ("get", "put", "post", "delete", "patch")

# Value put in every path parameter ({response_id} and the like).
PARAMETER_VALUE = "llm-cluster-probe"

_PARAMETER = re.compile(r"\{[^{}/]+\}")


class RoutesError(ValueError):
    """The OpenAPI document has no usable paths."""


def is_open(method, path):
    return (method.upper(), path) in OPEN_ROUTES


def operations(document):
    """Sorted (METHOD, path to request, path template) of every operation in an OpenAPI document.

    Path parameters are filled with PARAMETER_VALUE; methods outside METHODS
    (head, options, trace) are left out. Raises RoutesError when the document
    has no ``paths`` mapping or no operation.
    """
    paths = document.get("paths") if isinstance(document, dict) else None
    if not isinstance(paths, dict):
        raise RoutesError("the OpenAPI document has no 'paths' mapping")
    found = set()
    for template, item in paths.items():
        if not isinstance(template, str) or not template.startswith("/") or not isinstance(item, dict):
            continue
        concrete = _PARAMETER.sub(PARAMETER_VALUE, template)
        for method in METHODS:
            if method in item:
                found.add((method.upper(), concrete, template))
    if not found:
        raise RoutesError("the OpenAPI document lists no operation")
    return sorted(found, key=lambda op: (op[1], op[0]))
