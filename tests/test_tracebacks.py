"""Issue 31.7-8 and the 401 of 31.12, against the mock server on 127.0.0.1: `run --live` with stdin no
terminal (a pipe, /dev/null) finishes with a truthful exit code and manifest; a base_url carrying
`user:KEY@` next to an api key is a config error that never prints the key; a base_url with a query
string keeps its query after the path; a base_url whose call path is a 404 fails the pre-flight; a
refused key names its variable and endpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.helpers import REPO, cli, fake_key, rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


@pytest.fixture
def srv():
    s = MockServer().start()
    yield s
    s.stop()


@pytest.mark.parametrize("stdin", ["devnull", "pipe"])
def test_live_view_with_stdin_not_a_terminal_finishes(tmp_path: Path, stdin: str):
    data = write_dataset(tmp_path / "d.jsonl", 6)
    out = tmp_path / "run"
    args = [sys.executable, "-m", "cli", "run", f"jsonl:{data}", "--models", "sim/strong", "--out", str(out),
            "--live", "--no-score"]
    p = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL if stdin == "devnull" else None,
                       input="typed keys\n" if stdin == "pipe" else None)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "termios" not in p.stderr
    assert orjson.loads((out / "manifest.json").read_bytes())["status"] == "complete"
    assert len(rows(out)) == 6


def test_credentials_in_base_url_next_to_a_key_are_a_config_error(tmp_path: Path, srv: MockServer):
    secret = fake_key("userinfo-0123456789")
    url = srv.base_url.replace("http://", f"http://user:{secret}@")
    cfg = write_config(tmp_path / "c.toml", url, ["ok-a"], key_env="UI_KEY")
    data = write_dataset(tmp_path / "d.jsonl", 2)
    env = {**os.environ, "UI_KEY": fake_key("env-9876543210")}
    r = cli(*run_args(data, "ok-a", cfg, tmp_path / "run"), env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "carries credentials" in r.stderr and "base_url" in r.stderr and "user:***@" in r.stderr
    assert "0123456789" not in r.stderr + r.stdout and srv.total == 0
    alone = write_config(tmp_path / "alone.toml", url, ["ok-a"])  # basic auth alone: a usable endpoint
    r = cli(*run_args(data, "ok-a", alone, tmp_path / "run2"), env=env)
    assert r.returncode == 0, r.stderr
    assert "0123456789" not in r.stderr + (tmp_path / "run2" / "log.txt").read_text()
    assert "0123456789" not in (tmp_path / "run2" / "config.json").read_text()


def test_a_query_string_in_base_url_stays_after_the_path(tmp_path: Path, srv: MockServer):
    cfg = write_config(tmp_path / "c.toml", srv.base_url + "?api-version=2024-06-01", ["ok-a"])
    data = write_dataset(tmp_path / "d.jsonl", 4)
    r = cli(*run_args(data, "ok-a", cfg, tmp_path / "run"))
    assert r.returncode == 0, r.stderr
    assert [x["error"] for x in rows(tmp_path / "run")] == [None] * 4 and srv.total == 4


def test_a_base_url_whose_call_path_is_404_fails_the_preflight(tmp_path: Path, srv: MockServer):
    cfg = write_config(tmp_path / "c.toml", srv.base_url.removesuffix("/v1") + "/api", ["ok-a"])
    data = write_dataset(tmp_path / "d.jsonl", 4)
    r = cli(*run_args(data, "ok-a", cfg, tmp_path / "run"))
    assert r.returncode == 2, r.stderr
    assert "HTTP 404 for /chat/completions" in r.stderr and "is base_url right?" in r.stderr
    assert srv.total == 0 and not (tmp_path / "run" / "results.jsonl").exists()


def test_a_refused_key_names_its_variable_and_endpoint(tmp_path: Path, srv: MockServer):
    cfg = write_config(tmp_path / "c.toml", srv.base_url, ["auth-401"], key_env="REFUSED_KEY_VAR")
    data = write_dataset(tmp_path / "d.jsonl", 2)
    env = {**os.environ, "REFUSED_KEY_VAR": fake_key("refused-0123456789")}
    r = cli(*run_args(data, "auth-401", cfg, tmp_path / "run"), env=env)
    assert r.returncode == 3, r.stderr
    for row in rows(tmp_path / "run"):
        assert "HTTP 401" in row["error"] and "$REFUSED_KEY_VAR" in row["error"], row["error"]
        assert "endpoint 'mock'" in row["error"] and "127.0.0.1" in row["error"]
    assert "0123456789" not in r.stderr + (tmp_path / "run" / "results.jsonl").read_text()
