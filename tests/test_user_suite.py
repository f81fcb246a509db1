"""A user's suite needs nothing of our source tree (#37): `evalsweep run path/to/my_suite.py` (its
SUITE), `package.module:SUITE`, and entry points; `evalsweep suites` and `run --help` say how; a suite
file that fails names itself. The suite here is written in a folder outside the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import main
from tests.helpers import REPO

MY_SUITE = '''
"""Arithmetic, my own: three questions, the answer a number."""
import re

from core.types import Request, user
from suites.base import ScoreReport, Sink, Suite, Table, scored_row

ITEMS = {"a": ("What is 2 + 2?", "4"), "b": ("What is 3 * 3?", "9"), "c": ("What is 10 - 7?", "3")}


def build(spec):
    for item, (q, _) in ITEMS.items():
        yield Request(suite=spec.suite, item=item, messages=[user(q)], decoding={"max_tokens": 16},
                      sim={"correct": ITEMS[item][1], "wrong": ["0"]})


def score(rows, spec, run_dir, sink=None):
    sink = sink or Sink()
    per = {}
    for r in rows:
        got = re.findall(r"-?\\d+", r.get("text") or "")
        ok = float(bool(got) and got[-1] == ITEMS[r["item"]][1])
        per.setdefault(r["model"], []).append(ok)
        sink(scored_row(r, extracted=got[-1] if got else None, gold=ITEMS[r["item"]][1], score=ok))
    models = {m: {"accuracy": sum(v) / len(v), "n": len(v)} for m, v in per.items()}
    return ScoreReport(models=models, tables=[Table("arith", ["model", "accuracy"],
                                                   [[m, s["accuracy"]] for m, s in models.items()])])


SUITE = Suite(name="arith", build=build, score=score)
'''


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    d = tmp_path / "my_evals"
    d.mkdir()
    (d / "arith.py").write_text(MY_SUITE)
    return d


def test_a_suite_file_outside_the_package_runs_like_a_built_in(elsewhere: Path, tmp_path: Path):
    out = tmp_path / "run"
    code = main(["run", str(elsewhere / "arith.py"), "--models", "sim/strong", "--out", str(out), "--no-live"])
    assert code == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert {r["item"] for r in rows} == {"a", "b", "c"}
    scores = json.loads((out / "scores.json").read_text())
    assert scores["models"]["sim/strong"]["n"] == 3 and scores["models"]["sim/strong"]["accuracy"] > 0
    assert (out / "report" / "index.html").exists()
    # the default run directory is named by the suite, not its path
    code = main(["run", str(elsewhere / "arith.py"), "--models", "sim/weak", "--no-live", "--no-score",
                 "--dry-run"])
    assert code == 0


def test_a_module_named_suite_and_the_listing(elsewhere: Path, tmp_path: Path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(elsewhere.parent))
    (elsewhere / "__init__.py").write_text("")
    out = tmp_path / "run2"
    assert main(["run", "my_evals.arith:SUITE", "--models", "sim/strong", "--out", str(out), "--no-live",
                 "--no-score"]) == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 3
    capsys.readouterr()
    assert main(["suites"]) == 0
    said = capsys.readouterr().out
    assert "jeebench" in said and "jsonl:PATH" in said and "path/to/my_suite.py" in said
    p = subprocess.run([sys.executable, "-m", "cli", "run", "--help"], capture_output=True, text=True,
                       cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "your own suite: evalsweep run path/to/my_suite.py" in p.stdout


def test_a_broken_suite_file_is_named(tmp_path: Path, capsys):
    bad = tmp_path / "broken.py"
    bad.write_text("import math\n\nx = 1 / 0\n")
    assert main(["run", str(bad), "--models", "sim/strong", "--no-live"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:3: the suite file failed to import: ZeroDivisionError" in err and "Traceback" not in err
    (tmp_path / "nosuite.py").write_text("X = 1\n")
    assert main(["run", str(tmp_path / "nosuite.py"), "--models", "sim/strong", "--no-live"]) == 2
    assert "defines no SUITE" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.py"), "--models", "sim/strong", "--no-live"]) == 2
    assert "no such suite file" in capsys.readouterr().err


def test_a_declared_pass_never_wired_is_an_error_before_any_call(tmp_path: Path, capsys):
    """#37: a suite that declared a critique pass but did not wire follow_up= made 0 critique calls and
    exited 0."""
    f = tmp_path / "half.py"
    f.write_text(MY_SUITE.replace('SUITE = Suite(name="arith", build=build, score=score)',
                                  'SUITE = Suite(name="arith", build=build, score=score, passes=("answer", "critique"))'))
    out = tmp_path / "run"
    assert main(["run", str(f), "--models", "sim/strong", "--out", str(out), "--no-live"]) == 2
    assert "declares the pass critique but wires no follow_up=" in capsys.readouterr().err
    assert not (out / "results.jsonl").exists()  # nothing sent


def test_a_follow_ups_prompt_is_stored_with_its_row_and_shown_as_sent(tmp_path: Path):
    """#37: the critique prompt was rebuilt by the report from today's code, so an edited prompt showed
    beside old answers. It is stored with its row; editing the suite afterwards changes nothing shown."""
    from tests.helpers import REPO as repo

    example = repo / "examples" / "gpqa"
    mine = tmp_path / "gpqa"
    mine.mkdir()
    for f in example.iterdir():
        (mine / f.name).write_bytes(f.read_bytes())
    out = tmp_path / "run"
    assert main(["run", str(mine / "gpqa.py"), "--models", "sim/strong", "--out", str(out), "--no-live",
                 "--limit", "2", "--no-score"]) == 0
    crit = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if '"critique"' in x]
    assert crit and all("Check the answer step by step" in r["prompt"][0]["text"] for r in crit)
    src = (mine / "gpqa.py").read_text().replace("Check the answer step by step", "EDITED LATER")
    (mine / "gpqa.py").write_text(src)
    from suites import base

    base._LOADED.clear()
    assert main(["score", str(out)]) == 0 and main(["report", str(out), "--out", str(tmp_path / "rep")]) == 0
    shown = "".join(p.read_text() for p in (tmp_path / "rep" / "samples").rglob("*.js"))
    assert "Check the answer step by step" in shown and "EDITED LATER" not in shown
