# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""Detecting vllm-ascend's own CPU binding, which would fight affinity_apply over the same threads.

vllm-ascend binds CPUs itself when ``--additional-config`` JSON has
``"enable_cpu_binding": true`` or ``--numa-bind`` is given (in the command
line of the process or one of its ancestors), or when its environment holds
such JSON or a variable named ``*ENABLE_CPU_BINDING`` set to a true value.
"""

from __future__ import annotations

import json
import re

from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError

TRUE_WORDS = ("1", "true", "yes", "on")
CPU_BINDING_JSON_RE = re.compile(r"""["']?enable_cpu_binding["']?\s*:\s*(?:true|["']true["']|1)\b""", re.IGNORECASE)
MAX_LISTED = 20


def engine_binding(table, pid):
    """Text naming where vllm-ascend's own CPU binding was found for ``pid``, or None."""
    for owner in [pid] + table.ancestors(pid):
        args = table.cmdline(owner).split("\0")
        for position, arg in enumerate(args):
            if arg == "--numa-bind" or arg.startswith("--numa-bind="):
                if arg == "--numa-bind" or arg.split("=", 1)[1].lower() in TRUE_WORDS:
                    return "--numa-bind in the command line of PID %d" % owner
            value = None
            for flag in ("--additional-config", "--additional_config"):
                if arg == flag and position + 1 < len(args):
                    value = args[position + 1]
                elif arg.startswith(flag + "="):
                    value = arg.split("=", 1)[1]
            if value is not None and config_enables_binding(value):
                return "%s %s in the command line of PID %d" % ("--additional-config", value, owner)
    env = table.environ(pid)
    for key, value in sorted((env or {}).items()):
        if key.upper().endswith("ENABLE_CPU_BINDING") and value.strip().lower() in TRUE_WORDS:
            return "%s=%s in the environment of PID %d" % (key, value, pid)
        if "enable_cpu_binding" in value and CPU_BINDING_JSON_RE.search(value):
            return "%s in the environment of PID %d" % (key, pid)
    return None


def config_enables_binding(text):
    try:
        config = json.loads(text)
    except ValueError:
        return bool(CPU_BINDING_JSON_RE.search(text))
    if not isinstance(config, dict):
        return False
    value = config.get("enable_cpu_binding")
    if isinstance(value, str):
        return value.strip().lower() in TRUE_WORDS
    return value is True or value == 1


def refuse_engine_binding(table, matched):
    """Raise ChangeError naming every matched process whose engine binds CPUs itself."""
    found = []
    for pid in sorted(matched):
        where = engine_binding(table, pid)
        if where:
            found.append("PID %d (%s): %s" % (pid, matched[pid]["comm"], where))
    if found:
        raise ChangeError(
            "refusing to bind: vllm-ascend binds CPUs itself (enable_cpu_binding) in %s. Start the engine with "
            "--additional-config '{\"enable_cpu_binding\": false}' or set force=true" % "; ".join(found[:MAX_LISTED]))
