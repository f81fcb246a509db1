"""A damaged cache never costs rows: damaged pages, a truncated file or garbage give one warning, every
row, and the exit code of the calls themselves; a finished run directory still resumes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.results import final_rows
from tests.helpers import REPO, cli, run_args, write_config, write_dataset
from tests.mock_openai import MockServer

N = 60


@pytest.fixture
def mock():
    srv = MockServer().start()
    yield srv
    srv.stop()


def _damage(db: Path, how: str) -> None:
    size = db.stat().st_size
    if how == "pages":  # keep the header page, scribble over every other page
        with db.open("r+b") as f:
            for off in range(4096, size, 4096):
                f.seek(off + 100)
                f.write(os.urandom(512))
    elif how == "truncated":
        with db.open("r+b") as f:
            f.truncate(size // 3)
    else:  # not a database at all
        db.write_bytes(b"this is not sqlite" * 100)


def _first_run(tmp_path: Path, mock: MockServer) -> tuple[Path, Path, Path, dict[str, str]]:
    """A finished run of N items that fills the cache: (cache dir, config, dataset, env)."""
    cache = tmp_path / "cache"
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"])
    data = write_dataset(tmp_path / "d.jsonl", N)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = cli(*run_args(data, "ok-a", cfg, tmp_path / "run1", "--cache-dir", str(cache)), env=env)
    assert first.returncode == 0, first.stderr
    return cache, cfg, data, env


@pytest.mark.parametrize("how", ["pages", "truncated", "garbage"])
def test_damaged_cache_costs_no_rows(tmp_path: Path, mock: MockServer, how: str):
    cache, cfg, data, env = _first_run(tmp_path, mock)
    _damage(cache / "cache.db", how)

    # a finished directory resumes (nothing to call)
    again = cli(*run_args(data, "ok-a", cfg, tmp_path / "run1", "--cache-dir", str(cache)), env=env)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr

    # a new directory gets every row, from the provider where the cache cannot answer
    fresh = cli(*run_args(data, "ok-a", cfg, tmp_path / "run2", "--cache-dir", str(cache)), env=env)
    assert fresh.returncode == 0, fresh.stderr
    assert "Traceback" not in fresh.stderr
    rows = list(final_rows(tmp_path / "run2" / "results.jsonl"))
    assert len(rows) == N and all(r["error"] is None for r in rows)
    warned = [ln for ln in (again.stderr + fresh.stderr).splitlines() if "the response cache" in ln]
    assert warned and len(warned) <= 2, again.stderr + fresh.stderr
    if how != "pages":  # unreadable at open: moved aside, a fresh cache serves the next run
        assert list(cache.glob("cache.db.corrupt-*"))
        third = cli(*run_args(data, "ok-a", cfg, tmp_path / "run3", "--cache-dir", str(cache)), env=env)
        assert third.returncode == 0 and mock.total == 2 * N  # run3 answered from the fresh cache


@pytest.mark.parametrize("how", ["pages", "truncated", "garbage"])
def test_cache_commands_on_a_damaged_cache(tmp_path: Path, mock: MockServer, how: str):
    """`cache stats` and `cache prune` say what happened to a damaged cache instead of a traceback."""
    cache, cfg, data, env = _first_run(tmp_path, mock)
    healthy = cli("cache", "stats", "--cache-dir", str(cache), "--json", env=env)
    assert healthy.returncode == 0 and '"entries": 60' in healthy.stdout, healthy.stderr
    _damage(cache / "cache.db", how)

    st = cli("cache", "stats", "--cache-dir", str(cache), env=env)
    assert st.returncode == 0 and "Traceback" not in st.stderr, st.stderr
    assert "the response cache" in st.stderr and "damaged" in st.stderr
    assert list(cache.glob("cache.db.corrupt-*"))  # the damaged file is kept aside, never deleted
    pr = cli("cache", "prune", "--all", "--cache-dir", str(cache), env=env)
    assert pr.returncode == 0 and "Traceback" not in pr.stderr, pr.stderr


def test_ill_typed_cache_values_are_misses_set_aside_never_rows(tmp_path: Path, mock: MockServer):
    """Entries that parse but hold the wrong types (`{"text": 42, "usage": "x"}`) are misses: the calls
    are made again, once; the entries are replaced, one warning says so; and a results file already
    holding such a row (written by an older version) is scored, not crashed on."""
    import diskcache
    import orjson

    cache, cfg, data, env = _first_run(tmp_path, mock)
    with diskcache.Cache(str(cache)) as c:
        keys = list(c.iterkeys())
        bad = [{"text": 42, "usage": "x"}, {"text": "A", "usage": {"output_tokens": "many"}}, [1, 2]]
        for k, v in zip(keys[:3], bad, strict=True):
            c.set(k, orjson.dumps(v))
    sent = mock.total
    r = cli(*run_args(data, "ok-a", cfg, tmp_path / "run2", "--cache-dir", str(cache)), env=env)
    assert r.returncode == 0, r.stderr
    assert mock.total - sent == 3 and r.stderr.count("not well-typed answers") == 1
    rows = list(final_rows(tmp_path / "run2" / "results.jsonl"))
    assert len(rows) == N and all(isinstance(x["text"], str) and x["error"] is None for x in rows)
    again = cli(*run_args(data, "ok-a", cfg, tmp_path / "run3", "--cache-dir", str(cache)), env=env)
    assert mock.total - sent == 3 and "not well-typed" not in again.stderr  # replaced by good answers

    res = tmp_path / "run2" / "results.jsonl"  # an old version's row, from a bad value: scored as failed
    lines = res.read_bytes().splitlines()
    row = orjson.loads(lines[0])
    row.update(text=42, usage="x")
    res.write_bytes(b"\n".join([orjson.dumps(row), *lines[1:]]) + b"\n")
    s = cli("score", str(tmp_path / "run2"), env=env)
    assert s.returncode == 0 and "Traceback" not in s.stderr, s.stderr
    scores = orjson.loads((tmp_path / "run2" / "scores.json").read_bytes())
    assert scores["models"]["ok-a"]["n_errors"] == 1
