# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _model_distribution


def model_fanout(nodes, settings):
    """Needers, disk gate and fan-out rounds for the model; see plugin_utils/_model_distribution.py."""
    if not isinstance(nodes, list) or not isinstance(settings, dict):
        raise AnsibleFilterError("model_fanout expects a list of node verifications and a dict of settings")
    try:
        return _model_distribution.plan(nodes, settings)
    except ValueError as exc:
        raise AnsibleFilterError("model_fanout: %s" % exc)


def model_hub_command(repo, hub, dest, revision="", python="python3", token_file=""):
    """argv that downloads a hub repository into dest with the hub's own Python client."""
    try:
        return _model_distribution.hub_command(hub, repo, dest, revision, python, token_file)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def model_hub_package(hub):
    """The pip package that provides a hub's Python client."""
    try:
        return _model_distribution.hub_package(hub)
    except KeyError:
        raise AnsibleFilterError("model_distribution_hub must be one of %s, got %r" % (", ".join(_model_distribution.HUBS), hub))


class FilterModule(object):
    def filters(self):
        return {
            "model_fanout": model_fanout,
            "model_hub_command": model_hub_command,
            "model_hub_package": model_hub_package,
        }
