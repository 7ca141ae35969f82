#!/usr/bin/python
# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: validate_inventory
short_description: Check an llm_cluster inventory before any host is touched
version_added: 0.1.0
description:
  - Runs on the controller only (an action plugin); it never connects to a host.
  - Checks the groups, C(node_num), ports, backend and model choices, C(model_path), the cluster interface
    of every host, CIDRs and booleans, and reports every problem at once. Each message names the variable,
    the offending value and the fix.
  - Reads the group members from O(head_group) and O(worker_group), and each member's interface variable
    (O(interface_var)) and C(ansible_host) from its host variables.
options:
  head_group:
    description: Group holding the single head node (Ray head, API endpoint).
    type: str
    default: masters
  worker_group:
    description: Group holding the worker nodes.
    type: str
    default: workers
  node_num:
    description: Expected number of nodes; must equal the number of hosts in both groups.
    type: raw
    required: true
  ports:
    description: Ports by variable name; each must be an integer in 1-65535 and all must differ.
    type: dict
    default: {}
  backend_type:
    description: Model backend as in llm_solution (V(MindFormers) or V(Native)).
    type: raw
    required: true
  model_type:
    description: Weight format (V(safetensors) or V(ckpt)).
    type: raw
    required: true
  model_path:
    description: Absolute directory of the weights, identical on every node.
    type: raw
    required: true
  interface_var:
    description:
      - Name of the host variable that holds the cluster network interface. Each host must have it,
        from the inventory's vars or its host_vars; the value V(auto) means the interface that routes to the head.
    type: str
    default: ray_device
  cidrs:
    description: CIDRs by variable name (a string or a list of strings); each must parse and have no host bits set.
    type: dict
    default: {}
  booleans:
    description: Values by variable name that must be real YAML booleans.
    type: dict
    default: {}
  flags:
    description: Values by variable name that must be V(0), V(1) or a boolean (llm_solution style switches).
    type: dict
    default: {}
  container:
    description: Container settings to check when set (C(image_name), C(image_tag), C(container_name)).
    type: dict
    default: {}
attributes:
  check_mode:
    description: Can run in check mode and return the same result.
    support: full
  diff_mode:
    description: Returns no diff; it changes nothing.
    support: none
  platform:
    description: Runs on POSIX hosts (Linux).
    support: full
    platforms: posix
  action:
    description: Implemented as an action plugin that runs on the controller.
    support: full
notes:
  - This module is implemented as an action plugin; it runs on the controller.
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Validate the inventory
  aihost.llm_cluster.validate_inventory:
    node_num: "{{ node_num }}"
    ports:
      ray_port: "{{ ray_port }}"
      llm_port: "{{ llm_port }}"
      dp_port: "{{ dp_port }}"
    backend_type: "{{ backend_type }}"
    model_type: "{{ model_type }}"
    model_path: "{{ model_path }}"
    cidrs:
      npu_network_cidr: 10.10.0.0/16
  run_once: true
"""

RETURN = r"""
errors:
  description: Every problem found, one message each; empty when the inventory is valid.
  returned: always
  type: list
  elements: str
  sample: ["node_num = 3 but the inventory has 2 host(s) (master1, worker1): set node_num: 2 or add/remove hosts."]
hosts:
  description: The cluster members, head first.
  returned: always
  type: list
  elements: str
  sample: [master1, worker1]
"""
