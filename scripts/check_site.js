// Run in each page by check_site.py once MathJax is done: what a reader would see broken.
// Returns plain data: {problems: [message, ...], links: [absolute href, ...]}.
() => {
  const article = document.querySelector("article") || document.body;
  const problems = [];
  for (const el of article.querySelectorAll(".arithmatex")) {
    if (!el.querySelector("mjx-container")) {
      problems.push("math not typeset: " + el.textContent.trim().slice(0, 60));
    }
  }
  for (const el of article.querySelectorAll("mjx-merror, [data-mjx-error]")) {
    const what = el.getAttribute("data-mjx-error") || el.textContent;
    problems.push("math error: " + what.slice(0, 80));
  }
  // The visible text outside code and typeset math must hold no TeX.
  const visible = article.cloneNode(true);
  const hidden = "pre, code, script, style, mjx-container, .arithmatex";
  for (const el of visible.querySelectorAll(hidden)) el.remove();
  const text = visible.textContent;
  const commands = "frac|sum|mathcal|mathbf|operatorname|sqrt|left|right|cdot|alpha|lambda|" +
    "zeta|eta|sigma|top|star|le|ge|in|quad";
  const tex = new RegExp("\\\\(" + commands + ")\\b|[_^]\\{|\\$\\$", "g");
  for (const m of text.matchAll(tex)) {
    const around = text.slice(Math.max(0, m.index - 30), m.index + 30).replace(/\s+/g, " ");
    problems.push("raw TeX in text: …" + around + "…");
  }
  for (const pre of article.querySelectorAll("pre")) {
    // The box that scrolls: the theme's block <code>, or the <pre> itself.
    for (const box of [pre, pre.querySelector(":scope > code")]) {
      if (box && box.clientWidth > 0 && box.scrollWidth > box.clientWidth + 1) {
        const lines = pre.textContent.split("\n");
        const line = lines.reduce((a, b) => (b.length > a.length ? b : a), "");
        problems.push(
          `code wider than its box (${box.scrollWidth} > ${box.clientWidth} px): ` +
            line.slice(0, 70));
        break;
      }
    }
  }
  for (const img of article.querySelectorAll("img")) {
    if (!img.complete || img.naturalWidth === 0) {
      problems.push("image not loaded: " + img.getAttribute("src"));
    }
  }
  const links = [...document.querySelectorAll("a[href]")].map((a) => a.href);
  return { problems, links };
}
