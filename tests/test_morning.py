"""The morning after: a run ends with its outcome on one screen (per model ok / error kinds / skipped /
cost, what to do next, where the tables and report are), after everything else; `run --help` shows
every suite's flags. Against real local servers: the mock OpenAI server (failing models) and a server
whose reasoning model spends its whole limit."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cli.main import main
from tests.helpers import run_args, write_config, write_dataset
from tests.mock_openai import MockServer
from tests.test_thinks import EmptyLengthServer


def _closing(err: str) -> list[str]:
    """The summary: from its head line (`evalsweep: <status> (exit N)`) to the end of stderr."""
    lines = err.rstrip("\n").splitlines()
    start = max(i for i, ln in enumerate(lines) if ln.startswith("evalsweep: ") and "(exit " in ln)
    return lines[start:]


def test_the_outcome_comes_last_and_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    srv = MockServer().start()
    try:
        data = write_dataset(tmp_path / "d.jsonl", 6)
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a", "always-500", "bad-400"],
                           extra_endpoint="max_attempts = 1\nretry_initial_s = 0\n")
        code = main([*run_args(data, "ok-a,always-500,bad-400", cfg, tmp_path / "r")])
    finally:
        srv.stop()
    assert code == 3
    last = _closing(capsys.readouterr().err)
    text = "\n".join(last)
    assert last[0].startswith("evalsweep: complete_with_errors (exit 3)"), text
    assert len(last) <= 22 and all(len(ln) <= 80 for ln in last if not ln.startswith(("    evalsweep", "tables", "report"))), text
    rows = {ln.split()[0]: ln for ln in last if ln.split() and ln.split()[0] in ("ok-a", "always-500", "bad-400")}
    assert "6 transient" in rows["always-500"] and "5 model_refused, 1 fatal" in rows["bad-400"], text
    assert rows["ok-a"].split()[1] == "6", text
    # a refused request is fixed before a rerun, which would repeat it; the failed calls are retried by one
    assert "1 fatal (bad-400): the provider refused the request as sent" in text and "a plain rerun repeats" in text
    assert "5 model_refused (bad-400)" in text  # the same unreadable 400 on a second item stopped it (#36)
    i = last.index("next:")
    assert "rerun to retry the 6 failed calls" in text
    assert any(ln.strip().startswith("evalsweep run jsonl:") and str(tmp_path / "r") in ln for ln in last[i:]), text
    assert last[-1].startswith("report: not written (--no-score)"), text


def test_an_exhausted_reasoning_budget_says_which_setting_to_raise(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    srv = EmptyLengthServer().start()
    try:
        cfg = tmp_path / "c.toml"
        cfg.write_text(
            f'[[endpoints]]\nname = "proxy"\nkind = "openai"\nbase_url = "http://127.0.0.1:{srv.port}/v1"\n'
            '[[models]]\nname = "o3"\nendpoint = "proxy"\nmodel = "o3"\n'
        )
        data = tmp_path / "d.jsonl"
        data.write_bytes(orjson.dumps({"id": "q", "prompt": "2+2?", "choices": ["3", "4"], "answer": "B"}) + b"\n")
        assert main(run_args(data, "o3", cfg, tmp_path / "run")) == 3
    finally:
        srv.stop()
    text = "\n".join(_closing(capsys.readouterr().err))
    assert "1 reasoning_exhausted (o3): raise its reasoning budget" in text and "a plain rerun repeats" in text
    assert "rerun to retry" not in text  # nothing a plain rerun would fix: no advice to pay again


def test_a_clean_run_says_so_and_where_the_tables_are(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 4)
    out = tmp_path / "r"
    assert main(["run", f"jsonl:{data}", "--models", "sim/strong,sim/weak", "--out", str(out), "--no-live"]) == 0
    cap = capsys.readouterr()
    last = _closing(cap.err)
    assert "• nothing to retry: every planned row is in" in last
    assert last[-2] == f"tables (--tables prints them): {out / 'tables.txt'}"
    assert last[-1] == f"report: {out / 'report' / 'index.html'}"
    assert "accuracy" in (out / "tables.txt").read_text() and "accuracy" not in cap.out  # two models: no tables


def test_run_help_lists_every_suites_flags(capsys: pytest.CaptureFixture[str]):
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--variant", "--coarse-images", "--judge-parse", "--extractor"):
        assert flag in out, flag
    assert "jeebench options (evalsweep run jeebench ...)" in out
