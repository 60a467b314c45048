"""The report's first screen in a real browser: does it name the leader of every shared band at 1280x800?

Run:  python benchmarks/first_screen.py                      # sweeps/published/*.json, out/first-screen/
      python benchmarks/first_screen.py a.json b.json -o DIR --size 1366x768

Writes ``mfu-sweep report`` of the files (the published data by default) to ``DIR/report/``, then has
headless Chromium (``chromium``, Debian's package: ``apt-get install chromium``; no browser is downloaded)
lay ``index.html`` out at the screen size and:

* saves what the first screen shows as ``DIR/first-screen.png`` (the documented screenshot);
* reports where each band strip (``table.strip``) ends and which leaders it names, read back from the
  laid-out page (a small script added to a copy of the page writes them into the DOM Chromium dumps).

It exits 1 when a strip ends below the first screen, or when a leader of the report's leaderboards or
comparisons is missing from its strip. This is a report of one layout, not a unit test:
tests/test_report_first_screen.py checks the same with and without a browser.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = """<script>
document.body.dataset.strips = JSON.stringify(Array.from(document.querySelectorAll('table.strip'), t => ({
  head: t.rows[0].cells[0].textContent, bottom: t.getBoundingClientRect().bottom,
  cells: Array.from(t.rows[1].cells, c => c.textContent)})));
</script>"""


def browser() -> str:
    found = next((p for name in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(name))), None)
    if found is None:
        sys.exit("no headless Chromium on PATH (Debian: apt-get install chromium)")
    return found


def headless(*args: str) -> str:
    return subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=300, check=True).stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=sorted(str(p) for p in (ROOT / "sweeps/published").glob("*.json")))
    parser.add_argument("-o", "--output", default="out/first-screen", type=Path)
    parser.add_argument("--size", default="1280x800", help="WIDTHxHEIGHT of the screen")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    report = args.output / "report"
    subprocess.run([sys.executable, "-m", "mfu_sweep", "report", *args.files, "-o", str(report), "--force"],
                   check=True, stdout=subprocess.DEVNULL)
    page = report / "index.html"
    probe = args.output / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    window = f"--window-size={width},{height}"
    headless(window, f"--screenshot={(args.output / 'first-screen.png').resolve()}", page.resolve().as_uri())
    dom = headless(window, "--dump-dom", probe.resolve().as_uri())
    strips = json.loads(re.search(r'data-strips="([^"]*)"', dom)[1].replace("&quot;", '"'))
    analysis = json.loads((report / "analysis.json").read_text())
    leaders = _leaders(analysis)
    ok = bool(strips)
    for strip, want in zip(strips, leaders, strict=False):
        named = [c for c in strip["cells"][1:] if c.strip() and c != "–"]
        missing = [w for w in want if not any(c.startswith(w) for c in named)]
        fits = strip["bottom"] <= height
        ok &= fits and not missing
        print(f"{strip['head']}: ends at {strip['bottom']:.0f} px of {height} ({'on' if fits else 'BELOW'} the first "
              f"screen); leaders named: {', '.join(named) or 'none'}" + (f"; MISSING {missing}" if missing else ""))
    print(f"{len(strips)} band strips; screenshot {args.output / 'first-screen.png'}; "
          f"{'every leader on the first screen' if ok else 'NOT every leader on the first screen'}")
    return 0 if ok else 1


def _leaders(analysis: dict) -> list[list[str]]:
    """Per strip, in the page's order (dtype, eager first), the leaders its bands must name."""
    def order(item: dict) -> tuple:
        return item["dtype"], item["mode"] != "eager", item["mode"]

    groups: dict[tuple, list[str]] = {}
    for board in sorted(analysis["leaderboards"], key=order):
        groups[order(board)] = [b["ahead"][0]["label"] for b in board["boards"] if b["ahead"]]
    for c in sorted(analysis["comparisons"], key=order):
        groups.setdefault(order(c), []).extend(b["leader"] for b in c["bands"] if b["leader"])
    return [groups[k] for k in sorted(groups)]


if __name__ == "__main__":
    sys.exit(main())
