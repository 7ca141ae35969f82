# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters of the offline bundle (roles/bundle); see plugin_utils/_bundle.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _bundle


def bundle_platform(value, host, arch_fact=None, python_fact=None):
    """A node's platform {arch, python, name} from bundle_platform or its facts."""
    try:
        return _bundle.platform(host, value, arch_fact, python_fact)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def bundle_pip_platforms(arch, glibc):
    """pip's --platform values for an architecture and a glibc version."""
    try:
        return _bundle.pip_platforms(arch, glibc)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def bundle_wheel_pins(filenames, where="the bundle"):
    """name==version lines for the wheels among file names."""
    if not isinstance(filenames, list):
        raise AnsibleFilterError("bundle_wheel_pins expects a list of file names, got %s" % type(filenames).__name__)
    try:
        return _bundle.wheel_pins(filenames, where)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def bundle_image_problems(refs, digests):
    """Messages for bundle_images and bundle_image_digests; [] when they are good."""
    return _bundle.image_problems(refs, digests)


def bundle_image_records(refs, images):
    """{ref: {ref, id, repo_digests, archive}} of the images found on the controller (docker_image_info's images)."""
    if not isinstance(refs, list) or not isinstance(images, list):
        raise AnsibleFilterError("bundle_image_records expects the list of bundle_images and docker_image_info's images")
    return _bundle.image_records(refs, images)


def bundle_image_pin_problems(records, digests):
    """Messages for the pinned images whose ID and repository digests do not hold their pin."""
    return _bundle.image_pin_problems(records, digests)


def bundle_mismatch_line(mismatch):
    """One line for a file that does not match the bundle's manifest."""
    if not isinstance(mismatch, dict):
        raise AnsibleFilterError("bundle_mismatch_line expects one of model_manifest's mismatches")
    return _bundle.mismatch_line(mismatch)


def bundle_payload_manifest(document):
    """The manifest of what the bundle step's chain carries to every node: a bundle's content without its model."""
    try:
        return _bundle.payload_manifest(document)
    except ValueError as exc:
        raise AnsibleFilterError("llm_cluster_bundle: %s" % exc)


def bundle_node_path(value, model_path=""):
    """llm_cluster_bundle_node_path, checked: its default when not set (None), "" for no chain."""
    value = _bundle.NODE_PATH if value is None else value
    problems = _bundle.node_path_problems(value, model_path)
    if problems:
        raise AnsibleFilterError(problems[0])
    return value


class FilterModule(object):
    def filters(self):
        return {"bundle_image_pin_problems": bundle_image_pin_problems,
                "bundle_image_problems": bundle_image_problems, "bundle_image_records": bundle_image_records,
                "bundle_mismatch_line": bundle_mismatch_line, "bundle_node_path": bundle_node_path,
                "bundle_payload_manifest": bundle_payload_manifest,
                "bundle_pip_platforms": bundle_pip_platforms, "bundle_platform": bundle_platform,
                "bundle_wheel_pins": bundle_wheel_pins}
