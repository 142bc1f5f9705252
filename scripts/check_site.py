"""Open the built documentation site in headless Chromium and report what a reader would see broken.

    python scripts/check_site.py build/site                 # every page
    python scripts/check_site.py build/site rpca/ index.html --screenshots build/screenshots
    python scripts/check_site.py --words docs/rpca.md docs/sdl.md

For each page, after MathJax has typeset it:

* **unrendered math** — a formula MathJax left as text or typeset as an error, or TeX in the visible
  text outside code: ``\\frac``-style commands, ``_{``, ``^{``, ``$$``;
* **broken internal links** — an ``href`` into the site whose page is missing, or whose ``#anchor``
  is no element id of that page; images that did not load;
* **code wider than its box** — a code block that scrolls sideways at a 1280-pixel-wide window.

``--words`` counts a page's words the way the guides' length budget does: the Markdown outside
fenced code blocks and ``$$`` display math (tables and inline math count).

Chromium is Debian's package (``/usr/bin/chromium``, installed by ``make test``), driven by
Playwright's Python client; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import pathlib
import re
import sys
import threading
import urllib.parse

CHROMIUM = "/usr/bin/chromium"
# Flags for a closed network: without the background ones Chromium keeps trying to reach Google.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDTH, HEIGHT = 1280, 900

# Run in each page once MathJax is done (returns the problems and the page's links).
_PAGE_CHECK = pathlib.Path(__file__).with_name("check_site.js").read_text()


def count_words(path: pathlib.Path) -> int:
    """Words of a Markdown page outside fenced code blocks and ``$$`` display math."""
    text = path.read_text()
    text = re.sub(r"^```.*?^```", " ", text, flags=re.S | re.M)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    return len(text.split())


def _pages(site: pathlib.Path) -> list[str]:
    skip = {"404.html"}
    return sorted(
        str(p.relative_to(site)).replace("\\", "/")
        for p in site.rglob("*.html")
        if p.name not in skip and p.relative_to(site).parts[0] not in {"assets", "search"}
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the page requests are not news
        pass


def _ids(html_path: pathlib.Path) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', html_path.read_text(errors="replace")))


def _target(site: pathlib.Path, url_path: str) -> pathlib.Path | None:
    path = site / urllib.parse.unquote(url_path).lstrip("/")
    if path.is_dir():
        path = path / "index.html"
    return path if path.is_file() else None


@functools.cache
def _cached_ids(path: pathlib.Path) -> frozenset[str]:
    return frozenset(_ids(path))


def check_site(
    site: pathlib.Path | str,
    pages: list[str] | None = None,
    screenshots: dict[str, pathlib.Path] | None = None,
) -> dict[str, list[str]]:
    """Problems per page (``{page: [message, ...]}``, empty lists for clean pages).

    ``pages`` are paths relative to the site (``"rpca/"`` or ``"rpca/index.html"``); all pages by
    default. ``screenshots`` maps a page to a PNG path for a full-page screenshot of it.
    """
    from playwright.sync_api import sync_playwright

    site = pathlib.Path(site).resolve()
    if not (site / "index.html").is_file():
        raise FileNotFoundError(f"{site} is not a built site (no index.html): run mkdocs build")
    if not pathlib.Path(CHROMIUM).exists():
        raise FileNotFoundError(
            f"{CHROMIUM} is missing: make test installs Debian's chromium package "
            "(apt-get install chromium)"
        )
    pages = [p if not p.endswith("/") else p + "index.html" for p in (pages or _pages(site))]
    screenshots = {
        (k if not k.endswith("/") else k + "index.html"): pathlib.Path(v)
        for k, v in (screenshots or {}).items()
    }

    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/"
    report: dict[str, list[str]] = {}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            failed: list[str] = []
            page.on("requestfailed", lambda r: failed.append(r.url))
            page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
            for name in pages:
                failed.clear()
                page.goto(base + name, wait_until="load")
                if page.evaluate("typeof window.MathJax === 'object'"):
                    page.wait_for_function(
                        "window.MathJax.startup && window.MathJax.startup.promise"
                    )
                    page.evaluate("window.MathJax.startup.promise")
                result = page.evaluate(_PAGE_CHECK)
                problems = list(result["problems"])
                problems += [f"request failed: {u}" for u in failed if u.startswith(base)]
                for href in result["links"]:
                    if not href.startswith(base):
                        continue
                    parsed = urllib.parse.urlparse(href)
                    target = _target(site, parsed.path)
                    if target is None:
                        problems.append(f"broken link: {href[len(base) :]}")
                    elif parsed.fragment and target.suffix == ".html":
                        if urllib.parse.unquote(parsed.fragment) not in _cached_ids(target):
                            problems.append(f"broken anchor: {href[len(base) :]}")
                report[name] = sorted(set(problems))
                if name in screenshots:
                    screenshots[name].parent.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(screenshots[name]), full_page=True)
            browser.close()
    finally:
        server.shutdown()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", nargs="?", help="the built site folder (mkdocs build)")
    parser.add_argument("pages", nargs="*", help="pages relative to the site; all by default")
    parser.add_argument("--screenshots", help="folder for screenshots of the pages checked")
    parser.add_argument("--words", nargs="+", metavar="MD", help="count the words of pages")
    args = parser.parse_args(argv)
    if args.words:
        for md in args.words:
            print(f"{count_words(pathlib.Path(md)):6d}  {md}")
        if not args.site:
            return 0
    if not args.site:
        parser.error("give the site folder, or --words")
    shots = None
    if args.screenshots:
        names = args.pages or ["index.html"]
        shots = {
            n: pathlib.Path(args.screenshots) / (n.strip("/").replace("/", "_") or "index")
            for n in names
        }
        shots = {k: v.with_suffix(".png") for k, v in shots.items()}
    report = check_site(args.site, args.pages or None, shots)
    bad = {k: v for k, v in report.items() if v}
    for name, problems in bad.items():
        print(name)
        for p in problems:
            print("   ", p)
    print(f"{len(report)} pages checked, {len(bad)} with problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
