"""Issue 31.10: the run directory deleted (really, `rm -rf`) while the runner writes to it. The run
notices at its next write, stops launching calls, makes the directory again with every row finished so
far (read back from the deleted file it still holds open), its manifest (status `aborted`, the reason)
and config, exits 4 naming the directory, and the same command resumes it to completion."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import orjson

from tests.helpers import REPO, cli, rows, run_args, spawn, write_dataset


def test_a_run_directory_deleted_mid_run_is_noticed_and_put_back(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 300)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[endpoints]]\nname = "slow"\nkind = "sim"\nlatency_ms = 100\nmax_concurrency = 4\n'
                   '[[models]]\nname = "s"\nendpoint = "slow"\nmodel = "sim/strong"\n')
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "EVALSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    args = [*run_args(data, "s", cfg, out), "--no-cache"]
    p = spawn(args, env)
    while not (out / "results.jsonl").exists() or len(rows(out)) < 10:
        assert p.poll() is None, p.stderr.read()  # type: ignore[union-attr]
        time.sleep(0.02)
    shutil.rmtree(out)
    assert not out.exists()
    _, err = p.communicate(timeout=120)
    assert p.returncode == 4, err
    assert "Traceback" not in err and f"the run directory {out} was deleted" in err
    got = rows(out)
    assert 10 <= len(got) < 300  # the rows finished before (and after) the deletion, none lost
    assert len({(r["item"], r["sample"]) for r in got}) == len(got)
    man = orjson.loads((out / "manifest.json").read_bytes())
    assert man["status"] == "aborted" and "deleted" in man["abort_reason"]
    assert (out / "config.json").is_file()
    r = cli(*args, env=env)  # the same command resumes: every planned call ends with one row
    assert r.returncode == 0, r.stderr
    assert sorted(int(x["item"][1:]) for x in rows(out)) == list(range(300))
