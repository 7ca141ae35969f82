#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: accelerator_facts
short_description: Gather the Ascend NPU or NVIDIA GPU inventory of a host
version_added: 0.1.0
description:
  - Detects the accelerators of a host and returns them as the C(llm_cluster_accelerators) fact.
  - If C(npu-smi) is found the host is an Ascend NPU host; otherwise, if C(nvidia-smi) is found, an NVIDIA GPU host;
    otherwise the type is V(none).
  - For NPUs it runs C(npu-smi info), C(npu-smi info -m) and C(npu-smi info -t board -i <first NPU> -c 0), reads the
    driver and firmware C(version.info) files as fallbacks and finds the CANN toolkit version under O(ascend_root).
  - For GPUs it runs C(nvidia-smi --query-gpu=... --format=csv,noheader,nounits).
  - It lists the C(davinciN) or C(nvidiaN) device nodes under O(dev_root) and checks them against the devices the tool reports.
  - The module never changes the host. Problems found while probing (a tool that fails, output that cannot be parsed,
    device nodes without a device) are reported in RV(accelerators.errors) instead of failing the task.
author:
  - aihost.llm_cluster contributors (@aihost)
attributes:
  check_mode:
    support: full
    description: Can run in check mode and return the same facts as without it; the module never changes the host.
  diff_mode:
    support: none
    description: The module changes nothing, so there is no diff.
  facts:
    support: full
    description: Returns an C(ansible_facts) dictionary that updates the host facts.
  platform:
    support: full
    platforms: posix
    description: Target OS/families that can be operated against.
options:
  npu_smi_path:
    description:
      - Path of the C(npu-smi) binary.
      - When not set, C(npu-smi) is searched in E(PATH) and in V(/usr/local/bin), V(/usr/local/sbin) and V(/usr/bin).
      - When set to a path that is not an executable file, this is reported in RV(accelerators.errors)
        and the host is probed as if C(npu-smi) was absent.
    type: str
  nvidia_smi_path:
    description:
      - Path of the C(nvidia-smi) binary, used only when no C(npu-smi) was found.
      - When not set, C(nvidia-smi) is searched in E(PATH) and in V(/usr/local/bin), V(/usr/local/sbin) and V(/usr/bin).
      - When set to a path that is not an executable file, this is reported in RV(accelerators.errors).
    type: str
  ascend_root:
    description:
      - Installation root of the Ascend driver, firmware and CANN toolkit
        (C(driver/version.info), C(firmware/version.info), C(ascend-toolkit/latest)).
    type: path
    default: /usr/local/Ascend
  dev_root:
    description:
      - Directory holding the device nodes. Only useful for tests.
    type: path
    default: /dev
notes:
  - The NPU C(index) is the chip logic id from C(npu-smi info -m), the number that E(ASCEND_RT_VISIBLE_DEVICES) refers to.
    When the mapping cannot be read the position in C(npu-smi info) is used instead.
  - C(npu-smi) prints its Bus-Id in upper case and C(nvidia-smi) with an 8-digit domain; RV(accelerators.devices[].pci_address)
    is the lower-case sysfs form of both.
"""

EXAMPLES = r"""
- name: Gather the accelerator inventory
  aihost.llm_cluster.accelerator_facts:

- name: Require eight healthy NPUs
  ansible.builtin.assert:
    that:
      - ansible_facts['llm_cluster_accelerators']['type'] == 'npu'
      - ansible_facts['llm_cluster_accelerators']['count'] == 8
      - ansible_facts['llm_cluster_accelerators']['devices'] | rejectattr('health', 'equalto', 'OK') | list | length == 0
    fail_msg: "Expected 8 healthy NPUs, found: {{ ansible_facts['llm_cluster_accelerators'] }}"

- name: Use an npu-smi outside the search path
  aihost.llm_cluster.accelerator_facts:
    npu_smi_path: /usr/local/sbin/npu-smi
  register: accelerator_inventory

- name: Show problems found while probing
  ansible.builtin.debug:
    var: accelerator_inventory.accelerators.errors
  when: accelerator_inventory.accelerators.errors | length > 0
"""

RETURN = r"""
accelerators:
  description:
    - The accelerator inventory of the host. The same dictionary is returned as the
      C(llm_cluster_accelerators) fact.
  returned: always
  type: dict
  contains:
    type:
      description: Kind of accelerator found.
      returned: always
      type: str
      choices: [npu, gpu, none]
      sample: npu
    tool:
      description: Path of the C(npu-smi) or C(nvidia-smi) binary used, V(null) when none was found.
      returned: always
      type: str
      sample: /usr/local/bin/npu-smi
    count:
      description: Number of devices reported by the tool (chips for multi-chip NPUs).
      returned: always
      type: int
      sample: 8
    devices:
      description: One entry per device, sorted by RV(accelerators.devices[].index).
      returned: always
      type: list
      elements: dict
      contains:
        index:
          description: Device number used by the runtime (NPU chip logic id, GPU C(nvidia-smi) index).
          returned: always
          type: int
          sample: 0
        name:
          description: Device model as printed by the tool.
          returned: always
          type: str
          sample: 910B4
        health:
          description:
            - V(OK), or the word the tool reports (V(Warning), V(Alarm), V(Critical), V(UNKNOWN) for NPUs).
            - For GPUs V(OK) unless C(nvidia-smi) prints an error value for one of the queried fields, which is then given here.
          returned: always
          type: str
          sample: OK
        bus_id:
          description: PCI address as printed by the tool.
          returned: always
          type: str
          sample: "0000:C1:00.0"
        pci_address:
          description: PCI address in the lower-case sysfs form, V(null) if the tool printed none.
          returned: always
          type: str
          sample: "0000:c1:00.0"
        memory_total_mb:
          description: Device memory in MiB (HBM for NPUs, DDR on NPUs without HBM).
          returned: always
          type: int
          sample: 32768
        memory_used_mb:
          description: Device memory in use in MiB.
          returned: always
          type: int
          sample: 2654
        temp_c:
          description: Temperature in degrees Celsius, V(null) if not reported.
          returned: always
          type: int
          sample: 33
        power_w:
          description: Power draw in watts, V(null) if not reported (second die of an A3 NPU).
          returned: always
          type: float
          sample: 87.2
        npu_id:
          description: NPU id (the C(-i) argument of C(npu-smi)).
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: 0
        chip_id:
          description: Chip id within the NPU (the C(-c) argument of C(npu-smi)).
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: 0
        logic_id:
          description: Chip logic id from C(npu-smi info -m), V(null) when the mapping could not be read.
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: 0
        phy_id:
          description: Chip physical id, printed by C(npu-smi info) only on multi-chip NPUs (Atlas A3); otherwise V(null).
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: null
        hbm_total_mb:
          description: HBM size in MiB.
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: 32768
        hbm_used_mb:
          description: HBM in use in MiB.
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: 2654
        aicore_pct:
          description: AI Core utilisation in percent.
          returned: when RV(accelerators.type) is V(npu)
          type: int
          sample: 0
        device_node:
          description: The C(davinciN) device node of the chip, V(null) when it does not exist.
          returned: when RV(accelerators.type) is V(npu)
          type: str
          sample: /dev/davinci0
        uuid:
          description: GPU UUID.
          returned: when RV(accelerators.type) is V(gpu)
          type: str
          sample: GPU-3b8a6c1e-1c2d-4f5a-9e8b-0a1b2c3d4e5f
    driver_version:
      description:
        - Driver version, V(null) when unknown.
        - For NPUs from the C(npu-smi info) header, falling back to C(driver/version.info); for GPUs from C(nvidia-smi).
      returned: always
      type: str
      sample: 25.0.rc1.1
    firmware_version:
      description:
        - NPU firmware version from C(npu-smi info -t board -i <first NPU> -c 0), falling back to C(firmware/version.info).
        - V(null) for GPUs and when unknown.
      returned: always
      type: str
      sample: 7.7.0.1.231
    cann_version:
      description: Version of the CANN toolkit found under O(ascend_root); V(null) for GPUs and when not installed.
      returned: always
      type: str
      sample: 8.3.RC2
    device_nodes:
      description:
        - Existing C(davinciN) (NPU) or C(nvidiaN) (GPU) device nodes under O(dev_root), in numeric order.
        - When no tool is found, any node of either kind that exists.
      returned: always
      type: list
      elements: str
      sample: [/dev/davinci0, /dev/davinci1]
    errors:
      description: Human-readable problems found while probing. They never make the module fail.
      returned: always
      type: list
      elements: str
      sample:
        - "npu-smi info failed (rc=187): DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3) / dcmi module initialize failed. ret is -8005"
ansible_facts:
  description: Facts set by the module.
  returned: always
  type: dict
  contains:
    llm_cluster_accelerators:
      description: Same dictionary as RV(accelerators).
      returned: always
      type: dict
      sample: {type: none, tool: null, count: 0, devices: [], driver_version: null, firmware_version: null,
               cann_version: null, device_nodes: [], errors: []}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aihost.llm_cluster.plugins.module_utils._accelerators import (
    TOOL_SEARCH_DIRS,
    gather_accelerators,
)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            npu_smi_path=dict(type="str"),
            nvidia_smi_path=dict(type="str"),
            ascend_root=dict(type="path", default="/usr/local/Ascend"),
            dev_root=dict(type="path", default="/dev"),
        ),
        supports_check_mode=True,
    )


def find_tool(module, option, name, errors):
    """Return the tool given by ``option`` or found on the host, else None."""
    path = module.params[option]
    if path:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        errors.append("%s=%s is not an executable file" % (option, path))
        return None
    return module.get_bin_path(name, required=False, opt_dirs=TOOL_SEARCH_DIRS)


def main():
    module = build_module()
    module.run_command_environ_update = dict(LANG="C", LC_ALL="C", LC_MESSAGES="C", LC_CTYPE="C", LANGUAGE="C")

    errors = []
    npu_smi = find_tool(module, "npu_smi_path", "npu-smi", errors)
    nvidia_smi = None if npu_smi else find_tool(module, "nvidia_smi_path", "nvidia-smi", errors)

    def run(argv):
        return module.run_command(argv)

    inventory = gather_accelerators(
        run,
        npu_smi_path=npu_smi,
        nvidia_smi_path=nvidia_smi,
        ascend_root=module.params["ascend_root"],
        dev_root=module.params["dev_root"],
        errors=errors,
    )
    module.exit_json(changed=False, accelerators=inventory, ansible_facts=dict(llm_cluster_accelerators=inventory))


if __name__ == "__main__":
    main()
