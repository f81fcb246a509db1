"""`--dry-run` over a run directory reads its finished rows into the resume's compact index (#47): ~20 bytes
a finished row, where a dict of identity strings and locations held ~220 (a 45-model x 200k-row night: ~2 GB);
a row without an identity is refused with its file and line, as the run itself refuses it. Memory is
counted with tracemalloc (numpy's arrays included), not timed."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson
import pytest

from cli.main import main
from runner.remaining import finished_rows
from tests.helpers import write_dataset


def test_the_dry_run_holds_a_finished_row_as_compactly_as_a_resume(tmp_path: Path):
    n = 20_000
    row = {"model": "sim/medium", "suite": "jsonl:d.jsonl", "sample": 0, "pass": "answer", "key": "k" * 64,
           "text": "The answer is B.", "usage": {"input_tokens": 12, "output_tokens": 5}, "error": None}
    (tmp_path / "results.jsonl").write_bytes(
        b"".join(orjson.dumps({**row, "item": f"q{i}"}) + b"\n" for i in range(n)))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        done, seen = finished_rows(tmp_path, True)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(done) == n and "sim/medium\x1fq123\x1f0\x1fanswer" in done
    assert seen["sim/medium"]["answer"] == [5 * n, n]
    assert (held - before) / n <= 24, f"{(held - before) / n:.1f} bytes held a finished row"
    assert (peak - before) / n <= 48, f"{(peak - before) / n:.1f} bytes at the peak of the read"


def test_a_dry_run_over_a_row_without_identity_names_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 4)
    out = tmp_path / "run"
    argv = ["run", f"jsonl:{data}", "--models", "sim/strong", "--out", str(out), "--no-cache"]
    assert main([*argv, "--limit", "2", "--no-live", "--no-score"]) == 0
    with (out / "results.jsonl").open("ab") as f:
        f.write(b'{"foo": 1}\n')
    capsys.readouterr()
    assert main([*argv, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"{out / 'results.jsonl'}:3: not a results row (no 'model')" in err, err
