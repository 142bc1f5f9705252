"""Regenerate ``lowrank_jax/datasets/fixtures/sp500_20_corr.npz``: the 20 × 20 correlation of the
daily returns of skfolio's 20 S&P 500 stocks over the file's last 250 trading days (2021-12-31 …
2022-12-28), the matrix ``make demo`` decomposes without ``make data``. Run ``make data`` first (it
installs skfolio's wheel, BSD-3, without its dependencies), then this script."""

import pathlib

import numpy as np

from lowrank_jax.datasets.covariance import load_sp500_correlation

OUT = (
    pathlib.Path(__file__).resolve().parents[1]
    / "lowrank_jax"
    / "datasets"
    / "fixtures"
    / "sp500_20_corr.npz"
)


def main():
    full = load_sp500_correlation()
    start = str(full.dates[-250])
    data = load_sp500_correlation(start=start)
    np.savez_compressed(
        OUT,
        Sigma=data.Sigma,
        names=np.array(data.names),
        groups=np.array(data.groups),
        first=str(data.dates[0]),
        last=str(data.dates[-1]),
    )
    print(f"{OUT}: {data.Sigma.shape}, returns {data.dates[0]} … {data.dates[-1]}")


if __name__ == "__main__":
    main()
