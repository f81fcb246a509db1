"""The guide (docs/your-own-benchmark.md) and its example (examples/gpqa/gpqa.py), as a new user meets
them: every code block runs (python blocks executed, shell blocks through the CLI on the simulated
models), and the example is a suite of at most 80 lines of code that runs and reports like a built-in."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from cli.main import main
from tests.helpers import REPO

GUIDE = REPO / "docs" / "your-own-benchmark.md"
EXAMPLE = REPO / "examples" / "gpqa" / "gpqa.py"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", GUIDE.read_text(), re.S)


def test_every_python_block_of_the_guide_runs():
    blocks = _blocks("python")
    assert blocks
    for code in blocks:
        exec(compile(code, str(GUIDE), "exec"), {})


def test_every_shell_block_of_the_guide_runs(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(REPO)
    blocks = _blocks("bash")
    assert blocks
    for block in blocks:
        for line in filter(None, (x.strip() for x in block.splitlines())):
            argv = shlex.split(line)
            assert argv[0] == "evalsweep"
            argv = [str(tmp_path / "gpqa-demo") if a == "runs/gpqa-demo" else a for a in argv[1:]]
            assert main([*argv, "--no-live", "--cache-dir", str(tmp_path / "cache")]) == 0
    scores = json.loads((tmp_path / "gpqa-demo" / "scores.json").read_text())
    strong = scores["models"]["sim/strong"]
    assert strong["n"] == 8 and "accuracy_critique" in strong and strong["ci95"]
    assert (tmp_path / "gpqa-demo" / "report" / "index.html").exists()
    rows = [json.loads(x) for x in (tmp_path / "gpqa-demo" / "results.jsonl").read_text().splitlines()]
    assert {r["pass"] for r in rows} == {"answer", "critique"} and len(rows) == 2 * 8 * 8 * 2


def test_the_example_is_one_short_file_outside_the_package():
    code = [ln for ln in EXAMPLE.read_text().splitlines()
            if ln.strip() and not ln.strip().startswith("#")]
    doc_end = next(i for i, ln in enumerate(code[1:], 1) if ln.strip().endswith('"""'))
    assert len(code) - doc_end - 1 <= 80  # lines of code, the module docstring aside
    assert not EXAMPLE.is_relative_to(REPO / "suites")
