# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The preload callback: every filter of the collection resolves from what it loaded, without loading again.

The check runs in a child Python with Ansible's own plugin loader and collection finder set up over this
checkout (as ansible-playbook sets them up), so the cache keys it fills are the ones the filter loader
looks up when a task's template names a filter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import ansible_collections

from ansible_collections.aihost.llm_cluster.plugins.callback import preload

COLLECTIONS = os.path.dirname(list(ansible_collections.__path__)[0])

CHILD = textwrap.dedent("""
    import json, sys
    from ansible.plugins.loader import filter_loader, init_plugin_loader, test_loader
    init_plugin_loader([sys.argv[1]])
    from ansible_collections.aihost.llm_cluster.plugins.callback import preload
    loaded, failed = preload.preload()
    names = []
    for module in filter_loader._module_cache.values():
        names.extend(module.FilterModule().filters())
    failed += preload.preload_builtin()
    # Ansible's own filters and tests, read once (the first lookup of any name reads them all).
    builtin = {"filters": len(filter_loader._cached_non_collection_wrappers),
               "tests": len(test_loader._cached_non_collection_wrappers)}
    # From here on, a filter file loaded again would be compiled again: refuse it.
    def refuse(*args, **kwargs):
        raise AssertionError("loaded again: %r" % (kwargs or args,))
    filter_loader._load_module_source = refuse
    resolved = sorted(name for name in names
                      if filter_loader.get_with_context("aihost.llm_cluster." + name).object is not None)
    print(json.dumps({"loaded": loaded, "failed": failed, "names": sorted(names), "resolved": resolved,
                      "builtin": builtin}))
""")


def test_every_filter_resolves_from_the_preloaded_files_without_loading_one_again():
    result = subprocess.run([sys.executable, "-c", CHILD, COLLECTIONS], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    directory = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(preload.__file__))), "filter")
    files = sorted(name[:-3] for name in os.listdir(directory) if name.endswith(".py") and name != "__init__.py")
    assert report["failed"] == []
    assert report["loaded"] == files
    assert "serve_plan" in report["names"] and "npu_ip_plan" in report["names"]
    assert report["resolved"] == report["names"]
    # to_json, from_yaml, regex_search ...; version, match, subset ...: each name with and without its prefix.
    assert report["builtin"]["filters"] > 50 and report["builtin"]["tests"] > 20, report["builtin"]


class Loader:
    """A filter loader whose files fail or load by name."""

    def __init__(self, broken):
        self.broken = broken
        self.calls = []

    def get_contained_plugins(self, collection, path, name):
        self.calls.append((collection, os.path.basename(path), name))
        if name in self.broken:
            raise KeyError("Failed to load %s" % path)
        return []


def test_a_file_that_fails_is_named_and_the_others_still_load(tmp_path):
    for name in ("alpha", "beta", "gamma"):
        (tmp_path / (name + ".py")).write_text("")
    (tmp_path / "pkg").mkdir()
    loader = Loader({"beta"})
    loaded, failed = preload.preload(loader, str(tmp_path))
    assert loaded == ["alpha", "gamma"]
    assert failed == ["beta: 'Failed to load %s'" % (tmp_path / "beta.py")]
    assert loader.calls == [("aihost.llm_cluster", name + ".py", name) for name in ("alpha", "beta", "gamma")]


class Lookup:
    def __init__(self, fails=False):
        self.fails = fails
        self.names = []

    def get_with_context(self, name):
        self.names.append(name)
        if self.fails:
            raise KeyError(name)


def test_ansible_s_own_filters_and_tests_are_read_through_one_lookup_each():
    filters, tests = Lookup(), Lookup(fails=True)
    assert preload.preload_builtin(((filters, "ansible.builtin.to_json"), (tests, "ansible.builtin.version"))) == [
        "ansible.builtin.version: 'ansible.builtin.version'"]
    assert filters.names == ["ansible.builtin.to_json"] and tests.names == ["ansible.builtin.version"]


class Display:
    def __init__(self):
        self.lines = []

    def vvv(self, text):
        self.lines.append(text)


def test_the_callback_reports_what_it_loaded_at_vvv(monkeypatch):
    monkeypatch.setattr(preload, "preload", lambda: (["a", "b"], ["c: broken"]))
    monkeypatch.setattr(preload, "preload_builtin", lambda: ["ansible.builtin.version: gone"])
    callback = preload.CallbackModule()
    callback._display = Display()
    callback.v2_playbook_on_start(None)
    assert callback._display.lines == [
        "preload: 2 filter files of aihost.llm_cluster loaded before the first task; not loaded: c: broken; "
        "not loaded: ansible.builtin.version: gone"]


def test_a_missing_filter_package_is_reported_not_raised(monkeypatch):
    def missing():
        raise ImportError("No module named 'ansible_collections.aihost.llm_cluster.plugins.filter'")

    monkeypatch.setattr(preload, "filter_directory", missing)
    assert preload.preload(Loader(set())) == (
        [], ["ansible_collections.aihost.llm_cluster.plugins.filter: "
             "No module named 'ansible_collections.aihost.llm_cluster.plugins.filter'"])
