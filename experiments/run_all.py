"""`make experiments`: run every paper experiment script in this folder (each writes CSV + PNG under
results/). Scripts are the files named ``<family>_*.py`` here; each has a ``main(argv)`` (run here
with no arguments: the full-size settings).

    python experiments/run_all.py [NAME ...] [-- OPTION ...]

NAMEs select the scripts whose name contains one of them (all by default); options after ``--`` are
passed to every selected script's ``main`` (e.g. ``rpca_train -- --help``)."""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys

HERE = pathlib.Path(__file__).parent


def _scripts():
    return sorted(
        p for p in HERE.glob("*_*.py") if p.stem != "run_all" and not p.name.startswith("_")
    )


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    passed = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passed = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        prog="run_all.py",
        description=__doc__.split("\n\n")[0],
        epilog="scripts: " + ", ".join(p.stem for p in _scripts()),
    )
    parser.add_argument(
        "names", nargs="*", help="run only the scripts whose name contains one of these"
    )
    # An option before "--" is an error (argparse): it used to be taken as a name filter, so
    # `run_all.py rpca_train --help` started the full-size run.
    args = parser.parse_args(argv)
    scripts = _scripts()
    if args.names:
        scripts = [p for p in scripts if any(n in p.stem for n in args.names)]
    if not scripts:
        parser.error(f"no experiment script's name contains any of {args.names}")
    for path in scripts:
        print(f"\n### {path.stem}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        try:
            module.main(list(passed))
        except (
            SystemExit
        ) as stop:  # `-- --help` exits after the first script's help; show every one
            if stop.code not in (0, None) or "-h" not in passed and "--help" not in passed:
                raise


if __name__ == "__main__":
    main()
