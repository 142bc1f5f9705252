"""The documentation site as a reader meets it: built with ``mkdocs build --strict`` (a warning
fails the build), then every page opened in headless Chromium (scripts/check_site.py) once
MathJax has typeset it. A page fails on math left as raw TeX or typeset as an error, a broken
internal link or anchor, an image that does not load, or a code block wider than its box at a
1280-pixel window. Screenshots of the front page and of one guide are kept under
build/screenshots/ (build artifacts, not in git). The family guides stay near 1,500 words; their
counts are printed."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
check_site = importlib.import_module("check_site")

GUIDES = ["rpca", "regression", "pathnorm", "sdl", "covariance"]
WORD_LIMIT = 1700  # "about 1,500 words a guide"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def test_every_page_renders_in_a_browser(site):
    assert importlib.util.find_spec("playwright"), "make test installs playwright (test extra)"
    shots = ROOT / "build" / "screenshots"
    report = check_site.check_site(
        site, screenshots={"index.html": shots / "index.png", "rpca/": shots / "rpca.png"}
    )
    opened = set(report)  # every page, the guides and the API reference among them
    assert {"index.html", "api/rpca/index.html"} | {f"{g}/index.html" for g in GUIDES} <= opened
    bad = {page: problems for page, problems in report.items() if problems}
    assert not bad, "\n".join(f"{p}:\n  " + "\n  ".join(v) for p, v in bad.items())
    assert (shots / "index.png").stat().st_size > 10_000


def test_the_checker_sees_what_a_reader_would(tmp_path):
    """The checks themselves can fail: a page with raw TeX, a formula MathJax cannot parse, a dead
    link and an over-wide code line is reported on each count."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(
        "<html><body><article><p>x_{t+1} and \\frac{a}{b}</p>"
        '<a href="missing.html">dead</a> <a href="index.html#nowhere">anchor</a>'
        f"<pre><code>{'y' * 400}</code></pre></article></body></html>"
    )
    problems = check_site.check_site(site)["index.html"]
    kinds = {p.split(":")[0] for p in problems}
    assert {"raw TeX in text", "broken link", "broken anchor"} <= kinds, problems
    assert any(p.startswith("code wider than its box") for p in problems), problems


@pytest.mark.parametrize("guide", GUIDES)
def test_a_guide_is_about_1500_words(guide):
    words = check_site.count_words(ROOT / "docs" / f"{guide}.md")
    print(f"{guide}.md: {words} words")
    assert words <= WORD_LIMIT, f"docs/{guide}.md has {words} words (about 1,500 wanted)"
