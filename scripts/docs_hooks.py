"""MkDocs hooks: MathJax served from the built site itself (never from a CDN), and the README as the
site's front page.

The pages mark their formulas with ``$...$`` and ``$$...$$`` (pymdownx.arithmatex, generic
mode); MathJax 3 typesets them in the browser. Its files come from the PyPI package
django-static-mathjax (MathJax 3.2.2 as plain files, installed by the ``docs`` extra): after the
build this hook copies the SVG-output bundle (which needs no web fonts) and the TeX extensions it
loads on demand into ``assets/mathjax/`` of the site.
"""

import importlib.util
import pathlib
import re
import shutil

_WANTED = ["tex-svg.js", "input/tex/extensions"]


def _mathjax_es5() -> pathlib.Path:
    spec = importlib.util.find_spec("mathjax")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        es5 = pathlib.Path(root) / "static" / "mathjax" / "es5"
        if (es5 / "tex-svg.js").is_file():
            return es5
    raise RuntimeError(
        "MathJax is missing: the documentation needs the docs extra "
        "(pip install -e '.[docs]', which make docs and make test run)"
    )


def on_config(config, **kwargs):
    _mathjax_es5()  # fail before building, not after
    return config


def on_post_build(config, **kwargs):
    es5 = _mathjax_es5()
    target = pathlib.Path(config["site_dir"]) / "assets" / "mathjax"
    for name in _WANTED:
        source = es5 / name
        if source.is_dir():
            shutil.copytree(source, target / name, dirs_exist_ok=True)
        else:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    shutil.copy2(es5.parent / "LICENSE", target / "LICENSE")


def on_page_markdown(markdown, page, config, **kwargs):
    """The front page is README.md, whose links point into ``docs/`` from the repository's root;
    on the site the pages are siblings of the front page. (Read here rather than by a snippet so
    that MkDocs resolves and checks those links like any other.)"""
    if page.file.src_uri == "index.md":
        readme = pathlib.Path(config["config_file_path"]).parent / "README.md"
        markdown = re.sub(r"\]\(docs/", "](", readme.read_text())
    return markdown
