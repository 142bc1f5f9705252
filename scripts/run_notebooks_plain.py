"""Run every notebook of docs/notebooks as a plain Python script, all at once, each in its own
process: for a machine without a Jupyter kernel (the device machines), where tests/test_notebooks.py
skips. The code cells run top to bottom (shell and magic lines dropped), matplotlib draws with Agg
and each ``plt.show()`` saves the figure to OUT/<notebook><n>.png; the printed output goes to
OUT/<notebook>.log. Exits non-zero if a notebook fails or shows no figure.

    python scripts/run_notebooks_plain.py OUT [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "notebooks"

PRELUDE = """import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
_shown = [0]
def _save(*args, **kwargs):
    _shown[0] += 1
    plt.savefig({prefix!r} + str(_shown[0]) + ".png")
    plt.close("all")
plt.show = _save
"""


def script(path: pathlib.Path, prefix: str) -> str:
    cells = [
        "".join(c["source"])
        for c in json.loads(path.read_text())["cells"]
        if c["cell_type"] == "code"
    ]
    lines = [
        line
        for cell in cells
        for line in cell.splitlines()
        if not line.lstrip().startswith(("%", "!"))
    ]
    return PRELUDE.format(prefix=prefix) + "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--timeout", type=float, default=240.0)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        log = open(args.out / f"{path.stem}.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-c", script(path, str(args.out / path.stem))],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        jobs.append((path.stem, time.perf_counter(), proc, log))
    failed = 0
    for name, start, proc, log in jobs:
        try:
            rc = proc.wait(timeout=max(1.0, args.timeout - (time.perf_counter() - start)))
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "timeout"
        log.close()
        figures = len(list(args.out.glob(f"{name}[0-9]*.png")))
        print(
            f"{name}: exit {rc}, {figures} figure(s), {time.perf_counter() - start:.0f} s",
            flush=True,
        )
        if rc != 0 or not figures:
            failed += 1
            print((args.out / f"{name}.log").read_text()[-2000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
