#!/usr/bin/python
# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_transfer_wait
short_description: Follow a model transfer started in the background, showing its progress, until it ends
version_added: 0.1.0
description:
  - An action plugin. It follows an C(async) job of M(aihost.llm_cluster.model_fetch) on the node, and every
    O(interval) seconds shows one line of the job's progress file (bytes received, percent, rate, the file in
    progress) while it runs.
  - Ends when the job ends, and returns the job's result as C(ansible.builtin.async_status) would; a job that
    failed fails this task with its message.
  - One task however long the transfer, bounded by O(timeout), instead of a task file that includes itself
    every O(interval) seconds.
  - Between two lines it waits on the node for the progress file to say the transfer finished, so a transfer
    that ends is seen at once, not at the end of the interval.
options:
  jid:
    description: The job id of the C(async) task (its registered C(ansible_job_id)).
    type: str
    required: true
  progress_file:
    description: The job's progress file on the node (M(aihost.llm_cluster.model_fetch)'s O(aihost.llm_cluster.model_fetch#module:progress_file)).
    type: path
    required: true
  interval:
    description: Seconds between two progress lines.
    type: int
    default: 10
  timeout:
    description: Seconds to follow the job before failing; set it above the job's own C(async) limit.
    type: int
    required: true
  label:
    description: What each progress line starts with, such as C(master1 -> worker1).
    type: str
    default: ""
extends_documentation_fragment:
  - aihost.llm_cluster.attributes
attributes:
  action:
    description: Runs on the controller as an action plugin; the node runs C(async_status), C(slurp) and C(wait_for).
    support: full
  check_mode:
    description: Not in check mode; the transfer it follows never starts in check mode.
    support: none
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Start pulling the model
  aihost.llm_cluster.model_fetch:
    url: rsync://llmc@192.0.2.11:8730/model
    dest: /data/models/DeepSeek-R1
    files: [config.json]
    password_file: /run/llm_cluster/model/password
    progress_file: /run/llm_cluster/model/progress.json
  register: pull_job
  async: 86400
  poll: 0

- name: Follow it until it ends
  aihost.llm_cluster.model_transfer_wait:
    jid: "{{ pull_job.ansible_job_id }}"
    progress_file: /run/llm_cluster/model/progress.json
    interval: 10
    timeout: 86460
    label: "master1 -> {{ inventory_hostname }}"
  register: pull
"""

RETURN = r"""
finished:
  description: Whether the job ended (always true when the task succeeds).
  returned: always
  type: int
  sample: 1
polls:
  description: How many times the job's state was read.
  returned: always
  type: int
  sample: 3
bytes_received:
  description: The job's result passes through; see M(aihost.llm_cluster.model_fetch) for its other keys.
  returned: when the job succeeded
  type: int
  sample: 1048576
"""
