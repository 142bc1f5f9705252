"""`make demo`, the front door, in its --small form: every family runs on its data, writes its
figures, and the results it prints are the ones the guides promise (recovery, convergence,
sparsity)."""

import warnings

import numpy as np
import pytest

from lowrank_jax import demo


def test_small_demo_runs_every_family_and_its_results_hold(tmp_path, capsys):
    # the small RPCA instance (n = 300) gets the model trained at n = 300: no stalling rescale to
    # warn of
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="these LRPCA parameters were trained at n")
        summary, panels = demo.main(["--small", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert [row[0] for row in summary] == [
        "Robust PCA",
        "1-path-norm",
        "Softmax regression",
        "Supervised dictionary learning",
        "L + S covariance",
    ]
    assert "Summary: five families" in printed
    for name in (
        "summary.png",
        "rpca_convergence.png",
        "pathnorm_sparsity.png",
        "regression_convergence.png",
        "sdl_golub_loss.png",
        "covariance_sp500.png",
    ):
        assert (tmp_path / name).stat().st_size > 10_000, name

    rpca, path, newton, sdl, cov = panels
    assert all(c[-1] < 1e-2 for c in rpca[0].values())  # every method recovers X⋆ to 1 %
    sgd, prox = (next(v for k, v in path[0].items() if k.startswith(m)) for m in ("sgd", "prox"))
    # only the prox makes exact zeros (the share is nnz/size in float32: 1 up to its last bit)
    assert sgd[-1] > 1 - 1e-6 and prox[-1] < 0.999
    assert all(c[-1] < 1e-8 for c in newton[0].values())  # every Newton variant converged
    for c in sdl[0].values():  # F(θ_t) − F* fell 100-fold, ≥ 0
        assert np.all(c > 0) and c[-1] < c[0] / 100
    Sigma, L, S = cov.values()
    np.testing.assert_allclose(Sigma - L, S)
    assert np.linalg.eigvalsh(L)[0] > -1e-5 and np.linalg.matrix_rank(L, tol=1e-4) == 3
    assert np.linalg.norm(Sigma - L) < 0.5 * np.linalg.norm(Sigma)


def test_the_experiment_runner_takes_names_and_refuses_options_it_would_drop(monkeypatch):
    """`run_all.py rpca_train --help` took "--help" as one more name filter and started the
    full-size run (overwriting results/). Options before "--" are now refused, names that match
    nothing too, and options after "--" reach each selected script's main."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[1] / "experiments" / "run_all.py"
    spec = importlib.util.spec_from_file_location("run_all", path)
    run_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_all)
    calls = []

    class Loader:  # stands in for every script: records its argv
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            module.main = lambda argv: calls.append((module.__name__, argv))

    monkeypatch.setattr(
        run_all.importlib.util,
        "spec_from_file_location",
        lambda name, p: importlib.machinery.ModuleSpec(name, Loader()),
    )
    for argv in (["rpca_train", "--help"], ["rpca", "--instances", "1"], ["no_such_script"]):
        with pytest.raises(SystemExit):
            run_all.main(argv)
    assert calls == []
    run_all.main(["rpca_train", "--", "--instances", "1"])
    assert calls == [("rpca_train", ["--instances", "1"])]

    def help_then_exit(module):  # as argparse does for --help
        def main(argv):
            calls.append((module.__name__, argv))
            raise SystemExit(0)

        module.main = main

    # `-- --help` shows every selected script's help (the first one's exit ended the loop); any
    # other exit of a script still stops the run.
    calls.clear()
    monkeypatch.setattr(Loader, "exec_module", lambda self, module: help_then_exit(module))
    run_all.main(["rpca_train", "rpca_table5", "--", "--help"])
    assert [name for name, _ in calls] == ["rpca_table5_generalization", "rpca_train"]
    with pytest.raises(SystemExit):
        run_all.main(["rpca_train", "rpca_table5", "--", "--instances", "1"])


def test_a_partial_fig5_rerun_replaces_only_its_own_rows(monkeypatch, tmp_path):
    """`rpca_fig5_total_time.py --alphas 0.25 0.3` rewrote the whole CSV, and the rows of the other
    α were lost. Rows of the same (n, α, solver) are now replaced and the others kept; a CSV in the
    older layout (no n column) is not mixed in."""
    import importlib.util
    import pathlib

    folder = pathlib.Path(__file__).parents[1] / "experiments"
    monkeypatch.syspath_prepend(str(folder))
    spec = importlib.util.spec_from_file_location(
        "rpca_fig5_total_time", folder / "rpca_fig5_total_time.py"
    )
    fig5 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fig5)
    monkeypatch.setattr(fig5, "out_dir", lambda: tmp_path)
    row = lambda n, a, s, sec: [n, a, s, sec, 0.0, 5.0, 1e-6, 1e-5, 3]
    old = [
        row(3000, 0.05, "LRPCA", 0.1),
        row(3000, 0.25, "LRPCA", 0.2),
        row(1000, 0.25, "LRPCA", 0.03),
    ]
    new = [row(3000, 0.25, "LRPCA", 0.5), row(3000, 0.25, "AltProj", 1.0)]
    out = fig5.merged(new, old)
    assert [(r[0], r[1], r[2], r[3]) for r in out] == [
        (1000, 0.25, "LRPCA", 0.03),
        (3000, 0.05, "LRPCA", 0.1),
        (3000, 0.25, "AltProj", 1.0),
        (3000, 0.25, "LRPCA", 0.5),
    ]
    import csv

    with open(tmp_path / "fig5_total_time.csv", "w", newline="") as f:
        csv.writer(f).writerows([fig5.HEADER] + out)
    assert [r[:3] for r in fig5.earlier_rows()] == [r[:3] for r in out]
    with open(tmp_path / "fig5_total_time.csv", "w", newline="") as f:
        csv.writer(f).writerows([["alpha", "solver", "seconds"], [0.25, "LRPCA", 0.2]])
    assert fig5.earlier_rows() == []


def test_a_partial_table2_rerun_replaces_only_the_groups_it_ran(monkeypatch, tmp_path):
    """`covariance_table2.py --from-csv X --only IALM --variants code` dropped IALM's rows of every
    generator and re-ran only the code one: the paper generator's IALM rows were lost (its bars came
    out empty). Only the (generator, setting, method) groups that were re-run are replaced now."""
    import csv
    import importlib.util
    import pathlib

    folder = pathlib.Path(__file__).parents[1] / "experiments"
    spec = importlib.util.spec_from_file_location(
        "covariance_table2", folder / "covariance_table2.py"
    )
    table2 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table2)
    row = lambda v, m, i, err: [v, 100, 10, 10, 0.95, m, i, 10, 0.9, 0.1, err, 1.0]  # noqa: E731
    old = [
        row("code", "IALM", 0, 0.5),
        row("code", "IALM", 1, 0.5),
        row("paper", "IALM", 0, 0.6),
        row("code", "RPCA-GD", 0, 0.7),
    ]
    path = tmp_path / "old.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([["header"] * 12] + old)
    ran, summarised = [], []
    monkeypatch.setattr(
        table2,
        "run",
        lambda variant, runs, large, plt, only=None: (
            ran.append((variant, runs, tuple(only))) or [row(variant, "IALM", 0, 0.1)]
        ),
    )
    monkeypatch.setattr(table2, "summarise", lambda rows, plt: summarised.append(rows))
    table2.main(["--from-csv", str(path), "--only", "IALM", "--variants", "code", "--runs", "1"])
    assert ran == [("code", 1, ("IALM",))]
    assert sorted((r[0], r[5], r[6], r[10]) for r in summarised[0]) == [
        ("code", "IALM", 0, 0.1),
        ("code", "RPCA-GD", 0, 0.7),
        ("paper", "IALM", 0, 0.6),
    ]


@pytest.mark.parametrize("regs", [("layer",), ("path", "layer")])
def test_the_pathnorm_curve_figures_draw_the_regularisers_that_ran(monkeypatch, tmp_path, regs):
    """`pathnorm_robustness.py --regs layer` wrote fig1_loss.png and fig4_nnz_vs_iteration.png with
    empty axes (they drew path and ℓ1 only). They draw the paper's path and ℓ1 where those ran, else
    what did."""
    import importlib.util
    import pathlib

    import matplotlib.figure

    folder = pathlib.Path(__file__).parents[1] / "experiments"
    spec = importlib.util.spec_from_file_location(
        "pathnorm_robustness", folder / "pathnorm_robustness.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(script, "OUT", tmp_path)
    drawn = {}
    monkeypatch.setattr(
        matplotlib.figure.Figure,
        "savefig",  # which regularisers each figure drew
        lambda fig, path, **kw: drawn.update(
            {
                pathlib.Path(path).name: sorted(
                    {line.get_label().split(",")[0] for ax in fig.axes for line in ax.lines}
                )
            }
        ),
    )
    summary, curves = [], []
    for reg in regs:
        for method in ("sgd", "prox"):
            for lam in script.LAMBDAS[reg]:
                summary.append(
                    ["digits", reg, method, lam, 0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.9, 1.0, 2.0]
                )
                curves += [["digits", reg, method, lam, 0, e, 1.0 / e, 0.9] for e in (1.0, 2.0)]
    script.plot(summary, curves)
    expected = ["path"] if "path" in regs else ["layer"]
    assert drawn["fig1_loss.png"] == drawn["fig4_nnz_vs_iteration.png"] == expected
    assert drawn["fig2_error_vs_nnz.png"] == sorted(regs)


def test_a_partial_pathnorm_rerun_replaces_only_the_groups_it_ran(monkeypatch, tmp_path):
    """`pathnorm_robustness.py --regs l1` overwrote summary.csv and curves.csv with the ℓ1 rows
    alone, so the path rows of an earlier run were lost from the tables and the figures. Only the
    (data, regulariser) groups that ran are replaced now; --fresh starts over."""
    import csv
    import importlib.util
    import pathlib
    import types

    folder = pathlib.Path(__file__).parents[1] / "experiments"
    spec = importlib.util.spec_from_file_location(
        "pathnorm_robustness", folder / "pathnorm_robustness.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(script, "OUT", tmp_path)
    split = types.SimpleNamespace(images=np.zeros((4, 3), np.float32), labels=np.zeros(4, np.int32))
    monkeypatch.setattr(script, "load", lambda name: (split, split))
    lams = len(script.LAMBDAS["l1"])
    monkeypatch.setattr(
        script.pathnorm,
        "sweep",
        lambda *a, seeds, epochs, **kw: types.SimpleNamespace(
            model=None,
            status=np.ones((seeds, lams), np.int32),
            loss=np.full((seeds, lams), 7.0),
            nonzero=np.full((seeds, lams), 0.5),
            history={
                "loss": np.full((seeds, lams, epochs, 1), 7.0),
                "nonzero": np.full((seeds, lams, epochs, 1), 0.5),
            },
        ),
    )
    monkeypatch.setattr(
        script, "evaluate", lambda *a: (np.full((1, lams), 0.25), np.full((1, lams, 4), 0.75))
    )
    plotted = []
    monkeypatch.setattr(script, "plot", lambda summary, curves: plotted.append((summary, curves)))

    def old_row(reg, method):
        return ["fashion", reg, method, 0.0, 0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.9, 1.0, 2.0]

    with open(tmp_path / "summary.csv", "w", newline="") as f:
        csv.writer(f).writerows(
            [
                ["data", "reg", "method", "lam", "seed", "clean_error"]
                + [f"robust_error_eps{e:g}" for e in script.EPSILONS]
                + ["nonzero_fraction", "final_reg_loss", "sweep_train_seconds"],
                old_row("path", "prox"),
                old_row("l1", "prox"),
            ]
        )
    script.main(["--data", "fashion", "--regs", "l1", "--seeds", "1", "--epochs", "2"])
    with open(tmp_path / "summary.csv") as f:
        rows = list(csv.reader(f))[1:]
    groups = sorted({(r[1], r[2], r[5]) for r in rows})
    assert groups == [("l1", "prox", "0.25"), ("l1", "sgd", "0.25"), ("path", "prox", "0.1")]
    assert len(rows) == 1 + 2 * lams and all(r[4] == "0" for r in rows)  # seeds stay integers
    assert len(plotted[-1][0]) == len(rows)  # the figures see every row
    with open(tmp_path / "curves.csv") as f:  # no curves file before: new rows
        assert len(list(csv.reader(f))) == 1 + 2 * lams * 2
    script.main(["--data", "fashion", "--regs", "l1", "--seeds", "1", "--epochs", "2", "--fresh"])
    with open(tmp_path / "summary.csv") as f:
        assert {r[1] for r in list(csv.reader(f))[1:]} == {"l1"}


def test_the_experiments_refuse_a_data_set_name_they_do_not_know_before_any_work(
    monkeypatch, capsys
):
    """An unknown name fell through to another data set, run and labelled with the given name
    (`pathnorm_robustness.py --data Fashion` ran MNIST-5k, `sdl_gene_groups.py --datasets Golub` ran
    ALL, `covariance_market.py` the French portfolios), and `sdl_accuracy.py --datasets Gollub`
    matched nothing, wrote an empty accuracy.csv over the last results and failed drawing. Each is
    refused with the names it takes, before anything runs or is written."""
    import importlib.util
    import pathlib

    folder = pathlib.Path(__file__).parents[1] / "experiments"
    monkeypatch.syspath_prepend(str(folder))
    cases = [
        ("pathnorm_robustness", ["--data", "Fashion"], "invalid choice: 'Fashion'"),
        ("sdl_gene_groups", ["--datasets", "Golub"], "subset of golub,ALL; unknown: Golub"),
        (
            "covariance_market",
            ["--datasets", "sp500,frnch"],
            "subset of sp500,french; unknown: frnch",
        ),
        ("sdl_accuracy", ["--datasets", "Gollub"], "subset of Golub, ALL, NCI60; unknown: Gollub"),
    ]
    for name, argv, message in cases:
        spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        monkeypatch.setattr(
            module, "run", lambda *a, **k: pytest.fail(f"{name} ran"), raising=False
        )
        with pytest.raises(SystemExit):
            module.main(argv)
        assert message in capsys.readouterr().err, name
    import sdl_convergence

    with pytest.raises(ValueError, match="unknown data set 'Golub'"):
        sdl_convergence.load_normalised("Golub")
