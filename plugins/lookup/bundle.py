# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible plugin this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""What an offline bundle gives a node; see plugin_utils/_bundle.py."""

from __future__ import annotations

DOCUMENTATION = r"""
name: bundle
author:
  - aihost.llm_cluster contributors (@aihost)
short_description: Paths a node takes from an offline bundle (llm_cluster_bundle)
description:
  - Reads the C(MANIFEST.json) of a bundle that C(./deploy.sh bundle) built, on the controller, and returns
    for one node the path of each item it asks for, or an empty string where the bundle has none.
  - The roles' defaults use it, so that C(llm_cluster_bundle) alone sets the wheelhouse, the engine's lock,
    the image archive and its ID, and the model's source. The inventory validation names what a bundle lacks
    for a node before any host is touched; this lookup returns an empty string for it.
options:
  _terms:
    description:
      - The items, each one of C(wheels) (the node's platform directory of wheels), C(lock) (its
        C(engine-lock.txt)), C(image_archive) (the C(docker save) tarball of O(image)), C(image_id) (that
        image's ID), C(model) (the model directory), C(platform) (the platform's name).
    required: true
    type: list
    elements: str
  bundle:
    description: The bundle's directory on the controller (C(llm_cluster_bundle)); empty gives empty strings.
    type: str
    default: ""
  host:
    description: The node (its platforms are listed by name in the manifest).
    type: str
    default: ""
  image:
    description: The node's engine image as name:tag, for C(image_archive) and C(image_id); empty on the host runtime.
    type: str
    default: ""
  side:
    description:
      - Where the paths of C(wheels) and C(image_archive) are read, the only items the chain carries to the nodes.
      - V(controller) gives their paths in the bundle on the controller, or an empty string when the chain carries
        them (O(node_path) not empty), since no role copies them from the controller then.
      - V(node) gives their paths under O(node_path) on every node, or an empty string without the chain.
      - The other items are the same on both sides.
    type: str
    choices: [controller, node]
    default: controller
  node_path:
    description:
      - Where the chain puts the bundle's content on every node (C(llm_cluster_bundle_node_path)); an empty string
        means no chain. Null (C(llm_cluster_bundle_node_path) not set) gives C(/var/cache/llm_cluster/bundle).
    type: str
"""

EXAMPLES = r"""
- name: Show the wheels the bundle gives this node, where the chain puts them
  ansible.builtin.debug:
    msg: >-
      {{ lookup('aihost.llm_cluster.bundle', 'wheels', bundle=llm_cluster_bundle, host=inventory_hostname, side='node',
                node_path=llm_cluster_bundle_node_path | default(none)) }}
"""

RETURN = r"""
_raw:
  description: One path (or the image ID, or the platform's name) per item; an empty string where the bundle has none.
  type: list
  elements: str
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _bundle


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        unknown = sorted(set(kwargs) - {"bundle", "host", "image", "side", "node_path"})
        if unknown:
            raise AnsibleLookupError("bundle: %s is not an option (bundle, host, image, side, node_path)" % ", ".join(unknown))
        side = kwargs.get("side") or "controller"
        if side not in ("controller", "node"):
            raise AnsibleLookupError("bundle: side must be controller or node, not %r" % (side,))
        unknown = [term for term in terms if term not in _bundle.ITEMS]
        if unknown:
            raise AnsibleLookupError("bundle: %s is not an item of a bundle (%s)"
                                     % (", ".join(map(str, unknown)), ", ".join(_bundle.ITEMS)))
        bundle = kwargs.get("bundle") or ""
        if not bundle:
            return ["" for _term in terms]
        node_path = kwargs.get("node_path")
        node_path = _bundle.NODE_PATH if node_path is None else (node_path.strip() if isinstance(node_path, str) else node_path)
        problems = _bundle.node_path_problems(node_path)
        if problems:
            raise AnsibleLookupError(problems[0])
        items, _problems = _bundle.resolve(bundle, str(kwargs.get("host") or ""), str(kwargs.get("image") or ""))
        if side == "node":
            placed = _bundle.on_nodes(bundle, items, node_path)
        else:
            # What the chain carries is not copied from the controller.
            placed = dict(items, **{name: ("" if node_path else items[name]) for name in _bundle.CARRIED})
        return [placed[term] for term in terms]
