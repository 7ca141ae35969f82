# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible plugin this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Load the collection's filter plugins once, before the first task
version_added: 0.2.0
description:
  - Ansible runs each task of each host in a worker process forked from C(ansible-playbook). A worker that
    templates one of this collection's filters looks the name up through every filter file of the
    collection and imports them, with the helpers they import; Ansible's collection loader compiles
    collection Python from source and keeps no byte code, and the worker ends with the task, so the next
    worker does it all again.
  - At the start of the playbook this callback imports every filter file of the collection in
    C(ansible-playbook) itself, through Ansible's own filter loader, and has the filter and test loaders read
    Ansible's own plugins (as each worker's first lookup would), so that every worker forked after it
    inherits them. It prints nothing (but at C(-vvv)) and changes no result.
  - On the idempotent C(deploy.yml) run of a 3-node test cluster under Mitogen's strategy it took about a sixth
    of the controller's CPU off (the collection's C(docs/benchmarks.md), C(tests/bench/bench_preload.py)); the
    work it saves is per worker, and each task forks one worker per host.
  - If a filter file cannot be loaded here, the callback says so at C(-vvv) and the workers load it as
    before, and the task that uses it reports the error.
requirements:
  - Enabled in C(callbacks_enabled) (the C(ansible.cfg) next to C(deploy.sh) enables it).
"""

EXAMPLES = r"""
# ansible.cfg
# [defaults]
# callbacks_enabled = ansible.posix.profile_tasks, aihost.llm_cluster.preload
"""

import importlib
import os
import pkgutil

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader, test_loader

COLLECTION = "aihost.llm_cluster"
PACKAGE = "ansible_collections.aihost.llm_cluster.plugins.filter"
# A name each loader has: looking one up makes it read all of Ansible's own filters (or tests) once.
BUILTIN = ((filter_loader, "ansible.builtin.to_json"), (test_loader, "ansible.builtin.version"))


def filter_directory():
    """The directory of the collection's filter files, as the filter loader computes it (its cache key)."""
    return os.path.dirname(importlib.import_module(PACKAGE).__file__)


def filter_files(directory):
    """(name, path) of every filter file in the directory, in name order."""
    return sorted((info.name, os.path.join(directory, info.name + ".py"))
                  for info in pkgutil.iter_modules([directory]) if not info.ispkg)


def preload(loader=filter_loader, directory=None):
    """Load each filter file through the loader (its per-file cache); returns the names loaded and the failures."""
    loaded, failed = [], []
    try:
        files = filter_files(directory or filter_directory())
    except Exception as exc:  # pylint: disable=broad-except
        return loaded, ["%s: %s" % (PACKAGE, exc)]
    for name, path in files:
        try:
            loader.get_contained_plugins(COLLECTION, path, name)
        except Exception as exc:  # pylint: disable=broad-except
            failed.append("%s: %s" % (name, exc))
        else:
            loaded.append(name)
    return loaded, failed


def preload_builtin(lookups=BUILTIN):
    """Make each loader read Ansible's own filters or tests, as it does on its first lookup; returns the failures."""
    failed = []
    for loader, name in lookups:
        try:
            loader.get_with_context(name)
        except Exception as exc:  # pylint: disable=broad-except
            failed.append("%s: %s" % (name, exc))
    return failed


class CallbackModule(CallbackBase):
    """Loads the filter and test plugins in the controller's main process at the playbook's start."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "aihost.llm_cluster.preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        loaded, failed = preload()
        failed += preload_builtin()
        self._display.vvv("preload: %d filter files of %s loaded before the first task%s" % (
            len(loaded), COLLECTION, "".join("; not loaded: " + item for item in failed)))
