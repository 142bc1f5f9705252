"""Regenerate ``lowrank_jax/datasets/fixtures/golub.npz`` from multtest's ``golub.RData``.

Run ``make data`` first (it extracts the file from Debian's r-bioc-multtest into ``data/``), then
``.venv/bin/python scripts/make_golub_fixture.py``. The fixture holds ``X_1e5`` (3051, 38) int32,
the expression in units of 1e-5 (the source's values have five decimals, so this is exact),
``y`` (38,) int8 (0 = ALL, 1 = AML), ``genes`` (3051,) the Affymetrix probe ids (column 3 of
``golub.gnames``) and ``descriptions_utf8`` the gene descriptions (column 2), verbatim, joined by
newlines into one UTF-8 byte string (uint8; ``genes.decode_descriptions`` splits it), which keeps
them at ~46 KB of the ~330 KB file.
"""

import argparse
import pathlib

import numpy as np

from lowrank_jax.datasets.genes import (
    decode_descriptions,
    encode_descriptions,
    golub_fixture_path,
    golub_rdata_path,
    read_golub_rdata,
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=pathlib.Path, default=golub_rdata_path())
    parser.add_argument("--out", type=pathlib.Path, default=golub_fixture_path())
    args = parser.parse_args()
    if not args.source.is_file():
        raise SystemExit(f"{args.source} not found: run `make data` first")
    X, y, genes, descriptions = read_golub_rdata(args.source)  # X: samples × genes
    X_1e5 = np.rint(X.T * 1e5)  # stored genes × samples, as in the source file
    if not np.array_equal(X_1e5 / 1e5, X.T):
        raise SystemExit(
            f"{args.source}: values are not multiples of 1e-5; the fixture would not be exact"
        )
    blob = encode_descriptions(descriptions)
    if decode_descriptions(blob) != tuple(str(d) for d in descriptions):
        raise SystemExit(
            f"{args.source}: the gene descriptions do not survive the newline-joined encoding"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.out,
        X_1e5=X_1e5.astype(np.int32),
        y=y.astype(np.int8),
        genes=np.array([str(g) for g in genes]),  # shortest fixed width (U27, not U519)
        descriptions_utf8=blob,
    )
    print(
        f"wrote {args.out} ({args.out.stat().st_size} bytes): "
        f"{X.shape[1]} genes x {X.shape[0]} samples"
    )


if __name__ == "__main__":
    main()
