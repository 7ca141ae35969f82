# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Make ``ansible_collections.aihost.llm_cluster`` importable for plain pytest.

``ansible-test units`` sets this up itself. Plain ``pytest`` does not, so when
the collection is not importable yet, the parent of the ``ansible_collections``
directory that holds this checkout is put on ``sys.path``. The checkout may be
reached through a symlink (``.../ansible_collections/aihost/llm_cluster ->
/src/llm_cluster``); ``os.getcwd()`` and ``__file__`` then give the resolved
path, so the logical working directory from ``$PWD`` is tried first.
"""

from __future__ import annotations

import importlib.util
import os
import sys

_SUFFIX = os.path.join("ansible_collections", "aihost", "llm_cluster")


def _importable():
    try:
        return importlib.util.find_spec("ansible_collections.aihost.llm_cluster") is not None
    except ImportError:
        return False


def _collections_parent(start):
    """Return the directory above ``ansible_collections`` if ``start`` is inside the collection."""
    path = os.path.abspath(start)
    while True:
        if path.endswith(os.sep + _SUFFIX):
            return path[: -len(_SUFFIX) - 1] or os.sep
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _setup():
    if _importable():
        return
    for start in (os.environ.get("PWD"), os.getcwd(), os.path.dirname(os.path.abspath(__file__))):
        if not start:
            continue
        parent = _collections_parent(start)
        if parent and os.path.isdir(os.path.join(parent, _SUFFIX)):
            if parent not in sys.path:
                sys.path.insert(0, parent)
            importlib.invalidate_caches()
            if _importable():
                return


_setup()

# Shared test helpers that live beside this file (e.g. topology_fixtures).
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is in requirements-dev.txt; ansible-test's unit image may lack it
    pass
else:
    # The build machines are shared: a slow example or slow data generation there is load, not a
    # defect. Tests that set their own settings keep them; these are the defaults beneath.
    settings.register_profile("shared-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("shared-machine")
