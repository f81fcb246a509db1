"""What a resume holds per finished row (#40): `runner.rowindex.index` keeps 64-bit hashes of the identities
and packed locations, not identity strings, and stays exact when identities share a hash (a narrowed
hash makes them collide): the same rows found, sent and skipped as a dict of identities gave."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import orjson
import pytest

from cli.main import main
from core.types import row_identity
from runner import results, rowindex
from tests.helpers import rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


@pytest.fixture
def mock():
    srv = MockServer().start()
    yield srv
    srv.stop()


def _dict_index(path: Path, partial: set[str] | None) -> tuple[dict, dict]:
    """The reading `index` replaced (identity strings in dicts): the oracle."""
    done: dict = {}
    final: dict = {}
    for p in [path, *(q for q in results.results_files(path.parent) if q != path)]:
        for off, r in results.scan(p):
            ident = row_identity(r["model"], r["item"], r["sample"], r["pass"])
            loc = off if p == path else (p, off)
            if r.get("error") is None:
                done[ident] = final[ident] = loc
                if partial:
                    partial.discard(ident)
            elif ident not in done:
                final[ident] = loc
                if partial is not None and r.get("finish_reason") == "partial":
                    done[ident] = loc
                    partial.add(ident)
    return done, final


def _random_run(run: Path, seed: int) -> Path:
    """Three results files (a --join run) of retried, failed and cut rows over few identities."""
    rng = random.Random(seed)
    run.mkdir()
    for name, n in (("results.jsonl", 300), ("results.h-1.jsonl", 80), ("results.h-2.jsonl", 20)):
        lines = []
        for k in range(n):
            e = rng.random()
            lines.append(orjson.dumps({
                "model": rng.choice(["a", "b/x"]), "item": f"q{rng.randrange(30)}", "sample": rng.randrange(2),
                "pass": rng.choice(["answer", "judge"]), "k": k, "error": None if e < 0.5 else "HTTP 500",
                "finish_reason": "partial" if 0.5 <= e < 0.7 else None}) + b"\n")  # fmt: skip
        (run / name).write_bytes(b"".join(lines))
    return run / "results.jsonl"


@pytest.mark.parametrize("bits", [1, 3, 64])
def test_index_is_exact_when_identities_share_a_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bits: int):
    monkeypatch.setattr(rowindex, "HASH_BITS", bits)
    monkeypatch.setattr(rowindex, "_SLICE", 2)  # (rows sharing a hash read back a few at a time)
    for seed in range(6):
        path = _random_run(tmp_path / f"r{seed}", seed)
        for partial in (None, set(), {"a\x1fq1\x1f0\x1fanswer", "gone\x1fq0\x1f0\x1fanswer"}):
            want_cut, got_cut = (None, None) if partial is None else (set(partial), set(partial))
            want, want_final = _dict_index(path, want_cut)
            done, final = rowindex.index(path, got_cut)
            assert got_cut == want_cut
            assert dict(done.items()) == want and dict(final.items()) == want_final
            assert (len(done), len(final)) == (len(want), len(want_final))
            for ident in [*want_final, "a\x1fq99\x1f0\x1fanswer", "b/x\x1fq1\x1f7\x1fanswer"]:
                assert (done.get(ident), ident in done, ident in final) == (
                    want.get(ident), ident in want, ident in want_final)
            by: dict[str, dict[str, int]] = {}
            for ident in want:
                model, *_, p = ident.split("\x1f")
                by.setdefault(model, {})[p] = by.get(model, {}).get(p, 0) + 1
            assert rowindex.by_pass(done) == by
            earlier = rowindex.index(path, None if partial is None else set(partial))[0]
            earlier.update(done)  # (a --join worker's re-read after a takeover)
            assert dict(earlier.items()) == want


def test_an_index_holds_few_bytes_a_finished_row(tmp_path: Path):
    n = 20_000
    path = tmp_path / "results.jsonl"
    row = {"model": "sim/medium", "suite": "jsonl:d.jsonl", "sample": 0, "pass": "answer", "key": "k" * 64,
           "text": "The answer is B.", "usage": {"input_tokens": 12, "output_tokens": 5}, "error": None}
    path.write_bytes(b"".join(orjson.dumps({**row, "item": f"q{i}"}) + b"\n" for i in range(n)))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        done, final = rowindex.index(path, set())
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(done) == len(final) == n
    assert (held - before) / n <= 24, f"{(held - before) / n:.1f} bytes held a finished row"
    assert (peak - before) / n <= 48, f"{(peak - before) / n:.1f} bytes at the peak of the read"


def test_a_resume_with_colliding_hashes_sends_and_skips_the_same_rows(
    tmp_path: Path, mock: MockServer, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
):
    monkeypatch.setattr(rowindex, "HASH_BITS", 1)  # every identity shares its hash with half the others
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a", "ok-b"])
    data = write_dataset(tmp_path / "d.jsonl", 8)
    out = tmp_path / "run"
    assert main([*run_args(data, "ok-a", cfg, out), "--no-cache", "--limit", "4"]) == 0
    assert mock.total == 4
    capfd.readouterr()
    assert main([*run_args(data, "ok-a,ok-b", cfg, out), "--no-cache"]) == 0
    err = capfd.readouterr().err
    assert "resuming: 4 of 16 rows already done, cache not read, 12 to call" in err, err
    assert mock.total == 16 and set(mock.prompts.values()) == {2}  # each item once a model
    got = rows(out)
    assert sorted((r["model"], r["item"]) for r in got) == sorted(
        (m, f"q{i}") for m in ("ok-a", "ok-b") for i in range(8))
    assert all(r["error"] is None for r in got)


def test_a_resume_confirms_each_finished_row_once(
    tmp_path: Path, mock: MockServer, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
):
    """The resume line's count and the scheduler's skip share one walk of the plan: a finished row's
    identity is read back from its results file once a resume, not once for each."""
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a", "ok-b"])
    data = write_dataset(tmp_path / "d.jsonl", 8)
    out = tmp_path / "run"
    assert main([*run_args(data, "ok-a", cfg, out), "--no-cache", "--limit", "5"]) == 0
    capfd.readouterr()
    read_back: list[str | None] = []
    parsed: list[bytes] = []
    real_pread, real_parse = rowindex._pread, rowindex._head_identity

    def spy(fd: int, n: int, off: int) -> bytes:  # (counts the real reads back; answers as they do)
        got = real_pread(fd, n, off)
        read_back.append(real_parse(got))
        return got

    def parse(head: bytes) -> str | None:
        parsed.append(head)
        return real_parse(head)

    monkeypatch.setattr(rowindex, "_pread", spy)
    monkeypatch.setattr(rowindex, "_head_identity", parse)
    assert main([*run_args(data, "ok-a,ok-b", cfg, out), "--no-cache"]) == 0
    assert "resuming: 5 of 16 rows already done, cache not read, 11 to call" in capfd.readouterr().err
    assert sorted(read_back) == sorted(row_identity("ok-a", f"q{i}", 0, "answer") for i in range(5))
    assert parsed == []  # (the runner's own rows: confirmed by their bytes, no head parsed)
    assert mock.total == 5 + 11 and set(mock.prompts.values()) == {2}
    got = rows(out)
    assert sorted((r["model"], r["item"]) for r in got) == sorted(
        (m, f"q{i}") for m in ("ok-a", "ok-b") for i in range(8))


_ODD = ["q", 'q"1', "q\\", "é", "q\x1fx", "q\n", "q\\n", "\\u00e9", "\u2028", 'a","item":"q', "0"]
"""Strings that JSON escapes, or whose own bytes are another's escaped ("q\\\\n": "q\\n" written), or that
mimic the row's own bytes."""


@pytest.mark.parametrize("bits", [1, 3, 64])
def test_byte_confirm_is_exact_for_every_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bits: int):
    """A hash hit confirmed by comparing the row's bytes with the identity's says exactly what parsing
    its head says: rows in the runner's order, in another order, with escaped suites and fields, heads
    cut by the read's end, identities sharing a hash; a look-up of a missing identity finds nothing."""
    monkeypatch.setattr(rowindex, "HASH_BITS", bits)
    rng = random.Random(bits)
    run = tmp_path / "run"
    run.mkdir()
    lines, want, mimics = [], {}, []
    off = 0
    for k in range(400):
        m = rng.choice(["a", "b/x", "m" * rng.choice([1, 480, 600]), *_ODD])
        r = {"model": m, "suite": rng.choice(["jsonl:d.jsonl", 'jsonl:"x".jsonl', "s\\", "é", ""]),
             "item": rng.choice(_ODD) + str(rng.randrange(2)), "sample": rng.randrange(2),
             "pass": rng.choice(["answer", *_ODD[:3]]),
             "text": "B", "error": None}
        if k % 5 == 4:  # (another order: the suite first, the pass last)
            r = {"suite": r["suite"], "text": "B", **{f: r[f] for f in ("model", "item", "sample", "error", "pass")}}
        if k % 7 == 6:  # (no suite)
            r.pop("suite")
        if k % 11 == 10:  # (a field between item and sample: an item holding quotes could mimic it)
            r = {**{f: r[f] for f in ("model", "suite", "item") if f in r}, "x": "y", "sample": r["sample"],
                 "pass": r["pass"], "error": None}
            mimics.append(row_identity(r["model"], r["item"] + '","x":"y', r["sample"], r["pass"]))
        lines.append(orjson.dumps(r) + b"\n")
        want[row_identity(r["model"], r["item"], r["sample"], r["pass"])] = off
        off += len(lines[-1])
    (run / "results.jsonl").write_bytes(b"".join(lines))
    done, final = rowindex.index(run / "results.jsonl", None)
    assert len(done) == len(want) and len(final.failed) == 0
    for ident, at in want.items():
        assert done.get(ident) == at
    assert mimics and all(done.get(ident) is None for ident in mimics if ident not in want)
    for m in ("a", "b/x", "zz", *_ODD):  # (identities sharing fields with the rows, or their hashes)
        for item in (x + y for x in _ODD for y in "01"):
            for s, p in ((0, "answer"), (1, "answer"), (7, "answer"), (0, "q"), (0, "zz")):
                ident = row_identity(m, item, s, p)
                assert (done.get(ident), ident in done) == (want.get(ident), ident in want)


def test_the_runners_rows_are_confirmed_without_a_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A row as the runner writes it (runner.rows: model, suite, item, sample, pass first) is confirmed
    by its bytes, not by parsing its head (~0.6 us of ~3 a finished row on resume); another order is
    parsed, and found all the same."""
    run = tmp_path / "run"
    run.mkdir()
    ours = [{"model": "sim/a", "suite": "jsonl:d.jsonl", "item": f"q{i}", "sample": 0, "pass": "answer",
             "key": "k", "text": "B", "error": None} for i in range(50)]
    theirs = [{"item": f"z{i}", "model": "sim/a", "sample": 0, "pass": "answer", "error": None} for i in range(5)]
    (run / "results.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in ours + theirs))
    done = rowindex.index(run / "results.jsonl", None)[0]
    parsed: list[bytes] = []
    real = rowindex._head_identity

    def spy(head: bytes) -> str | None:
        parsed.append(head)
        return real(head)

    monkeypatch.setattr(rowindex, "_head_identity", spy)
    assert all(row_identity("sim/a", r["item"], 0, "answer") in done for r in ours + theirs)
    assert len(parsed) == len(theirs)


def test_a_resumed_follow_up_run_reads_each_finished_row_back_once_more(
    tmp_path: Path, mock: MockServer, monkeypatch: pytest.MonkeyPatch
):
    """A run with follow-ups (cot-critique) needs a resumed answer's row to make its critique: that row is
    read whole once after the resume's walk confirmed it, not looked up then read again; a finished
    critique is read once."""
    from collections import Counter

    from runner import scheduler

    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["m"])
    out = tmp_path / "r"
    args = ["run", "jeebench", "--variant", "cot-critique", "--models", "m", "--config", str(cfg), "--out", str(out),
            "--no-cache", "--no-live", "--no-score"]
    assert main([*args, "--limit", "2"]) == 0
    first = rows(out)
    assert sorted(r["pass"] for r in first) == ["answer", "answer", "critique", "critique"]
    reads: Counter[str | None] = Counter()
    real_pread, real_read_at, parse = rowindex._pread, scheduler.read_at, rowindex._head_identity

    def pread(fd: int, n: int, off: int) -> bytes:  # (every read back of a row by the index; answers as it does)
        got = real_pread(fd, n, off)
        reads[parse(got)] += 1
        return got

    def read_at(path: Path, off: results.Loc) -> dict:
        row = real_read_at(path, off)
        reads[row_identity(row["model"], row["item"], row["sample"], row["pass"])] += 1
        return row

    monkeypatch.setattr(rowindex, "_pread", pread)
    monkeypatch.setattr(scheduler, "read_at", read_at)
    calls = mock.total
    assert main([*args, "--limit", "3"]) == 0
    assert mock.total == calls + 2  # (the third item's answer and critique)
    assert reads == Counter({row_identity(r["model"], r["item"], r["sample"], r["pass"]): 2 if r["pass"] == "answer"
                             else 1 for r in first})
    assert len(rows(out)) == 6
