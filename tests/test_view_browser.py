"""`evalsweep view runs/demo` after `evalsweep demo` (the README's next step), in headless chromium:
the sweep's folder is accepted, the report is written beside the runs (nothing left in /tmp), item ids
are in natural order, calls and retries are labelled as such, and the critique pass's prompt is shown.
Screenshots go to $EVALSWEEP_SHOTS (else the test's tmp dir)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from tests.helpers import cli, serving
from tests.test_report_browser import ARGS, CHROMIUM, _loaded, _rows, _shots, _suite

playwright = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e '.[browser]'; .ci/run does)"
)
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).is_file(), reason="chromium not installed")


def _natural(item: str) -> tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", item) if p)


def test_view_of_the_demo_folder(tmp_path: Path) -> None:
    demo = tmp_path / "runs" / "demo"
    r = cli("demo", "--out", str(demo), "--no-live", "--models", "sim/strong,sim/weak")
    assert r.returncode == 0, r.stderr
    for f in (demo / "report").rglob("*"):  # the page `view` writes, not the demo's
        if f.is_file():
            f.unlink()
    before = set(Path(tempfile.gettempdir()).glob("evalsweep-view-*"))
    with serving(str(demo)) as url:
        assert (demo / "report" / "index.html").is_file()  # beside the runs
        assert set(Path(tempfile.gettempdir()).glob("evalsweep-view-*")) == before  # nothing in /tmp
        shots = _shots(tmp_path)
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url)
            page.wait_for_function("document.querySelectorAll('#v-rows tbody tr').length > 0")
            labels = page.eval_on_selector_all("#v-suite option", "os => os.map(o => o.text)")
            assert len(labels) == 3 and any("cot-critique" in x for x in labels), labels  # every run
            _suite(page, "cot-critique")
            page.select_option("#v-model", "0")
            _loaded(page)
            page.click("#v-more") if page.is_visible("#v-more") else None
            items = [r[1] for r in _rows(page)]
            assert items == sorted(items, key=_natural) and items != sorted(items), items[:12]
            head = page.eval_on_selector_all("#v-rows thead th", "hs => hs.map(h => h.textContent)")
            assert "calls" in head and "tries" not in head
            assert all(r[9].startswith("2") for r in _rows(page)[:20])  # answer + critique: two calls
            page.click("#v-rows tbody tr:first-child")
            page.wait_for_selector("#v-detail details.v-pm")
            page.eval_on_selector_all("#v-detail details", "ds => ds.forEach(d => d.open = true)")
            detail = page.inner_text("#v-detail")
            assert "calls: 2" in detail and "prompt of the critique pass" in detail
            assert "attempts: 1" in detail  # per call: its attempts (retries shown only when any)
            critique = page.inner_text("#v-detail details.v-pm")
            assert "Problem: " in critique and "Find any problems" in critique  # the authors' critique prompt...
            assert len(critique) > 400  # ...and the model's answer
            page.locator("#v-detail").scroll_into_view_if_needed()
            page.screenshot(path=str(shots / "view_demo_critique.png"))
            assert errors == [], errors
            browser.close()
