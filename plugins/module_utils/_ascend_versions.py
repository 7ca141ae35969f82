# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""Ascend driver, firmware and CANN version files, and version comparison.

* ``<ascend_root>/driver/version.info`` and ``<ascend_root>/firmware/version.info``
  (``Version=23.0.7``, ``package_version=...``),
* ``/etc/ascend_install.info``,
* ``<toolkit>/latest/<arch>-linux/ascend_toolkit_install.info``
  (``version=8.3.RC2``),
* ``<toolkit>/latest/version.cfg``
  (``toolkit_running_version=[7.6.0.1.220:8.0.0]``).

Parsers raise ``ValueError`` naming the file and the offending line.
"""

from __future__ import annotations

import os
import platform
import re

DEFAULT_ASCEND_ROOT = "/usr/local/Ascend"

_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_BRACKET_RE = re.compile(r"^\[(?P<inner>[^\]:]*):(?P<cann>[^\]]*)\]$")
_ARCH_ALIASES = {"arm64": "aarch64", "amd64": "x86_64", "x64": "x86_64"}
_KNOWN_ARCHES = ("aarch64", "x86_64")
_TOOLKIT_DIRS = (
    ("ascend-toolkit", "latest"),
    # CANN 8.5+ images install under <root>/cann; inferred to use the same files.
    ("cann", "latest"),
    ("cann",),
)


def _error(what, message, lineno=None, line=None):
    text = "%s: %s" % (what, message)
    if line is not None:
        text += " (line %d: %r)" % (lineno, line)
    return ValueError(text)


def parse_key_value_file(text, what="version file"):
    """Parse ``key=value`` lines (``#`` comments and blank lines skipped).

    Keys are kept as printed (``Version``, ``package_version``...), values are
    stripped strings. ``what`` names the file in error messages.
    """
    result = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _KEY_RE.match(key):
            raise _error(what, "expected 'key=value'", lineno, raw)
        result[key] = value.strip()
    if not result:
        raise _error(what, "no 'key=value' lines")
    return result


def parse_driver_version_info(text):
    """Parse ``driver/version.info``; the driver version is ``Version``."""
    return parse_key_value_file(text, "driver/version.info")


def parse_firmware_version_info(text):
    """Parse ``firmware/version.info``; the firmware version is ``Version``."""
    return parse_key_value_file(text, "firmware/version.info")


def parse_ascend_install_info(text):
    """Parse ``/etc/ascend_install.info`` (``Driver_Install_Path_Param=...``)."""
    return parse_key_value_file(text, "ascend_install.info")


def parse_toolkit_install_info(text):
    """Parse ``ascend_toolkit_install.info``; the CANN version is ``version``."""
    return parse_key_value_file(text, "ascend_toolkit_install.info")


def parse_version_cfg(text):
    """Parse the toolkit ``version.cfg``.

    Returns ``{component_key: {"inner": str, "cann": str}}`` for every
    ``<component>_<kind>_version=[<inner>:<CANN version>]`` line; a ``CANN-``
    prefix on the CANN part (``[1.83.T8.0.B128:CANN-1.83]``) is removed.
    Lines with a value that is not in that form are kept as
    ``{"inner": None, "cann": None, "raw": value}``.
    """
    data = parse_key_value_file(text, "version.cfg")
    result = {}
    for key, value in data.items():
        match = _BRACKET_RE.match(value)
        if match:
            cann = match.group("cann").strip()
            if cann.upper().startswith("CANN-"):
                cann = cann[5:]
            result[key] = {"inner": match.group("inner").strip(), "cann": cann or None}
        else:
            result[key] = {"inner": None, "cann": None, "raw": value}
    return result


def cann_version_from_version_cfg(parsed):
    """Pick the CANN version out of ``parse_version_cfg``'s result, or None.

    Prefers ``toolkit_running_version``, then ``runtime_running_version``,
    then any ``*_running_version`` and finally any line with a CANN part.
    """
    for key in ("toolkit_running_version", "runtime_running_version"):
        if parsed.get(key, {}).get("cann"):
            return parsed[key]["cann"]
    for key in sorted(parsed):
        if key.endswith("_running_version") and parsed[key].get("cann"):
            return parsed[key]["cann"]
    for key in sorted(parsed):
        if parsed[key].get("cann"):
            return parsed[key]["cann"]
    return None


def _read(path):
    with open(path, "r", encoding="utf-8", errors="replace") as handle:
        return handle.read()


def read_version_file(path, parser):
    """Read ``path`` and parse it with ``parser``; None when it does not exist.

    ``ValueError`` from the parser is re-raised with the path in the message;
    ``OSError`` other than a missing file propagates.
    """
    if not os.path.isfile(path):
        return None
    text = _read(path)
    try:
        return parser(text)
    except ValueError as exc:
        raise ValueError("%s: %s" % (path, exc)) from None


def _arch_order(machine=None):
    machine = (machine or platform.machine() or "").lower()
    machine = _ARCH_ALIASES.get(machine, machine)
    order = [machine] if machine else []
    order.extend(arch for arch in _KNOWN_ARCHES if arch not in order)
    return order


def find_cann_version(root=DEFAULT_ASCEND_ROOT, machine=None):
    """Find the installed CANN toolkit version under ``root``.

    Looks for ``<toolkit>/<arch>-linux/ascend_toolkit_install.info`` (the host
    architecture first, then aarch64 and x86_64) and then for
    ``<toolkit>/version.cfg`` (the ``[inner:CANN]`` form), where ``<toolkit>``
    is ``<root>/ascend-toolkit/latest``, then ``<root>/cann/latest`` and
    ``<root>/cann``.

    Returns ``(version, path_of_the_file_used)`` or ``(None, None)`` when no
    file is found. Raises ``ValueError`` (with the path) on an unparseable file.
    """
    candidates = [os.path.join(root, *parts) for parts in _TOOLKIT_DIRS]
    for toolkit in candidates:
        for arch in _arch_order(machine):
            path = os.path.join(toolkit, "%s-linux" % arch, "ascend_toolkit_install.info")
            data = read_version_file(path, parse_toolkit_install_info)
            if data is None:
                continue
            if not data.get("version"):
                raise ValueError("%s: no 'version=' line" % path)
            return data["version"], path
    for toolkit in candidates:
        path = os.path.join(toolkit, "version.cfg")
        data = read_version_file(path, parse_version_cfg)
        if data is None:
            continue
        version = cann_version_from_version_cfg(data)
        if not version:
            raise ValueError("%s: no '<component>_running_version=[inner:CANN]' line" % path)
        return version, path
    return None, None


# ---------------------------------------------------------------------------
# Version comparison
# ---------------------------------------------------------------------------

_COMPONENT_RE = re.compile(r"^(?:(?P<num>\d+)|rc(?P<rc>\d+)|[bt](?P<build>\d+))$", re.IGNORECASE)
_RANK_BUILD = 0
_RANK_RC = 1
_RANK_RELEASE = 2
_KEY_WIDTH = 8


def ascend_version_key(version):
    """Return a sortable key for an Ascend driver (or CANN) version string.

    Accepts dot-separated parts: numbers, ``rcN`` (any case) and build tags
    ``bNNN``/``tNN``. At the same position a build tag sorts before ``rcN``,
    which sorts before any number, so ``24.1.rc2 < 24.1.0`` and
    ``24.1.rc1.b030 < 24.1.rc1 < 24.1.rc1.1``. Missing trailing parts count
    as ``0`` (``24.1 == 24.1.0``). The first part must be a number; at most
    8 parts. Keys of equal versions are equal, so the key can be used with
    ``sorted()`` directly.
    """
    if not isinstance(version, str):
        raise ValueError("invalid Ascend version %r: expected a string such as '24.1.0' or '25.0.rc1.1'" % (version,))
    parts = version.strip().split(".")
    key = []
    for position, part in enumerate(parts):
        match = _COMPONENT_RE.match(part)
        if not match or (position == 0 and match.group("num") is None):
            raise ValueError(
                "invalid Ascend version %r: part %r is not a number, 'rcN' or 'bNNN' "
                "(expected e.g. '23.0.7', '24.1.rc2' or '25.0.rc1.1')" % (version, part)
            )
        if match.group("num") is not None:
            key.append((_RANK_RELEASE, int(match.group("num"))))
        elif match.group("rc") is not None:
            key.append((_RANK_RC, int(match.group("rc"))))
        else:
            key.append((_RANK_BUILD, int(match.group("build"))))
    if len(key) < 2 or len(key) > _KEY_WIDTH:
        raise ValueError("invalid Ascend version %r: expected 2 to %d dot-separated parts" % (version, _KEY_WIDTH))
    key.extend([(_RANK_RELEASE, 0)] * (_KEY_WIDTH - len(key)))
    return tuple(key)


def compare_ascend_versions(left, right):
    """Return -1, 0 or 1 as ``left`` is older than, equal to or newer than ``right``."""
    left_key = ascend_version_key(left)
    right_key = ascend_version_key(right)
    if left_key < right_key:
        return -1
    if left_key > right_key:
        return 1
    return 0


def ascend_version_at_least(version, minimum):
    """True when ``version`` is ``minimum`` or newer."""
    return compare_ascend_versions(version, minimum) >= 0
