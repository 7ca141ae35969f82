# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Build the fake vendor tools and files of one test node as a single tar archive.

install_fakes.yml runs this on the controller, copies the archive to the node
and runs the ``install.sh`` inside it: one transfer and one command per node
instead of a task per file. The archive is deterministic (sorted entries, fixed
times and owners), so an unchanged profile gives the same bytes and the copy
reports no change.

What goes in (paths relative to ``--root``; see tests/fakes/README.md):

* ``usr/local/lib/llm-cluster-fakes/``: the tools of ``bin/``;
* ``usr/local/bin/<tool>``: links to the tools of the node's accelerator;
* ``var/lib/llm-cluster-fakes/state.json``: the profile with the node's
  identity and the faults merged over it (lists replaced, dicts merged);
* NPU profiles: the driver, firmware, install and CANN toolkit records and the
  CANN workqueue cpumasks (all online CPUs, the kernel's ``%*pb`` format);
* the recorded sysfs topology (``--topology``), when given;
* ``var/lib/llm-cluster-fakes/install.sh``: unpacks the rest, removes the tools
  and device nodes of other accelerators, creates the device nodes (character devices where
  ``mknod`` is allowed, else empty files) and removes those of missing devices.
  It prints one line per change, nothing when the node is already as built.

Files under ``var/lib/llm-cluster-fakes/sys/`` (the topology and the workqueue
masks) are only written where absent, so a binding a role wrote survives a
second install.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import shlex
import sys
import tarfile
from pathlib import Path

FAKES = Path(__file__).resolve().parent
TOOLS = ["_fakelib.py", "npu_smi.py", "npu-smi", "hccn_tool.py", "hccn_tool", "nvidia_smi.py", "nvidia-smi", "npu_exporter.py",
         "npu-exporter", "dcgm_exporter.py", "dcgm-exporter"]
TOOL_KINDS = {"npu-smi": "npu", "hccn_tool": "npu", "nvidia-smi": "gpu"}
# The device nodes of each accelerator kind, as shell globs under /dev (device_nodes makes them).
DEVICE_GLOBS = {"npu": ["davinci[0-9]*", "davinci_manager", "devmm_svm", "hisi_hdc"], "gpu": ["nvidia[0-9]*", "nvidiactl"]}
MTIME = 1767225600  # 2026-01-01: fixed, so that equal inputs give equal archives
KEEP_PREFIX = "var/lib/llm-cluster-fakes/sys"
LIB = "usr/local/lib/llm-cluster-fakes"  # the tools
DRIVER_INFO_KEYS = [
    "ascendhal_version", "aicpu_version", "tdt_version", "log_version", "prof_version", "dvppkernels_version",
    "tsfw_version", "Innerversion", "compatible_version", "compatible_version_fw",
]
CANN_COMPONENTS = ["runtime", "compiler", "hccl", "opp", "toolkit", "aoe", "ncs"]
SET_ENV = """\
export LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64/common:/usr/local/Ascend/driver/lib64/driver:$LD_LIBRARY_PATH
export ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest
export LD_LIBRARY_PATH=${ASCEND_TOOLKIT_HOME}/lib64:${ASCEND_TOOLKIT_HOME}/lib64/plugin/opskernel:${ASCEND_TOOLKIT_HOME}/lib64/plugin/nnengine:\
${ASCEND_TOOLKIT_HOME}/opp/built-in/op_impl/ai_core/tbe/op_tiling/lib/linux/$(arch):$LD_LIBRARY_PATH
export LD_LIBRARY_PATH=${ASCEND_TOOLKIT_HOME}/tools/aml/lib64:${ASCEND_TOOLKIT_HOME}/tools/aml/lib64/plugin:$LD_LIBRARY_PATH
export PYTHONPATH=${ASCEND_TOOLKIT_HOME}/python/site-packages:${ASCEND_TOOLKIT_HOME}/opp/built-in/op_impl/ai_core/tbe:$PYTHONPATH
export PATH=${ASCEND_TOOLKIT_HOME}/bin:${ASCEND_TOOLKIT_HOME}/compiler/ccec_compiler/bin:${ASCEND_TOOLKIT_HOME}/tools/ccec_compiler/bin:$PATH
export ASCEND_AICPU_PATH=${ASCEND_TOOLKIT_HOME}
export ASCEND_OPP_PATH=${ASCEND_TOOLKIT_HOME}/opp
export TOOLCHAIN_HOME=${ASCEND_TOOLKIT_HOME}/toolkit
export ASCEND_HOME_PATH=${ASCEND_TOOLKIT_HOME}
"""


def merge(base: dict, over: dict) -> dict:
    """Ansible's ``combine(recursive=True)``: dicts merge key by key, anything else is replaced."""
    result = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def node_state(profile: dict, hostname: str, root: str, faults: dict) -> dict:
    identity = {
        "hostname": hostname,
        "fabric_dir": f"{root}/var/lib/llm-cluster-fabric",
        "hccn_conf": f"{root}/etc/hccn.conf",
    }
    return merge(merge(profile, identity), faults)


def cpumask(cpus: int) -> str:
    """All of ``cpus`` CPUs in the kernel's %*pb format: 32-bit groups, the first only as wide as needed."""
    top_bits = cpus % 32 or 32
    groups = ["%0*x" % ((top_bits + 3) // 4, 2 ** top_bits - 1)] + ["ffffffff"] * ((cpus - 1) // 32)
    return ",".join(groups) + "\n"


class Archive:
    """Entries of the fake root, written sorted with fixed metadata."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple] = {}

    def _parents(self, path: str) -> None:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            self.entries.setdefault("/".join(parts[:depth]), ("dir", 0o755, None))

    def directory(self, path: str) -> None:
        self._parents(path)
        self.entries[path] = ("dir", 0o755, None)

    def file(self, path: str, content: str | bytes, mode: int = 0o644) -> None:
        self._parents(path)
        self.entries[path] = ("file", mode, content.encode() if isinstance(content, str) else content)

    def link(self, path: str, target: str) -> None:
        self._parents(path)
        self.entries[path] = ("link", 0o777, target)

    def write(self) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for path in sorted(self.entries):
                kind, mode, data = self.entries[path]
                info = tarfile.TarInfo(path)
                info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = mode, MTIME, 0, 0, "root", "root"
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif kind == "link":
                    info.type, info.linkname = tarfile.SYMTYPE, data
                    tar.addfile(info)
                else:
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        return buffer.getvalue()


def ascend_files(archive: Archive, state: dict, arch: str) -> None:
    npu = state.get("npu", {})
    cann = state.get("cann", {})
    driver = state["driver_version"]
    toolkit = f"usr/local/Ascend/ascend-toolkit/{cann['version']}"
    for directory in ["driver/tools", "driver/lib64", "firmware", f"ascend-toolkit/{cann['version']}/{arch}-linux"]:
        archive.directory(f"usr/local/Ascend/{directory}")
    # The driver's DCMI libraries (empty here): vendor container recipes mount the directory.
    archive.directory("usr/local/dcmi")
    archive.link("usr/local/Ascend/ascend-toolkit/latest", cann["version"])
    archive.file(
        "usr/local/Ascend/driver/version.info",
        f"Version={driver}\n" + "".join(f"{key}={npu['driver_info'][key]}\n" for key in DRIVER_INFO_KEYS) + f"package_version={driver}\n",
    )
    firmware = npu["firmware_info"]
    archive.file(
        "usr/local/Ascend/firmware/version.info",
        f"Version={npu['firmware_version']}\nfirmware_version={firmware['firmware_version']}\n"
        f"package_version={driver}\ncompatible_version_drv={firmware['compatible_version_drv']}\n",
    )
    archive.file(
        "etc/ascend_install.info",
        "UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nFirmware_Install_Type=full\nFirmware_Install_Path_Param=/usr/local/Ascend\n"
        "Driver_Install_Type=full\nDriver_Install_Path_Param=/usr/local/Ascend\nDriver_Install_For_All=yes\n",
    )
    archive.file(
        f"{toolkit}/version.cfg",
        "# version: 1.0\n"
        + "".join(
            f"{component}_{phase}_version=[{cann['component_version']}:{cann['version']}]\n"
            for phase in ["running", "upgrade", "installed"]
            for component in CANN_COMPONENTS
        ),
    )
    archive.file(
        f"{toolkit}/{arch}-linux/ascend_toolkit_install.info",
        f"package_name=Ascend-cann-toolkit\nversion={cann['version']}\ninnerversion={cann['innerversion']}\n"
        f"compatible_version={cann['compatible_version']}\narch={arch}\nos=linux\n"
        f"path=/usr/local/Ascend/ascend-toolkit/{cann['version']}/{arch}-linux\n",
    )
    archive.file("usr/local/Ascend/ascend-toolkit/set_env.sh", SET_ENV, 0o755)


def device_nodes(state: dict, kind: str, devices: list[dict]) -> list[tuple[str, str, int, int]]:
    """(name, mode, major, minor) of the device nodes the node should have."""
    if kind == "npu":
        majors = state["npu"]["device_node_majors"]
        nodes = [(f"davinci{dev['id']}", "0660", majors.get(f"davinci{dev['id']}", majors["davinci"]), int(dev["id"])) for dev in devices]
        return nodes + [(name, "0660", majors.get(name, majors["davinci"]), 0) for name in ["davinci_manager", "devmm_svm", "hisi_hdc"]]
    if kind == "gpu":
        return [(f"nvidia{dev['index']}", "0666", 195, int(dev["index"])) for dev in devices] + [("nvidiactl", "0666", 195, 255)]
    return []


def install_script(root: str, kind: str, nodes: list, missing: list[int], has_keep: bool) -> str:
    others = [tool for tool, tool_kind in TOOL_KINDS.items() if tool_kind != kind]
    lines = [
        "#!/bin/sh",
        "# Made by tests/fakes/build_fake_root.py: unpack the fake root, then fix up what tar cannot carry.",
        "# Prints one line per change.",
        "set -eu",
        'archive="$1"',
        f"root={shlex.quote(root)}",
        'stamp="$root/var/lib/llm-cluster-fakes/.archive.sha256"',
        'sum="$(sha256sum "$archive" | cut -d" " -f1)"',
        'if [ "$(cat "$stamp" 2>/dev/null || true)" != "$sum" ]; then',
        f'  tar -x -f "$archive" -C "$root/" --no-overwrite-dir --exclude={KEEP_PREFIX}',
    ]
    if has_keep:
        lines.append(f'  tar -x -f "$archive" -C "$root/" --skip-old-files {KEEP_PREFIX}')
    lines += [
        # Byte-compiled once here, checked by hash (tar gives every file the same time): each
        # tool call then imports _fakelib from its .pyc; the tools run with -B and write none.
        f'  python3 -m compileall -q --invalidation-mode checked-hash "$root/{LIB}" >/dev/null',
        '  printf "%s\\n" "$sum" > "$stamp"',
        '  echo "unpacked $archive"',
        "fi",
        'mkdir -p "$root/dev"',
    ]
    for tool in others:
        path = f"$root/usr/local/bin/{tool}"
        lines.append(f'if [ -e "{path}" ] || [ -L "{path}" ]; then rm -f "{path}"; echo "removed {path}"; fi')
    # A node whose NPUs or GPUs were taken out (another profile on the same node) has none of their device nodes.
    for glob in [glob for other, globs in DEVICE_GLOBS.items() if other != kind for glob in globs]:
        lines.append(f'for path in "$root"/dev/{glob}; do if [ -e "$path" ]; then rm -f "$path"; echo "removed $path"; fi; done')
    lines.append('device() { [ -e "$root/dev/$1" ] && return 0; mknod -m "$2" "$root/dev/$1" c "$3" "$4" 2>/dev/null '
                 '|| { : > "$root/dev/$1"; chmod "$2" "$root/dev/$1"; }; echo "created /dev/$1"; }')
    for name, mode, major, minor in nodes:
        lines.append(f"device {name} {mode} {int(major)} {int(minor)}")
    if kind == "npu":
        for dev_id in missing:
            path = f"$root/dev/davinci{int(dev_id)}"
            lines.append(f'if [ -e "{path}" ]; then rm -f "{path}"; echo "removed {path}"; fi')
    return "\n".join(lines) + "\n"


def build(profile_name: str, faults: dict, hostname: str, root: str, arch: str, topology: Path | None) -> bytes:
    profile = json.loads((FAKES / "profiles" / f"{profile_name}.json").read_text(encoding="utf-8"))
    state = node_state(profile, hostname, root, faults)
    kind = profile.get("accelerator", "none")
    missing = [int(item) for item in state.get("missing_devices", [])]
    id_key = "index" if kind == "gpu" else "id"
    devices = [dev for dev in state.get(kind, {}).get("devices", []) if int(dev[id_key]) not in missing]

    archive = Archive()
    for directory in ["usr/local/bin", LIB, "var/lib/llm-cluster-fakes", "var/lib/llm-cluster-fabric"]:
        archive.directory(directory)
    for tool in TOOLS:
        archive.file(f"{LIB}/{tool}", (FAKES / "bin" / tool).read_bytes(), 0o644 if tool.endswith(".py") else 0o755)
    for tool, tool_kind in TOOL_KINDS.items():
        if tool_kind == kind:
            archive.link(f"usr/local/bin/{tool}", f"{root}/{LIB}/{tool}")
    archive.file("var/lib/llm-cluster-fakes/state.json", json.dumps(state, indent=4, sort_keys=True) + "\n")
    if kind == "npu":
        ascend_files(archive, state, arch)
        archive.link("usr/local/Ascend/driver/tools/hccn_tool", f"{root}/{LIB}/hccn_tool")
        mask = cpumask(int(state["cpu"]["count"]))
        for dev in devices:
            archive.file(f"{KEEP_PREFIX}/devices/virtual/workqueue/dev{dev['id']}_sq_send_wq/cpumask", mask)
    if topology is not None:
        with tarfile.open(topology) as recorded:
            for member in recorded.getmembers():
                relative = member.name.split("/", 1)[1] if "/" in member.name else ""
                if not relative:
                    continue
                target = f"var/lib/llm-cluster-fakes/{relative}"
                if member.isdir():
                    archive.directory(target)
                elif member.isfile():
                    archive.file(target, recorded.extractfile(member).read(), member.mode & 0o777)
    has_keep = any(path.startswith(KEEP_PREFIX + "/") for path in archive.entries)
    nodes = device_nodes(state, kind, devices)
    archive.file("var/lib/llm-cluster-fakes/install.sh", install_script(root, kind, nodes, missing, has_keep), 0o755)
    return archive.write()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", required=True, help="name of a file in tests/fakes/profiles, without .json")
    parser.add_argument("--faults", default="{}", help="JSON object merged over the profile")
    parser.add_argument("--hostname", required=True)
    parser.add_argument("--root", default="", help="prefix of every path on the node ('' = the real paths)")
    parser.add_argument("--arch", required=True, help="the node's `uname -m`")
    parser.add_argument("--topology", type=Path, help="a recorded sysfs topology archive (tests/fixtures/topologies)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    faults = json.loads(args.faults)
    if not isinstance(faults, dict):
        parser.error("--faults must be a JSON object")
    data = build(args.profile, faults, args.hostname, args.root.rstrip("/"), args.arch, args.topology)
    changed = not args.out.exists() or args.out.read_bytes() != data
    if changed:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(args.out)
    json.dump({"changed": changed, "path": str(args.out), "bytes": len(data)}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
