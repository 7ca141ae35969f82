# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Load a script a role installs on the nodes (roles/<role>/files/<name>) as a module, for unit tests."""

import importlib.util
import os

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def load_role_file(role, name):
    """A fresh module from roles/<role>/files/<name> each call."""
    path = os.path.join(ROOT, "roles", role, "files", name)
    spec = importlib.util.spec_from_file_location(os.path.splitext(name)[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
