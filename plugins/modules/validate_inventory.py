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
  - Never fails with a traceback on a hostile value (a Unicode digit, a 5000-digit number, a list where a
    string belongs); such a value is reported as a problem of its variable, and every other check still runs.
  - Checks every port the cluster uses against every other one, including the fixed ports and the worker
    port range of the roles' defaults (O(cluster_ports)).
  - Warnings (clear-text C(ansible_password), variables no role reads, with the nearest known name,
    inventory hosts outside both groups) are listed with the errors; they fail the run only when O(strict) is true.
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
  paths:
    description: More absolute directories by variable name; each must be normalised and free of whitespace and control characters.
    type: dict
    default: {}
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
  cidr_lists:
    description: Lists of IPv4 CIDRs by variable name (the firewall's client set); a string or an IPv6 network is refused.
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
    description: Container settings to check when set (C(image_name), C(image_tag), C(container_name), C(serve_container_name)).
    type: dict
    default: {}
  env_maps:
    description: Mappings of environment variables by variable name; every key must be an environment variable name.
    type: dict
    default: {}
  backend_env:
    description:
      - The engine environment the O(backend_type) brings (C(HCCL_OP_EXPANSION_MODE=AIV) and more). The collective
        variables (C(HCCL_*), C(NCCL_*), C(GLOO_SOCKET_IFNAME), C(TP_SOCKET_IFNAME), C(VLLM_HOST_IP)) of it, of each
        node's C(prepare_env_extra) and of its C(serve_environment) (read from the node's own variables) are checked
        together, per node and across the nodes; see the role's README.
    type: dict
    default: {}
  accounts:
    description: User names by variable name (C(llm_cluster_user)); each must be a user name C(useradd) accepts, or V(root).
    type: dict
    default: {}
  tls:
    description:
      - The TLS settings of the API port. V(serve_tls_names) must be a list of DNS names or IP addresses;
        V(serve_tls_cert_file) and V(serve_tls_key_file) are set together or not at all.
    type: dict
    default: {}
  watchdog:
    description:
      - The inference watchdog's settings (C(serve_watchdog_interval), C(serve_watchdog_timeout),
        C(serve_watchdog_failures), C(serve_watchdog_start_grace), C(serve_watchdog_max_restarts),
        C(serve_watchdog_window)), checked when C(serve_watchdog) is true. Each must be a whole number in its range,
        and the window must hold at least one full count of failures.
    type: dict
    default: {}
  fetch:
    description:
      - How network fetches are retried (C(llm_cluster_fetch_retries), C(llm_cluster_fetch_delay)); each one given
        must be a whole number in its range (0 to 20 tries, 0 to 600 seconds).
    type: dict
    default: {}
  serving_groups:
    description:
      - C(llm_cluster_serving_groups), the inventory groups the nodes serve in (a list of group names); each must
        exist, hold cluster nodes only, and every node must be in exactly one. Empty or null for none.
    type: raw
  topology:
    description:
      - C(serve_topology); serving groups need V(replicas).
    type: raw
    default: auto
  cluster_ports:
    description:
      - Also check the ports and port ranges of the roles' defaults (Ray's fixed ports and worker range, the rsync
        daemon port), as overridden by the inventory.
    type: bool
    default: true
  strict:
    description: Fail on warnings too.
    type: raw
    default: false
attributes:
  action:
    description: Implemented as an action plugin that runs on the controller.
    support: full
notes:
  - This module is implemented as an action plugin; it runs on the controller.
extends_documentation_fragment:
  - aihost.llm_cluster.attributes
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
warnings_found:
  description: Every warning found (not fatal unless O(strict)).
  returned: always
  type: list
  elements: str
  sample: ["model_weight_path (every node) is not a variable this collection knows: did you mean model_path?"]
hosts:
  description: The cluster members, head first.
  returned: always
  type: list
  elements: str
  sample: [master1, worker1]
"""
