"""The report in a real headless browser (Debian's chromium driven by Playwright): the per-sample
viewer's filters change the visible rows, a sample opens with its prompt image and responses, nothing
is logged to the console, and the page neither overflows nor overlaps at 1280 and 900 px wide.

Screenshots are written to $EVALSWEEP_SHOTS (else the test's tmp dir) for a person to look at.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import cli, serving

playwright = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e '.[browser]'; .ci/run does)"
)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).is_file(), reason="chromium not installed")

@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`runs/` as the demo lays it out (two runs, a cache, the report beside them), reported with
    `evalsweep report runs/* --out runs/report`: JEEBench with --limit 20, and a jsonl suite whose
    prompts have images."""
    root = tmp_path_factory.mktemp("browser")
    from PIL import Image

    Image.new("RGB", (4, 4), "red").save(root / "q.png")  # the prompt image the viewer must show inline
    data = root / "q.jsonl"
    with data.open("w") as f:
        for i in range(30):
            d = {"id": f"q{i:02d}", "prompt": f"What is {i} + 1? <b>bold?</b>", "choices": [str(i + 1), "x", "y"]}
            f.write(json.dumps({**d, "answer": "A", **({"images": ["q.png"]} if i % 3 == 0 else {})}) + "\n")
    runs = root / "runs"
    for name, suite, models, extra in (
        ("a", "jeebench", "sim/strong,sim/weak,sim/random", ["--variant", "cot", "--limit", "20"]),
        ("b", f"jsonl:{data}", "sim/medium,sim/strong", []),
    ):
        args = ["run", suite, "--models", models, "--out", str(runs / name), "--no-live", "--no-score", *extra]
        r = cli(*args, "--cache-dir", str(runs / "cache"))
        assert r.returncode in (0, 3), r.stderr
        assert cli("score", str(runs / name)).returncode == 0
    # what the score and protocol stages add to scores.json: coverage and deviations, read as given
    s = json.loads((runs / "a" / "scores.json").read_text())
    shaped = {"temperature": "not sent", "reasoning": "effort high",
              "token limit": "max_completion_tokens: answer + 32,768 ≤ 128,000", "API": "Responses, n=1"}
    s["protocol"] = {
        "deviations": ["judge stage skipped: no --judge given (the paper uses GPT-4)",
                       "sim/strong: temperature not sent (the model takes only its provider's default)"],
        "request_shaping": {"sim/strong": shaped, "sim/weak": {"temperature": "not sent"}},
    }
    s["models"]["sim/weak"].update(n_planned=20, n_scored=17, n_errors=3, coverage=0.85)
    (runs / "a" / "scores.json").write_text(json.dumps(s))
    (runs / "notes.txt").write_text("not a run")
    out = runs / "report"
    r = cli("report", *sorted(str(p) for p in runs.iterdir()), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "cache: not a run directory (no manifest.json), skipped" in r.stdout
    assert "notes.txt: not a run directory" in r.stdout
    return out


TABLES_FIT = """Array.from(document.querySelectorAll('h2 ~ .scroll')).slice(0, 2)
  .filter(d => d.scrollWidth > d.clientWidth + 1).map(d => d.scrollWidth + '>' + d.clientWidth)"""


def _shots(tmp_path: Path) -> Path:
    d = Path(os.environ.get("EVALSWEEP_SHOTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def _suite(page, name: str) -> None:
    """Choose the viewer's suite whose label contains `name` and wait for its rows to load."""
    label = page.eval_on_selector(
        "#v-suite", "(s, n) => Array.from(s.options).find(o => o.text.includes(n)).text", name
    )
    page.select_option("#v-suite", label=label)
    _loaded(page)


def _loaded(page) -> None:
    """Wait for the chosen model files to load (the change handler says `loading…` until then)."""
    page.wait_for_function("/loaded\\)$/.test(document.getElementById('v-count').textContent)")


def _rows(page) -> list[list[str]]:
    return page.eval_on_selector_all(
        "#v-rows tbody tr", "rs => rs.map(r => Array.from(r.cells, c => c.textContent))"
    )


OVERLAPS = """() => {
  const bad = [];
  const boxes = Array.from(document.querySelectorAll('h1,h2,h3,h4,p,li,th,td,summary,label,img,nav'))
    .filter(e => e.offsetParent !== null).map(e => [e, e.getBoundingClientRect()]);
  for (const [e, r] of boxes) {
    if (e.tagName === 'TD' || e.tagName === 'TH') {
      if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).textOverflow !== 'ellipsis')
        bad.push('cell overflows: ' + e.textContent.slice(0, 40));
    }
  }
  // block-level siblings never overlap vertically
  for (const parent of document.querySelectorAll('body, section, details, div')) {
    const kids = Array.from(parent.children).filter(k => k.offsetParent !== null && getComputedStyle(k).display === 'block');
    for (let i = 1; i < kids.length; i++) {
      const a = kids[i - 1].getBoundingClientRect(), b = kids[i].getBoundingClientRect();
      if (b.top < a.bottom - 1 && b.left < a.right && a.left < b.right) bad.push('overlap: ' + kids[i].tagName + ' ' + kids[i].textContent.slice(0, 40));
    }
  }
  return bad;
}"""


def test_viewer_filters_open_and_layout(site: Path, tmp_path: Path) -> None:
    shots = _shots(tmp_path)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for width in (1280, 900):
            page = browser.new_page(viewport={"width": width, "height": 900})
            errors: list[str] = []
            page.on("console", lambda m, err=errors: err.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e, err=errors: err.append(str(e)))
            page.goto((site / "index.html").as_uri())  # file://: no server
            page.wait_for_function("document.querySelectorAll('#v-rows tbody tr').length > 0")

            # the page reads at a glance: leaderboards first, words not dumps, partial runs marked
            text = page.inner_text("body")
            heads = page.eval_on_selector_all("h2", "hs => hs.map(h => h.textContent)")
            assert heads[:2] == ["Leaderboards", "Value frontier"], heads
            assert "None" not in text and not re.search(r"\w=None|\[\w+=", text)
            assert "partial run (20 of 515 items)" in text
            # deviations: one line above the leaderboard, every one of them collapsed below it
            assert "depart from the paper's protocol: 1 deviation of the protocol; request shaping for 2 models" in text
            assert "judge stage skipped" not in text
            page.click("details[id^='dev-'] > summary")
            shown = page.inner_text("details[id^='dev-']")
            assert "judge stage skipped: no --judge given" in shown and "Responses, n=1" in shown
            assert "temperature not sent (the model" not in shown  # the table, not the sentence again
            assert re.search(r"Below full coverage: .*sim/weak \(17 of 20 scored, 3 errors\)", text)
            assert page.evaluate("document.documentElement.scrollWidth") <= width, "page overflows"
            # every leaderboard fits its box: no column (the last, "on a frontier") hidden behind a scroll
            assert page.evaluate(TABLES_FIT) == [], width
            assert page.evaluate(OVERLAPS) == []
            page.screenshot(path=str(shots / f"report_{width}.png"), full_page=True)

            # filters on JEEBench: model → outcome → item → extraction stage
            _suite(page, "jeebench")
            models = page.eval_on_selector_all("#v-model option", "os => os.map(o => o.value)")
            assert models == ["0", "1", "2", "all"]
            page.select_option("#v-model", "all")
            _loaded(page)
            everything = _rows(page)
            assert {r[0] for r in everything} == {"sim/strong", "sim/weak", "sim/random"}
            assert len(everything) == 60
            outcomes = {r[2] for r in everything}
            assert {"correct", "wrong"} <= outcomes, outcomes
            page.select_option("#v-status", "wrong")
            wrong = _rows(page)
            assert wrong and len(wrong) < len(everything) and {r[2] for r in wrong} == {"wrong"}
            page.select_option("#v-status", "")
            item = everything[0][1]
            page.fill("#v-item", item)
            one = _rows(page)
            assert sorted(one) == sorted(r for r in everything if item in r[1]) and len(one) < len(everything)
            page.fill("#v-item", "")
            stages = page.eval_on_selector_all("#v-stage option", "os => os.map(o => o.value)")
            assert "rules" in stages, stages
            page.select_option("#v-stage", "rules")
            ruled = _rows(page)
            assert ruled and len(ruled) < len(everything) and {r[6] for r in ruled} == {"rules"}
            page.select_option("#v-stage", "")
            page.select_option("#v-model", "0")  # one model: its file only
            _loaded(page)
            assert {r[0] for r in _rows(page)} == {"sim/strong"}

            # a JEEBench sample opens with its prompt (rebuilt from the suite) and response
            page.click("#v-rows tbody tr:first-child")
            page.wait_for_selector("#v-detail pre >> nth=1")
            detail = page.inner_text("#v-detail")
            assert "Give a detailed solution" in detail and "gold:" in detail and "attempts:" in detail

            # a jsonl sample opens: prompt text (as text, not HTML) with its image inline
            _suite(page, "q.jsonl")
            page.fill("#v-item", "q03")
            page.click("#v-rows tbody tr:first-child")
            page.wait_for_selector("#v-detail img")
            detail = page.inner_text("#v-detail")
            assert "What is 3 + 1? <b>bold?</b>" in detail
            assert "gold: A" in detail and "latency:" in detail and "attempts:" in detail
            page.wait_for_function("document.querySelector('#v-detail img').naturalWidth === 4")
            assert page.locator("#v-detail pre").count() >= 2  # the prompt and the response
            page.locator("#samples").scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"viewer_{width}.png"))
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            assert errors == [], errors
            page.close()
        browser.close()


def test_view_serves_the_report(site: Path, tmp_path: Path) -> None:
    """`evalsweep view` writes the report and serves it (and its per-model files) on 127.0.0.1."""
    runs = site.parent
    with serving(str(runs / "b"), "--out", str(tmp_path / "v")) as url:
        page = urllib.request.urlopen(url, timeout=10).read().decode()
        index = json.loads(re.search(r'id="evs-index">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
        first = index[0]["models"][0]["file"]
        body = urllib.request.urlopen(url.replace("index.html", first), timeout=10).read()
        assert body.startswith(b"EVS.put(") and b'"i":"q00"' in body
