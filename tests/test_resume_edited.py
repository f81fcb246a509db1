"""Issue 31.11: a config edited between a crash (SIGKILL of the real runner) and the resume. A model's
provider id or params changed: the resume refuses (exit 2, nothing sent) naming the fields and how to
start a new run directory; config.json still says what the rows were made with. A change that does not
decide answers (a price) resumes, and config.json keeps the snapshot it replaced under `earlier`."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import orjson
import pytest

from tests.helpers import REPO, cli, rows, run_args, spawn, write_dataset
from tests.mock_openai import MockServer

CFG = """[[endpoints]]
name = "mock"
kind = "openai"
base_url = "{url}"
max_concurrency = 2
[[models]]
name = "chat"
endpoint = "mock"
model = "{model}"
price_in = {price}
price_out = 2.0
params = {{ temperature = {temp} }}
"""


def _write(path: Path, url: str, model: str = "ok-a", temp: float = 0.0, price: float = 1.0) -> Path:
    path.write_text(CFG.format(url=url, model=model, temp=temp, price=price))
    return path


@pytest.fixture
def crashed(tmp_path: Path):
    """A run of 60 calls SIGKILLed after its first rows: (server, config path, dataset, run dir, env)."""
    srv = MockServer(latency_s=0.05).start()
    cfg = _write(tmp_path / "c.toml", srv.base_url)
    data = write_dataset(tmp_path / "d.jsonl", 60)
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "EVALSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    p = spawn(run_args(data, "chat", cfg, out), env)
    while not (out / "results.jsonl").exists() or len(rows(out)) < 5:
        assert p.poll() is None, p.stderr.read()  # type: ignore[union-attr]
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=30)
    assert 5 <= len(rows(out)) < 60
    yield srv, cfg, data, out, env
    srv.stop()


@pytest.mark.parametrize(("edit", "named"), [
    ({"model": "ok-b"}, "model: 'ok-a' → 'ok-b'"),
    ({"temp": 0.7}, "params.temperature: 0.0 → 0.7"),
])
def test_a_resume_with_other_model_settings_is_refused(crashed, edit, named):
    srv, cfg, data, out, env = crashed
    before, sent = (out / "config.json").read_bytes(), srv.total
    _write(cfg, srv.base_url, **edit)
    for args in (run_args(data, "chat", cfg, out), [*run_args(data, "chat", cfg, out), "--dry-run"]):
        r = cli(*args, env=env)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "'chat'" in r.stderr and named in r.stderr and "--out " in r.stderr, r.stderr
    assert srv.total == sent  # nothing sent
    assert (out / "config.json").read_bytes() == before  # still what the rows were made with
    _write(cfg, srv.base_url)  # settings restored: the resume goes on and completes
    r = cli(*run_args(data, "chat", cfg, out), env=env)
    assert r.returncode == 0, r.stderr
    assert {x["item"] for x in rows(out)} == {f"q{i}" for i in range(60)}


def test_a_price_change_resumes_and_config_json_keeps_both(crashed):
    srv, cfg, data, out, env = crashed
    _write(cfg, srv.base_url, price=3.0)
    r = cli(*run_args(data, "chat", cfg, out), env=env)
    assert r.returncode == 0, r.stderr
    snap = orjson.loads((out / "config.json").read_bytes())
    assert snap["models"][0]["price_in"] == 3.0
    assert [e["models"][0]["price_in"] for e in snap["earlier"]] == [1.0] and snap["earlier"][0]["replaced"]
    man = orjson.loads((out / "manifest.json").read_bytes())
    assert man["model_settings"]["chat"]["model"] == "ok-a" and man["status"] == "complete"
