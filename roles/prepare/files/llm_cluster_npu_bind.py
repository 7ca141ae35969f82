# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Bind each CANN send workqueue to its planned CPUs at boot (llm-cluster-npu-bind.service).

sysfs masks do not survive a reboot or a driver reload. The prepare role writes the masks its last run
applied (``npu_bind``'s read-back) into a JSON configuration::

    {"sysfs_root": "/", "boot_record": "/run/llm_cluster/npu_bind-boot.json", "wait": 120,
     "devices": [{"index": 0, "path": "/sys/devices/virtual/workqueue/dev0_sq_send_wq/cpumask",
                  "mask": "00000000,...,000000f0"}]}

and this script writes them again at boot, without Ansible. Before its first write in a boot it records the
kernel's own mask of each device in ``boot_record`` (``{"version": 1, "boot_id", "devices": {"<index>":
{"path", "mask"}}}``), from which ``npu_bind state=restored`` puts them back. A device whose workqueue is
not there yet (the driver still loading) is waited for, at most ``wait`` seconds for all. Exits 1 naming
each device it could not bind; the others are bound.

Standard library only: it runs on the node's system Python, before anything else of the collection.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time


def log(message):
    print(message, flush=True)


def cpus_of(mask):
    """The set bits of a kernel cpumask (comma-separated hexadecimal words), as one integer."""
    return int(mask.strip().replace(",", "") or "0", 16)


def read(path):
    with open(path, encoding="ascii") as handle:
        return handle.read().strip()


def boot_id_of(root):
    try:
        return read(os.path.join(root, "proc/sys/kernel/random/boot_id")) or None
    except OSError:
        return None


def load_record(path, boot_id):
    """This boot's record, or a new one (a record of another boot is replaced)."""
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
        if doc.get("version") == 1 and doc.get("boot_id") == boot_id and isinstance(doc.get("devices"), dict):
            return doc
    except (OSError, ValueError, AttributeError):
        pass
    return {"version": 1, "boot_id": boot_id, "devices": {}}


def save_record(path, doc):
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o755, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".npu_bind-boot.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(doc, out, indent=2, sort_keys=True)
            out.write("\n")
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def bind(config):
    """Write every planned mask; return the list of failures (empty when every device is bound)."""
    root = config.get("sysfs_root") or "/"
    record_path = config["boot_record"]
    boot_id = boot_id_of(root)
    record = load_record(record_path, boot_id)
    deadline = time.monotonic() + float(config.get("wait", 120))
    failures = []
    found = []
    for device in config.get("devices") or []:
        index, path = int(device["index"]), device["path"]
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(1)
        try:
            found.append((index, path, device["mask"], read(path)))
        except OSError as exc:
            failures.append("NPU %d: %s: %s (the driver is not loaded, or the device is gone)" % (index, path, exc.strerror))
    # The kernel's masks of this boot, saved once before the first write so a restore can put them back.
    new = [(index, path, current) for index, path, mask, current in found if str(index) not in record["devices"]]
    for index, path, current in new:
        record["devices"][str(index)] = {"path": path, "mask": current}
    if new:
        save_record(record_path, record)
    for index, path, mask, current in found:
        if cpus_of(current) == cpus_of(mask):
            log("NPU %d: %s already holds the planned mask %s" % (index, path, mask))
            continue
        try:
            with open(path, "w", encoding="ascii") as handle:
                handle.write(mask + "\n")
            now = read(path)
        except OSError as exc:
            failures.append("NPU %d: writing %s to %s failed: %s" % (index, mask, path, exc.strerror))
            continue
        if cpus_of(now) != cpus_of(mask):
            failures.append("NPU %d: %s reads %s after writing %s" % (index, path, now, mask))
            continue
        log("NPU %d: %s set to %s (was %s)" % (index, path, mask, current))
    return failures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as handle:
        config = json.load(handle)
    failures = bind(config)
    for failure in failures:
        log(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
