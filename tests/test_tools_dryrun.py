"""JEEBench §4.2 (cot-tools): the dry run counts the tool rounds a chain makes after its answer, against the
real local mock (tests/mock_openai.py): the typical chain one round of calls then the answer, the longest a
round for every one the suite allows (ROUNDS), so a chain's 1 + ROUNDS calls are inside the plan. A run cut
in the middle of its chains plans the rounds still to make from its real rows, however deep. (Before: the
dry run planned the answer pass alone, `--limit 10`: 10 calls for a run of up to 90.)"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import orjson
import pytest

from cli.main import main
from suites.jeebench.tools import PASSES, ROUNDS
from tests.helpers import write_config
from tests.mock_openai import MockServer

ITEMS = 3
MODELS = ["gpt-4-0613", "tool-always"]
"""One round of calls then the answer; calls in every round until the limit."""


@pytest.fixture
def srv():
    s = MockServer().start()
    yield s
    s.stop()


def _said(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, int, int]:
    """(first-pass calls, follow-up calls expected, at most) as the dry run prints them."""
    capsys.readouterr()
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    m = re.search(r"remaining: (\d+) calls(?: \+ (\d+) follow-up calls(?: \(at most (\d+)\))?)?", out)
    assert m, out
    first, exp, most = (int(x) if x else None for x in m.groups())
    return first or 0, exp or 0, most or exp or 0


def test_the_dry_run_counts_the_tool_rounds_the_run_makes(tmp_path: Path, srv: MockServer,
                                                          capsys: pytest.CaptureFixture[str]):
    cfg = write_config(tmp_path / "c.toml", srv.base_url, MODELS)
    out = tmp_path / "run"
    argv = ["run", "jeebench", "--variant", "cot-tools", "--models", ",".join(MODELS), "--config", str(cfg),
            "--out", str(out), "--limit", str(ITEMS), "--cache-dir", str(tmp_path / "cache")]  # fmt: skip
    first, exp, most = _said(argv, capsys)
    assert (first, exp, most) == (2 * ITEMS, 2 * ITEMS, 2 * ITEMS * ROUNDS)
    assert srv.total == 0
    assert main([*argv, "--no-live", "--no-score"]) == 0
    rows = [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]
    per = Counter((r["model"], r["pass"] != "answer") for r in rows)
    assert srv.total == len(rows) and first == per[("gpt-4-0613", False)] + per[("tool-always", False)]
    assert per[("gpt-4-0613", True)] == ITEMS  # the typical chain
    assert per[("tool-always", True)] == ITEMS * ROUNDS  # the longest
    assert exp <= per[("gpt-4-0613", True)] + per[("tool-always", True)] <= most
    assert _said(argv, capsys) == (0, 0, 0)  # all done
    # rounds lost deep in one chain (a crash): planned from the real rows before them
    item = rows[0]["item"]
    lost = {p for p in PASSES[5:]}
    kept = [r for r in rows if not (r["model"] == "tool-always" and r["item"] == item and r["pass"] in lost)]
    assert len(rows) - len(kept) == ROUNDS - 5
    (out / "results.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in kept))
    # tool6 follows tool5's calls for certain; then one more round typically, the rest at most
    assert _said(argv, capsys) == (0, 2, ROUNDS - 5)
