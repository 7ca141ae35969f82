# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible plugin this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The ``attributes`` block of the modules that change nothing.

    A module's own ``attributes`` keys are merged over these, key by key: a module that runs only where a tool
    is installed sets just ``platform.description``; an action plugin adds ``action``.
    """

    DOCUMENTATION = r"""
options: {}
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
"""
