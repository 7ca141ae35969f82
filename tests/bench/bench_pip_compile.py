# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Time a pip install from the wheelhouse with and without byte-compiling (`--no-compile`).

Molecule's scenarios install Ray (and the engine) with pip's `--no-compile`
(.config/molecule/config.yml). This measures what that saves: alternating
trials, each into a new venv, from the local wheelhouse only (`--no-index`).
Prints the medians and their ratio; writes JSON with every trial.

    python tests/bench/bench_pip_compile.py --package ray==2.60.0 --trials 2 --json .cache/timing/bench-pip-compile.json

With --requirement (and --constraint) it installs a requirements file instead; with --index from pip's
own index and cache instead of the wheelhouse, as deploy.sh and `make venv` do:

    python tests/bench/bench_pip_compile.py --requirement requirements.txt --constraint requirements-lock.txt --index
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def install(venv: Path, source: list[str], packages: list[str], extra: list[str]) -> float:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    started = time.monotonic()
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", *source, *extra, *packages], check=True, capture_output=True)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", action="append", help="a requirement to install (repeatable)")
    parser.add_argument("--requirement", action="append", help="a requirements file to install (repeatable)")
    parser.add_argument("--constraint", action="append", help="a constraints file (repeatable)")
    parser.add_argument("--index", action="store_true", help="pip's index and cache instead of the wheelhouse")
    parser.add_argument("--wheelhouse", type=Path, default=ROOT / ".cache" / "wheelhouse")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    packages = list(args.package or [])
    for path in args.requirement or []:
        packages += ["-r", str(Path(path).resolve())]
    for path in args.constraint or []:
        packages += ["-c", str(Path(path).resolve())]
    if not args.package and not args.requirement:
        packages = ["ray==2.60.0"] + packages
    source = [] if args.index else ["--no-index", "--find-links", str(args.wheelhouse)]
    load_start = os.getloadavg()
    times: dict[str, list[float]] = {"compile": [], "no-compile": []}
    with tempfile.TemporaryDirectory() as tmp:
        for trial in range(args.trials):
            for label, extra in (("compile", []), ("no-compile", ["--no-compile"])):
                seconds = install(Path(tmp) / f"{label}-{trial}", source, packages, extra)
                times[label].append(round(seconds, 2))
                print(f"trial {trial + 1}: {label}: {seconds:.1f} s", flush=True)
    medians = {label: statistics.median(values) for label, values in times.items()}
    ratio = medians["compile"] / medians["no-compile"]
    print(f"{' '.join(packages)}: median with byte-compiling {medians['compile']:.1f} s, "
          f"with --no-compile {medians['no-compile']:.1f} s, {ratio:.1f}x faster")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"packages": packages, "index": args.index, "trials": times, "median_seconds": medians,
                                               "ratio": round(ratio, 2), "loadavg_start": load_start,
                                               "loadavg_end": os.getloadavg()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
