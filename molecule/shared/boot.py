# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A node's boot as systemd saw it, for the tests that restart a node's container as a reboot (the ray and
container scenarios). Loaded by the tests with importlib, as perimeter.py is."""

from __future__ import annotations


def booted(node, wait=120):
    """systemd's state once the boot has finished ('running' or 'degraded'); its bus answers a moment after start."""
    state = node.run("for _ in $(seq %d); do state=$(systemctl is-system-running --wait 2>/dev/null) && break; "
                     "case $state in running|degraded) break ;; esac; sleep 1; done; echo $state" % wait)
    return state.stdout.strip()


def unit_times(node, name):
    """When a unit last became active and when its main process started (monotonic microseconds of this boot)."""
    shown = node.check_output("systemctl show -p ActiveState,ActiveEnterTimestampMonotonic,ExecMainStartTimestampMonotonic %s"
                              % name)
    return dict(line.split("=", 1) for line in shown.splitlines())
