# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The offline bundle: the nodes' platforms, pip's platform tags for them, and the pins of downloaded wheels.

Pure functions (no Ansible objects), used by the ``bundle_*`` filters.
"""

from __future__ import annotations

import re

ARCHES = ("x86_64", "aarch64")
# The oldest glibc of a manylinux_2_x tag pip is given (manylinux2014 is 2.17).
OLDEST_GLIBC = 17
_PLATFORM = re.compile(r"^(?P<arch>[a-z0-9_]+)/(?P<python>3\.\d{1,2})$")
_VERSION_TAIL = re.compile(r"^[A-Za-z0-9.+!_]+$")


def platform(host, value, arch_fact=None, python_fact=None):
    """A node's platform ``{"arch", "python", "name"}``: from ``value`` ("aarch64/3.9") when given, else from
    the node's facts. Raises ValueError naming the host and the fix."""
    if value:
        match = _PLATFORM.match(str(value))
        if not match:
            raise ValueError("%s: bundle_platform %r is not ARCH/PYTHON (for example aarch64/3.9 on a Kunpeng node "
                             "with openEuler 22.03)" % (host, value))
        arch, python = match.group("arch"), match.group("python")
    else:
        if not arch_fact or not python_fact:
            raise ValueError("%s: its platform is unknown: reach the node once from here, or set bundle_platform "
                             "(ARCH/PYTHON, for example x86_64/3.11) for it" % host)
        arch, python = str(arch_fact), ".".join(str(python_fact).split(".")[:2])
    if arch == "arm64":
        arch = "aarch64"
    if arch not in ARCHES:
        raise ValueError("%s: architecture %r has no wheels of the engine; the bundle serves %s"
                         % (host, arch, " and ".join(ARCHES)))
    return {"arch": arch, "python": python, "name": "%s-py%s" % (arch, python)}


def pip_platforms(arch, glibc):
    """pip's --platform values for a node with this architecture and glibc: every manylinux_2_x tag up to its
    glibc, newest first, and manylinux2014 (pip does not widen one tag to the older ones)."""
    match = re.match(r"^2\.(\d{2})$", str(glibc))
    if arch not in ARCHES:
        raise ValueError("bundle: architecture %r is not one of %s" % (arch, ", ".join(ARCHES)))
    if not match or int(match.group(1)) < OLDEST_GLIBC:
        raise ValueError("bundle_glibc %r is not a glibc version of 2.17 or later (ldd --version on a node)" % (glibc,))
    newest = int(match.group(1))
    return ["manylinux_2_%d_%s" % (minor, arch) for minor in range(newest, OLDEST_GLIBC - 1, -1)] + [
        "manylinux2014_%s" % arch]


def wheel_pins(filenames, where="the bundle"):
    """``name==version`` lines, sorted, for the wheels among ``filenames`` (PEP 503 names, the wheel's own version,
    a local label included). Raises ValueError when one project has two versions there."""
    found = {}
    for name in sorted(filenames):
        if not name.endswith(".whl"):
            continue
        parts = name[:-len(".whl")].split("-")
        if len(parts) < 5 or not _VERSION_TAIL.match(parts[1]):
            raise ValueError("%s: %s is not a wheel's file name (name-version-python-abi-platform.whl)" % (where, name))
        project = re.sub(r"[-_.]+", "-", parts[0]).lower()
        if project in found and found[project] != parts[1]:
            raise ValueError("%s holds two versions of %s (%s and %s): build the bundle into an empty directory"
                             % (where, project, found[project], parts[1]))
        found[project] = parts[1]
    return ["%s==%s" % item for item in sorted(found.items())]
