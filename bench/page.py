"""How fast a report page is in a browser: first screen, every chart, a chart scrolled to, and its size.

    python bench/page.py                       # generated 1,024-rank runs of three families (built once, kept)
    python bench/page.py report.html ...       # pages already written
    python bench/page.py --runs 5 --scrolls 12

For each page, ``--runs`` fresh loads in headless Chromium (1280 x 1000, network refused) measure:

* **first s**: from ``goto(file://)`` until ``document.documentElement.dataset.chartsReady === '1'`` (the charts
  of the first screen drawn);
* **all s**: until ``dataset.allDone === '1'`` (every chart drawn and every table built, in idle time);
* **elements**: ``document.getElementsByTagName('*').length`` then;
* **scroll ms**: in each load, right after the first screen, ``--scrolls`` charts picked at random (seeded) are
  scrolled to, one after the other, while the rest still draws in idle time; each time is from
  ``scrollIntoView()`` until that chart is drawn (``data-rendered``), measured in the page; charts already
  drawn when their turn comes count as 0 and are left out of the percentiles.

Issue 28 #8 / issue 30 #3 goal at 1,024 ranks: every chart within 3 s, or a chart scrolled to within 300 ms, and at
most 20,000 elements. The numbers are medians over the runs (scroll: over every scroll of every run); no test
asserts any of them.
"""
from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/lib/chromium/chromium"
SCROLL_JS = """f => new Promise(res => {
  const c = document.querySelector('#' + CSS.escape(f) + ' .rg-chart');
  if (!c || c.getAttribute('data-rendered')) return res(-1);
  const t0 = performance.now();
  document.getElementById(f).scrollIntoView();
  (function poll() {
    if (c.getAttribute('data-rendered') || c.getAttribute('data-error')) return res(performance.now() - t0);
    requestAnimationFrame(poll);
  })();
})"""


def generated(root: Path) -> list[Path]:
    """Pages of generated 1,024-rank runs (Kineto, MindInsight, Ascend), written under ``root`` once."""
    sys.path.insert(0, str(REPO))
    from reportgen.synth.ascend import AscendSpec, write_ascend_run
    from reportgen.synth.kineto import KinetoSpec, write_kineto_run
    from reportgen.synth.mindinsight import MindInsightSpec, write_mindinsight_run

    runs = {
        "kineto1024": lambda d: write_kineto_run(d, KinetoSpec(
            hosts=128, devices_per_host=8, stages=4, steps=20, micro_batches=4,
            host_names=[f"gpu-node-{i}" for i in range(128)], slow_ranks={517: 1.4})),
        "mindinsight1024": lambda d: write_mindinsight_run(d, MindInsightSpec(
            hosts=128, devices_per_host=8, stages=4, steps=5, slow_ranks={300: 1.3})),
        "ascend1024": lambda d: write_ascend_run(d, AscendSpec(
            hosts=128, devices_per_host=8, stages=4, steps=3, microbatches=8, slow_link=(0, 256),
            memory_near_capacity=700)),
    }
    pages = []
    for name, write in runs.items():
        run, page = root / name, root / f"{name}.html"
        if not run.exists():
            print(f"generating {name} ...", file=sys.stderr)
            write(run)
        if not page.exists():
            subprocess.run([sys.executable, "-m", "reportgen", str(run), "-o", str(page), "--quiet"], cwd=REPO,
                           check=True)
        pages.append(page)
    return pages


def measure(page_path: Path, runs: int, scrolls: int) -> dict:
    from playwright.sync_api import sync_playwright

    first, done, elements, scroll = [], [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists() else None)
        for run in range(runs):
            ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
            ctx.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:", "blob:"))
                      else r.abort())
            page = ctx.new_page()
            page.goto(page_path.resolve().as_uri())
            page.wait_for_function("document.documentElement.dataset.chartsReady === '1'", timeout=120_000)
            first.append(page.evaluate("performance.now()") / 1000)
            ids = page.evaluate("[...document.querySelectorAll('.rg-chart[data-spec]')]"
                                ".map(c => c.closest('figure') ? c.closest('figure').id : '').filter(Boolean)")
            random.Random(run).shuffle(ids)
            for fid in ids[:scrolls]:
                ms = page.evaluate(SCROLL_JS, fid)
                if ms >= 0:
                    scroll.append(ms)
            page.close()
            page = ctx.new_page()
            page.goto(page_path.resolve().as_uri())
            page.wait_for_function("document.documentElement.dataset.allDone === '1'", timeout=300_000)
            done.append(page.evaluate("performance.now()") / 1000)
            elements.append(page.evaluate("document.getElementsByTagName('*').length"))
            ctx.close()
        browser.close()
    scroll.sort()
    pick = (lambda q: scroll[min(len(scroll) - 1, int(q * len(scroll)))]) if scroll else (lambda q: float("nan"))
    return {"first": statistics.median(first), "all": statistics.median(done), "elements": statistics.median(elements),
            "scrolls": len(scroll), "p50": pick(0.5), "p90": pick(0.9), "max": scroll[-1] if scroll else float("nan"),
            "mb": page_path.stat().st_size / 1e6}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", type=Path, help="report pages (default: generated 1,024-rank runs)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scrolls", type=int, default=12)
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "reportgen-bench-page",
                    help="where the generated runs and their pages are kept")
    args = ap.parse_args(argv)
    pages = args.pages or generated(args.work)
    print(f"{'page':<22} {'MB':>5} {'first s':>8} {'all s':>6} {'elements':>9} {'scrolls':>7} "
          f"{'p50 ms':>7} {'p90 ms':>7} {'max ms':>7}")
    for path in pages:
        m = measure(path, args.runs, args.scrolls)
        print(f"{path.stem[:22]:<22} {m['mb']:5.1f} {m['first']:8.2f} {m['all']:6.2f} {m['elements']:9,.0f} "
              f"{m['scrolls']:7d} {m['p50']:7.0f} {m['p90']:7.0f} {m['max']:7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
