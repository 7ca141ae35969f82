#!/usr/bin/python
# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_manifest
short_description: Build the manifest of a model directory, or verify a copy of it against a manifest
version_added: 0.2.0
description:
  - With O(state=built), lists every file of the model directory with its size, mtime and SHA-256 and writes
    the list to C(<path>/.llm_cluster-manifest.json) when its content changed. Files whose size and mtime
    match the manifest already there keep their SHA-256 without being read, so refreshing the manifest of an
    unchanged model reads nothing.
  - With O(state=verified), compares the directory with a manifest (given in O(manifest), else read from
    C(<path>/.llm_cluster-manifest.json)) and reports the files to send again. Mismatches never fail the task;
    the caller decides what to do with RV(bad_files). When the tree matches, a verification record is written
    to C(<path>/.llm_cluster-verified.json); files whose size and mtime are unchanged since the record (made
    for the same manifest digest) are trusted without being read on the next run.
  - The digest of a manifest covers paths, sizes and SHA-256, not mtimes, so a copy has the digest of its source.
  - Files are hashed in 8 MiB chunks by a pool of threads. Symlinks are not followed out of the directory,
    symlinked directories are not descended, and rsync's temporary files (C(.<name>.XXXXXX), C(.~tmp~)) and the
    two bookkeeping files are left out.
options:
  path:
    description: The model directory. With O(state=verified) it may not exist yet; then every file is missing.
    type: path
    required: true
  state:
    description:
      - V(built) builds or refreshes the manifest of O(path) and writes it to C(<path>/.llm_cluster-manifest.json)
        when its content changes.
      - V(verified) verifies the tree at O(path) against a manifest.
    type: str
    required: true
    choices: [built, verified]
  manifest:
    description:
      - The manifest to verify against (the RV(manifest) returned by O(state=built) on the source).
      - When omitted with O(state=verified), C(<path>/.llm_cluster-manifest.json) is read.
      - Ignored with O(state=built).
    type: dict
  full:
    description: Hash every file, ignoring the earlier manifest (O(state=built)) or the verification record (O(state=verified)).
    type: bool
    default: false
  workers:
    description: Threads that hash files in parallel; V(0) means min(8, number of CPUs).
    type: int
    default: 0
  record:
    description:
      - With O(state=verified), write C(<path>/.llm_cluster-verified.json) when the verification passes and the
        record differs from the one there.
      - An existing record is read (for its fast path) whatever this option says.
    type: bool
    default: true
attributes:
  check_mode:
    description: Computes and reports everything, writes no file; RV(ignore:changed) says whether a file would be written.
    support: full
  diff_mode:
    description: With O(state=built), returns the manifest's file list (paths and sizes) before and after; O(state=verified) returns no diff.
    support: partial
  platform:
    description: Runs on POSIX hosts (Linux).
    support: full
    platforms: posix
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Build the manifest of the model on the node that downloaded it
  aihost.llm_cluster.model_manifest:
    path: /srv/models/Qwen2.5-72B-Instruct
    state: built
  register: source_manifest

- name: Verify the copy on every other node
  aihost.llm_cluster.model_manifest:
    path: /srv/models/Qwen2.5-72B-Instruct
    state: verified
    manifest: "{{ source_manifest.manifest }}"
  register: copy_check

- name: Show what must be sent again
  ansible.builtin.debug:
    msg: "{{ copy_check.bad_files }} ({{ copy_check.missing_bytes }} bytes, {{ copy_check.free_bytes }} free)"
  when: not copy_check.ok
"""

RETURN = r"""
path:
  description: The model directory.
  returned: always
  type: str
  sample: /srv/models/Qwen2.5-72B-Instruct
digest:
  description: SHA-256 of the canonical list of (path, size, SHA-256) of the manifest; mtimes do not enter it.
  returned: always
  type: str
  sample: 3f0c5a4e1b2d9c8f7a6e5d4c3b2a19080f1e2d3c4b5a69788796a5b4c3d2e1f0
total_bytes:
  description: Sum of the sizes of the files of the manifest.
  returned: always
  type: int
  sample: 145412546560
hashed:
  description: Files whose SHA-256 was computed by this run.
  returned: always
  type: int
  sample: 2
manifest:
  description: The manifest of the tree, as written to C(<path>/.llm_cluster-manifest.json).
  returned: when O(state=built)
  type: dict
  sample: {"version": 1, "total_bytes": 4979,
           "digest": "3f0c5a4e1b2d9c8f7a6e5d4c3b2a19080f1e2d3c4b5a69788796a5b4c3d2e1f0",
           "files": [{"path": "config.json", "size": 4979, "mtime": 1764451200123456789,
                      "sha256": "9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"}]}
files:
  description: Number of files in the manifest.
  returned: when O(state=built)
  type: int
  sample: 41
reused:
  description: Files whose SHA-256 was taken from the earlier manifest (same path, size and mtime).
  returned: when O(state=built)
  type: int
  sample: 39
skipped:
  description: Symlinks and special files left out of the manifest (links to directories, out of the tree, dangling).
  returned: when O(state=built)
  type: list
  elements: str
  sample: []
manifest_path:
  description: The manifest file.
  returned: when O(state=built)
  type: str
  sample: /srv/models/Qwen2.5-72B-Instruct/.llm_cluster-manifest.json
ok:
  description: Whether the tree matches the manifest exactly (no missing, different or extra file).
  returned: when O(state=verified)
  type: bool
  sample: false
mismatches:
  description:
    - One entry per file that differs, sorted by path. RV(mismatches[].reason) is C(missing) (expected is the
      size, found is null), C(size) (expected and found sizes), C(sha256) (expected and found SHA-256) or
      C(extra) (a file not in the manifest; expected is null, found is its size).
  returned: when O(state=verified)
  type: list
  elements: dict
  contains:
    path:
      description: Path relative to O(path), with C(/) separators.
      type: str
    reason:
      description: C(missing), C(size), C(sha256) or C(extra).
      type: str
    expected:
      description: What the manifest says (size or SHA-256), null for extras.
      type: raw
    found:
      description: What the tree has (size or SHA-256), null for missing files.
      type: raw
  sample: [{"path": "model-00003-of-00004.safetensors", "reason": "sha256",
            "expected": "9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
            "found": "0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c"}]
bad_files:
  description: Paths to send again (missing, wrong size or wrong SHA-256; extras are not listed), sorted.
  returned: when O(state=verified)
  type: list
  elements: str
  sample: ["model-00003-of-00004.safetensors"]
present_bytes:
  description: Bytes of the files that verified.
  returned: when O(state=verified)
  type: int
  sample: 109059409920
missing_bytes:
  description: Bytes (by the manifest) of the files in RV(bad_files).
  returned: when O(state=verified)
  type: int
  sample: 36353136640
trusted:
  description: Files trusted without being read because their size and mtime are unchanged since the last record.
  returned: when O(state=verified)
  type: int
  sample: 39
free_bytes:
  description: Space available to unprivileged users on the filesystem of O(path), or of its nearest existing parent.
  returned: when O(state=verified)
  type: int
  sample: 512110190592
record_path:
  description: The verification record file.
  returned: when O(state=verified)
  type: str
  sample: /srv/models/Qwen2.5-72B-Instruct/.llm_cluster-verified.json
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _disk
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _manifest


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", required=True, choices=["built", "verified"]),
            manifest=dict(type="dict"),
            full=dict(type="bool", default=False),
            workers=dict(type="int", default=0),
            record=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )


def free_bytes(path):
    """Bytes available to unprivileged users on the filesystem of ``path`` or of its nearest existing parent."""
    return _disk.filesystem(path)["free"]


def file_list_summary(manifest):
    """One ``<path> <size>`` line per file of a manifest, for diff mode ("" when there is no usable manifest)."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        return ""
    lines = []
    for entry in manifest["files"]:
        if isinstance(entry, dict):
            lines.append("%s %s\n" % (entry.get("path"), entry.get("size")))
    return "".join(lines)


def read_optional(module, path, what):
    """Load a JSON file that may be absent or damaged; warn and return None when it cannot be used."""
    try:
        return _manifest.load_json(path)
    except (OSError, ValueError) as exc:
        module.warn("ignoring the %s %s: %s" % (what, path, exc))
        return None


def run_built(module):
    path = module.params["path"]
    if not os.path.exists(path):
        module.fail_json(msg="path %s does not exist: download the model there first, or set path to the model directory" % path)
    if not os.path.isdir(path):
        module.fail_json(msg="path %s is not a directory: set path to the model directory (the one holding config.json)" % path)
    manifest_path = os.path.join(path, _manifest.MANIFEST_NAME)
    previous = read_optional(module, manifest_path, "earlier manifest")
    try:
        manifest, stats = _manifest.build(path, previous=previous, full=module.params["full"], workers=module.params["workers"])
    except OSError as exc:
        module.fail_json(msg="cannot read the model directory %s: %s" % (path, exc))
    changed = previous != manifest
    if changed and not module.check_mode:
        try:
            _manifest.save_json(manifest_path, manifest)
        except OSError as exc:
            module.fail_json(msg="cannot write the manifest %s: %s" % (manifest_path, exc))
    result = dict(changed=changed, path=path, manifest_path=manifest_path, manifest=manifest,
                  total_bytes=manifest["total_bytes"], files=len(manifest["files"]), digest=manifest["digest"],
                  hashed=stats["hashed"], reused=stats["reused"], skipped=stats["skipped"])
    if module._diff:
        result["diff"] = dict(before=file_list_summary(previous), after=file_list_summary(manifest),
                              before_header=manifest_path, after_header=manifest_path)
    module.exit_json(**result)


def run_verified(module):
    path = module.params["path"]
    manifest = module.params["manifest"]
    manifest_path = os.path.join(path, _manifest.MANIFEST_NAME)
    record_path = os.path.join(path, _manifest.RECORD_NAME)
    if manifest is None:
        try:
            manifest = _manifest.load_json(manifest_path)
        except (OSError, ValueError) as exc:
            module.fail_json(msg="cannot read the manifest %s: %s" % (manifest_path, exc))
        if manifest is None:
            module.fail_json(msg="no manifest given and %s does not exist: pass manifest (the result of state=built "
                                 "on the source) or build the manifest there first" % manifest_path)
    record = read_optional(module, record_path, "verification record") if os.path.isdir(path) else None
    try:
        outcome = _manifest.verify(path, manifest, record=record, full=module.params["full"], workers=module.params["workers"])
    except ValueError as exc:
        module.fail_json(msg="invalid manifest: %s" % exc)
    except OSError as exc:
        module.fail_json(msg="cannot read the model directory %s: %s" % (path, exc))
    new_record = outcome.pop("record")
    changed = bool(module.params["record"] and outcome["ok"] and os.path.isdir(path) and record != new_record)
    if changed and not module.check_mode:
        try:
            _manifest.save_json(record_path, new_record)
        except OSError as exc:
            module.fail_json(msg="cannot write the verification record %s: %s" % (record_path, exc))
    module.exit_json(changed=changed, path=path, record_path=record_path, free_bytes=free_bytes(path), **outcome)


def main():
    module = build_module()
    if module.params["workers"] < 0:
        module.fail_json(msg="workers must be 0 (automatic) or a positive number of threads, not %d" % module.params["workers"])
    if module.params["state"] == "built":
        run_built(module)
    else:
        run_verified(module)


if __name__ == "__main__":
    main()
