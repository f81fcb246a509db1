"""A jsonl run validates each line of its data once (#40): the pre-flight check's pass, not again by each
model's stream of requests or the scorer's read of the golds, while that version of the file is unchanged.
The work is counted with the standard profiler (calls of the per-line checks), not timed."""

from __future__ import annotations

import cProfile
import os
import pstats
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from cli.main import main
from suites import jsonl
from suites.base import RunSpec, SuiteError
from suites.jsonl import SUITE, load
from tests.helpers import write_dataset


def _line_checks(f: Callable[[], object]) -> int:
    """How many lines `f` put through the per-line checks (`_check_line`)."""
    prof = cProfile.Profile()
    prof.runcall(f)
    code = jsonl._check_line.__code__
    return sum(v[1] for k, v in pstats.Stats(prof).stats.items()  # type: ignore[attr-defined]
               if k[0] == code.co_filename and k[2] == code.co_name)


def test_a_run_of_two_models_validates_each_line_once(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 6)
    args = ["run", f"jsonl:{data}", "--models", "sim/strong,sim/weak", "--out", str(tmp_path / "o"), "--no-live"]
    assert _line_checks(lambda: main(args)) == 6  # check; two models' requests and the score: trusted
    scores = orjson.loads((tmp_path / "o" / "scores.json").read_bytes())
    assert set(scores["models"]) == {"sim/strong", "sim/weak"}


def test_the_trusted_pass_yields_what_the_checking_pass_did(tmp_path: Path):
    (tmp_path / "img.png").write_bytes(b"\x89PNG")
    lines = [
        {"id": "a", "prompt": "p", "choices": ["x", "y"], "answer": "y", "images": ["img.png"]},
        {"id": 2, "prompt": "free", "answer": " 42 "},
        {"id": "c", "prompt": "no gold", "choices": ["x", "y", "z"]},
    ]
    data = tmp_path / "d.jsonl"
    data.write_bytes(b"\n".join(map(orjson.dumps, lines)) + b"\n\n")
    first: list[object] = []
    assert _line_checks(lambda: first.extend(load(data, True))) == 3
    again: list[object] = []
    assert _line_checks(lambda: again.extend(load(data, True))) == 0
    assert again == first
    spec = RunSpec(suite=f"jsonl:{data}", options={"allow_missing_gold": True, "shuffle_choices": 0})
    assert [r.messages for r in SUITE.build(spec)] == [r.messages for r in SUITE.build(spec)]


def test_a_check_with_missing_golds_allowed_does_not_vouch_for_a_run_without(tmp_path: Path):
    data = tmp_path / "d.jsonl"
    data.write_bytes(orjson.dumps({"id": "a", "prompt": "p"}) + b"\n")
    assert len(list(load(data, True))) == 1
    with pytest.raises(SuiteError, match=r'd.jsonl:1: no gold "answer"'):
        list(load(data, False))


def test_a_file_changed_after_the_check_is_checked_again(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 3)
    spec = RunSpec(suite=f"jsonl:{data}")
    SUITE.check(spec)  # type: ignore[misc]
    st = os.stat(data)
    with data.open("ab") as f:
        f.write(orjson.dumps({"id": "q3", "prompt": ""}) + b"\n")
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same mtime: the size (and ctime) still tell
    with pytest.raises(SuiteError, match=r'd.jsonl:4: "prompt" must be a non-empty string'):
        list(SUITE.build(spec))
