"""`make experiments`: run every paper experiment script in this folder (each writes CSV + PNG under
results/). Scripts are the files named ``<family>_*.py`` here; each has a ``main(argv)`` (run here with no
arguments: the full-size settings)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

HERE = pathlib.Path(__file__).parent


def main(argv=None):
    names = argv if argv else None
    scripts = sorted(p for p in HERE.glob("*.py") if p.name not in {"run_all.py"} and not p.name.startswith("_"))
    if names:
        scripts = [p for p in scripts if any(n in p.stem for n in names)]
    if not scripts:
        raise SystemExit(f"no experiment script's name contains any of {names}; the scripts: "
                         + ", ".join(p.stem for p in sorted(HERE.glob("*_*.py")) if p.stem != "run_all" and not p.name.startswith("_")))
    for path in scripts:
        print(f"\n### {path.stem}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.main([])


if __name__ == "__main__":
    main(sys.argv[1:])
