"""Batch mode end to end against mock OpenAI and Anthropic batch servers on 127.0.0.1: same scores as
live calls at the discounted price, failures inside a batch fall back to live calls, files split at
the request-count and size limits, multi-pass flows become new batch rounds."""

from __future__ import annotations

import json
import os
import secrets
from collections import Counter
from pathlib import Path

import orjson
import pytest

from cli.args import duration as _duration
from cli.main import main
from core.types import ImagePart, Message, Request, user
from providers.anthropic import FALLBACK_MAX_TOKENS, messages_body
from runner.config import ConfigError, load_config
from suites.jsonl import prompt_of
from tests.helpers import fake_key, rows, run_args, write_config, write_dataset
from tests.mock_batch import MockBatchServer

FAST = "batch_poll_s = 0.05\nbatch_idle_s = 0.05\nretry_initial_s = 0.01\nretry_max_s = 0.05\n"
API = "batch_api = true\n"
"""The mock on 127.0.0.1 implements OpenAI's batch API: said in the config, as for a proxy (by host, only
api.openai.com and api.anthropic.com endpoints have one)."""


@pytest.fixture
def mock():
    srv = MockBatchServer(delay_s=0.2).start()
    yield srv
    srv.stop()


def anthropic_config(path: Path, base: str, models: list[str], extra_endpoint: str = "") -> Path:
    text = f'[[endpoints]]\nname = "claude"\nkind = "anthropic"\nbase_url = "{base}"\n{extra_endpoint}\n'
    for m in models:
        text += f'[[models]]\nname = "{m}"\nendpoint = "claude"\nprice_in = 1.0\nprice_out = 2.0\n'
    path.write_text(text)
    return path


def _run(tmp: Path, cfg: Path, models: str, data: Path, out: str, *extra: str) -> tuple[int, Path]:
    d = tmp / out
    code = main(run_args(data, models, cfg, str(d), "--cache-dir", str(tmp / f"cache-{out}"), *extra))
    return code, d


def _scores(run_dir: Path) -> dict:
    assert main(["score", str(run_dir)]) == 0
    return json.loads((run_dir / "scores.json").read_text())["models"]


def _by_key(run_dir: Path) -> dict[tuple[str, str, int], dict]:
    return {(r["model"], r["item"], r["sample"]): r for r in rows(run_dir)}


def test_openai_batches_score_like_live_at_half_price(tmp_path: Path, mock: MockBatchServer):
    data = write_dataset(tmp_path / "d.jsonl", 12)
    live_cfg = write_config(tmp_path / "live.toml", mock.base_url, ["ok-a", "ok-b"])
    code, live = _run(tmp_path, live_cfg, "ok-a,ok-b", data, "live", "--samples", "3", "--temperature", "0.7")
    assert code == 0 and mock.total == 24 and not mock.batches  # n=3 in one live call per item
    cfg = write_config(tmp_path / "b.toml", mock.base_url, ["ok-a", "ok-b"], extra_endpoint=FAST + API)
    code, run = _run(
        tmp_path, cfg, "ok-a,ok-b", data, "batch", "--samples", "3", "--temperature", "0.7", "--batch", "on"
    )
    assert code == 0
    assert mock.total == 24  # no live call in batch mode
    assert len(mock.uploads) == 2 and all(len(u["models"]) == 1 for u in mock.uploads)  # a model per file
    assert [u["lines"] for u in mock.uploads] == [12, 12]  # the 3 samples of an item: one request with n=3
    assert set(mock.submissions.values()) == {1}
    b, lv = _by_key(run), _by_key(live)
    assert b.keys() == lv.keys() and len(b) == 72
    for k, r in b.items():
        assert r["error"] is None and r["batch_id"] in mock.batches and r["text"] == lv[k]["text"]
        assert r["usage"] == lv[k]["usage"] and r["key"] == lv[k]["key"]
        assert r["cost_usd"] == pytest.approx(0.5 * lv[k]["cost_usd"])
    assert _scores(run) == _scores(live)
    man = json.loads((run / "manifest.json").read_text())
    assert man["batch"] == {"ok-a": "--batch on", "ok-b": "--batch on"}
    assert man["counts"]["ok-a"]["cost_usd"] == pytest.approx(
        0.5 * sum(r["cost_usd"] for k, r in lv.items() if k[0] == "ok-a")
    )


def test_anthropic_batches_score_like_live_with_configured_discount(tmp_path: Path, mock: MockBatchServer):
    base = f"http://127.0.0.1:{mock.port}"
    data = write_dataset(tmp_path / "d.jsonl", 10)
    code, live = _run(
        tmp_path, anthropic_config(tmp_path / "l.toml", base, ["claude-x"]), "claude-x", data, "live"
    )
    assert code == 0 and mock.total == 10 and not mock.batches
    # max_concurrency 2 would give a live window of 4 items: batch streams hold many more in flight
    extra = FAST + "batch = true\nbatch_discount = 0.25\nmax_concurrency = 2\n"
    code, run = _run(
        tmp_path, anthropic_config(tmp_path / "b.toml", base, ["claude-x"], extra), "claude-x", data, "batch"
    )
    assert code == 0 and mock.total == 10 and [u["lines"] for u in mock.uploads] == [10]
    assert [b["kind"] for b in mock.batches.values()] == ["anthropic"]
    assert set(mock.submissions.values()) == {1}
    b, lv = _by_key(run), _by_key(live)
    assert b.keys() == lv.keys() and len(b) == 10
    for k, r in b.items():  # results came back shuffled; each still lands on its own item
        assert r["text"] == lv[k]["text"] and r["batch_id"].startswith("msgbatch_")
        assert r["cost_usd"] == pytest.approx(0.75 * lv[k]["cost_usd"])
    assert _scores(run) == _scores(live)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_failed_items_inside_a_batch_go_live_once(tmp_path: Path, mock: MockBatchServer, kind: str):
    fates = {1: "expired", 2: "errored", 4: "canceled", 7: "expired"}
    mock.outcome = lambda p: next((f for i, f in fates.items() if p.startswith(f"Question {i}:")), "ok")
    data = write_dataset(tmp_path / "d.jsonl", 9)
    prompts = {d["id"]: prompt_of(d) for d in map(orjson.loads, data.read_bytes().splitlines())}
    if kind == "openai":
        cfg = write_config(
            tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=FAST + "batch = true\n"
        )
    else:
        cfg = anthropic_config(
            tmp_path / "c.toml", f"http://127.0.0.1:{mock.port}", ["ok-a"], FAST + "batch = true\n"
        )
    code, run = _run(tmp_path, cfg, "ok-a", data, "run")
    assert code == 0
    rs = rows(run)
    assert len(rs) == 9 and all(r["error"] is None and r["text"] for r in rs)
    for r in rs:
        i = int(r["item"][1:])
        if i in fates:  # failed in the batch: answered by exactly one live call
            assert "batch_id" not in r and r["batch_fallback"] and mock.prompts[prompts[r["item"]]] == 1
        else:
            assert r["batch_id"] and "batch_fallback" not in r and mock.prompts[prompts[r["item"]]] == 0
    assert mock.total == len(fates) and set(mock.submissions.values()) == {1}
    journal = [orjson.loads(x) for x in (run / "batches.jsonl").read_bytes().splitlines()]
    assert [e["ev"] for e in journal][:2] == ["submit", "created"] and journal[-1]["ev"] == "ended"
    assert len(journal[-1]["failed"]) == len(fates)


def test_files_split_at_request_count_and_size_limits(tmp_path: Path, mock: MockBatchServer):
    data = write_dataset(tmp_path / "d.jsonl", 10)
    cfg = write_config(
        tmp_path / "c.toml", mock.base_url, ["ok-a", "ok-b"], extra_endpoint=FAST + API + "batch_max_requests = 4\n"
    )
    code, run = _run(tmp_path, cfg, "ok-a,ok-b", data, "count", "--batch", "auto", "--prefer", "cost")
    assert code == 0 and len(rows(run)) == 20 and mock.total == 0
    assert json.loads((run / "manifest.json").read_text())["batch"]["ok-a"] == "--batch auto --prefer cost"
    per_model = Counter()
    for u in mock.uploads:
        assert len(u["models"]) == 1 and u["lines"] <= 4
        per_model[next(iter(u["models"]))] += u["lines"]
    assert per_model == {"ok-a": 10, "ok-b": 10} and len(mock.uploads) == 6  # 4 + 4 + 2 per model
    assert set(mock.submissions.values()) == {1} and len(mock.submissions) == 20

    mock.uploads.clear()
    limit = 1500
    cfg = write_config(
        tmp_path / "s.toml",
        mock.base_url,
        ["ok-c"],
        extra_endpoint=FAST + API + f"rpm = 60\nbatch_max_bytes = {limit}\n",
    )
    code, run = _run(tmp_path, cfg, "ok-c", data, "size", "--batch", "auto", "--deadline", "5s")
    assert code == 0 and len(rows(run)) == 10  # 10 calls at 60 RPM: ~10 s live, over the 5 s deadline
    assert "> deadline 5s" in json.loads((run / "manifest.json").read_text())["batch"]["ok-c"]
    sizes = [u["bytes"] for u in mock.uploads]
    assert all(s <= limit for s in sizes) and len(sizes) >= 3 and sum(u["lines"] for u in mock.uploads) == 10
    assert max(sizes) > limit - 400  # files are filled up to the limit, not split needlessly


def test_critique_pass_is_a_second_batch_round(tmp_path: Path, mock: MockBatchServer):
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=FAST + "batch = true\n")
    out = tmp_path / "jee"
    code = main(
        [
            "run",
            "jeebench",
            "--variant",
            "cot-critique",
            "--limit",
            "4",
            "--models",
            "ok-a",
            "--config",
            str(cfg),
            "--out",
            str(out),
            "--no-live",
        ]
    )
    assert code == 0
    rs = rows(out)
    assert Counter(r["pass"] for r in rs) == {"answer": 4, "critique": 4} and all(r["batch_id"] for r in rs)
    first = {r["batch_id"] for r in rs if r["pass"] == "answer"}
    second = {r["batch_id"] for r in rs if r["pass"] == "critique"}
    assert len(first) == 1 and len(second) == 1 and first != second and mock.total == 0
    journal = [orjson.loads(x) for x in (out / "batches.jsonl").read_bytes().splitlines()]
    evs = [(e["ev"], e["local"]) for e in journal if e["ev"] in ("submit", "ended")]
    assert [e for e, _ in evs] == ["submit", "ended", "submit", "ended"]  # round 2 after round 1's answers


def test_endpoint_without_batch_api_goes_live(tmp_path: Path, mock: MockBatchServer):
    mock.no_batch_api = True
    data = write_dataset(tmp_path / "d.jsonl", 6)
    cfg = write_config(
        tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=FAST + API + "batch_max_requests = 2\n"
    )
    code, run = _run(tmp_path, cfg, "ok-a", data, "run", "--batch", "on")
    assert code == 0 and len(rows(run)) == 6 and all(r["error"] is None for r in rows(run))
    assert mock.total == 6 and not mock.batches
    assert "no batch API" in (run / "log.txt").read_text()


def test_refused_create_is_retried_and_lost_id_is_found_not_resubmitted(
    tmp_path: Path, mock: MockBatchServer
):
    mock.fail_creates = 1  # HTTP 500 once: the create is retried
    data = write_dataset(tmp_path / "d.jsonl", 5)
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=FAST + "batch = true\n")
    code, run = _run(tmp_path, cfg, "ok-a", data, "run", "--no-cache")
    assert code == 0 and len(mock.batches) == 1 and set(mock.submissions.values()) == {1}
    # A crash right after the create, before its id reached the journal: drop every event but the
    # submission (and the rows), then resume. The batch is found by its tag, not sent again.
    journal = run / "batches.jsonl"
    journal.write_bytes(journal.read_bytes().splitlines(keepends=True)[0])
    (run / "results.jsonl").unlink()
    code, run = _run(tmp_path, cfg, "ok-a", data, "run", "--no-cache")
    (bid,) = mock.batches
    assert code == 0 and len(rows(run)) == 5 and all(r["batch_id"] == bid for r in rows(run))
    assert len(mock.batches) == 1 and set(mock.submissions.values()) == {1} and mock.total == 0


def test_dry_run_shows_live_and_batch_cost_and_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 600)
    cfg = write_config(tmp_path / "c.toml", "http://127.0.0.1:9/v1", ["slow"], extra_endpoint=API + "rpm = 60\n")
    args = ["run", f"jsonl:{data}", "--models", "slow", "--config", str(cfg), "--dry-run", "--batch", "auto"]
    args.append("--keep-going")  # a placeholder URL: no server there
    assert main([*args, "--deadline", "5m"]) == 0
    text = capsys.readouterr().out
    assert "10m" in text and "~1h typical" in text and "batch" in text.split("slow")[-1]
    # 600 calls x (~13 in + 1024 out tokens) at $1/$2 per M: live ~$1.24, batch half of it
    assert "$1.24" in text and "$0.62" in text
    assert main([*args, "--deadline", "8h"]) == 0
    assert "live" in capsys.readouterr().out.split("slow")[-1].split("\n")[0]


def test_auto_stays_live_within_the_deadline(tmp_path: Path, mock: MockBatchServer):
    data = write_dataset(tmp_path / "d.jsonl", 4)
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=FAST + API)
    code, run = _run(tmp_path, cfg, "ok-a", data, "run", "--batch", "auto")
    assert code == 0 and mock.total == 4 and not mock.batches and not (run / "batches.jsonl").exists()


def test_key_is_sent_to_the_batch_api_and_never_written(tmp_path: Path, mock: MockBatchServer):
    key = fake_key("sentinel-" + secrets.token_hex(16))
    os.environ["BATCH_SENTINEL_KEY"] = key
    try:
        data = write_dataset(tmp_path / "d.jsonl", 4)
        mock.outcome = lambda p: "expired" if p.startswith("Question 0:") else "ok"
        cfg = write_config(
            tmp_path / "c.toml",
            mock.base_url,
            ["ok-a"],
            key_env="BATCH_SENTINEL_KEY",
            extra_endpoint=FAST + "batch = true\n",
        )
        code, run = _run(tmp_path, cfg, "ok-a", data, "run")
    finally:
        del os.environ["BATCH_SENTINEL_KEY"]
    assert code == 0 and mock.auth[key] >= 4 and mock.keys[key] == 1  # files, batch, status, content; 1 live
    for p in [*run.iterdir(), *(tmp_path / "cache-run").rglob("*")]:
        if p.is_file():
            assert key[-16:].encode() not in p.read_bytes(), p
    assert "batches: 1 ended" in (run / "log.txt").read_text()  # the progress line shows the batches


def test_anthropic_params_system_apart_images_as_base64_blocks(tmp_path: Path):
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 20
    img = tmp_path / "a.png"
    img.write_bytes(png)
    req = Request(
        suite="s",
        item="i",
        messages=[Message(role="system", content="Be brief."), user("Look:", img, "Which?")],
        decoding={"temperature": 0.3, "top_p": 0.9},
    )
    body = messages_body(req, "claude-x", {"stop_sequences": ["END"]})
    assert body["system"] == "Be brief." and body["model"] == "claude-x"
    assert body["max_tokens"] == FALLBACK_MAX_TOKENS  # unknown to litellm's map and to the config
    assert body["temperature"] == 0.3 and body["top_p"] == 0.9 and body["stop_sequences"] == ["END"]
    (msg,) = body["messages"]
    assert msg["role"] == "user" and [b["type"] for b in msg["content"]] == ["text", "image", "text"]
    src = msg["content"][1]["source"]
    assert src["type"] == "base64" and src["media_type"] == "image/png"
    assert src["data"] == ImagePart(data=png).data_url().split(",", 1)[1]


def test_batch_flags_and_config_are_validated(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[endpoints]]\nname = "s"\nkind = "sim"\nbatch = true\n')
    with pytest.raises(
        ConfigError, match=r"c\.toml:1: endpoints\[0\] \(name = 's'\): batch = true needs kind"
    ):
        load_config(cfg)
    assert _duration("8h") == 8 * 3600 and _duration("90m") == 5400 and _duration("2") == 7200
    data = write_dataset(tmp_path / "d.jsonl", 2)
    with pytest.raises(SystemExit) as e:
        main(["run", f"jsonl:{data}", "--models", "sim/weak", "--batch", "auto", "--deadline", "soon"])
    assert e.value.code == 2 and "not a duration: 'soon'" in capsys.readouterr().err


def _keyed_config(tmp: Path, mock: MockBatchServer, kind: str, key_envs: list[str], extra: str = "") -> Path:
    envs = ", ".join(f'"{e}"' for e in key_envs)
    base = mock.base_url if kind == "openai" else f"http://127.0.0.1:{mock.port}"
    path = tmp / f"{kind}.toml"
    path.write_text(
        f'[[endpoints]]\nname = "ep"\nkind = "{kind}"\nbase_url = "{base}"\napi_key_env = [{envs}]\n'
        f"{FAST}batch = true\nbatch_max_requests = 3\n{extra}\n"
        '[[models]]\nname = "ok-q"\nendpoint = "ep"\nprice_in = 1.0\nprice_out = 2.0\n'
    )
    return path


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_batch_key_out_of_quota_gives_quota_rows_at_once(
    tmp_path: Path, mock: MockBatchServer, kind: str, monkeypatch: pytest.MonkeyPatch
):
    """OpenAI's 429 insufficient_quota / Anthropic's "credit balance is too low" on the submission:
    the lane stops, no retry, no live call on that key; every call gets an "out of quota" row."""
    monkeypatch.setenv("BQ_KEY", "dry-batch-key")
    data = write_dataset(tmp_path / "d.jsonl", 7)
    code, run = _run(tmp_path, _keyed_config(tmp_path, mock, kind, ["BQ_KEY"]), "ok-q", data, "run")
    rs = rows(run)
    assert code == 3 and len(rs) == 7 and all(r["error"] for r in rs)
    assert all("out of quota" in r["error"] and "dry-batch-key" not in r["error"] for r in rs)
    assert {r["error_kind"] for r in rs} <= {"quota", "skipped"} and "quota" in {r["error_kind"] for r in rs}
    assert not mock.batches and mock.total == 0  # nothing created, nothing sent live
    assert mock.auth["dry-batch-key"] <= 3  # one refusal per batch file at most: never retried


def test_batch_refused_for_quota_moves_to_the_models_next_key(
    tmp_path: Path, mock: MockBatchServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("BQ_DRY", "dry-batch-key")
    monkeypatch.setenv("BQ_GOOD", "good-batch-key")
    data = write_dataset(tmp_path / "d.jsonl", 7)
    code, run = _run(tmp_path, _keyed_config(tmp_path, mock, "openai", ["BQ_DRY", "BQ_GOOD"]), "ok-q", data, "run")
    rs = rows(run)
    assert code == 0 and len(rs) == 7 and all(r["error"] is None and r["batch_id"] for r in rs)
    assert {r["lane"] for r in rs} == {"ep/BQ_GOOD"} and mock.total == 0  # still batched, at the discount
    assert set(mock.submissions.values()) == {1} and mock.auth["dry-batch-key"] <= 3
    lanes = orjson.loads((run / "manifest.json").read_bytes())["lanes"]["ok-q"]
    assert "out of quota" in next(ln for ln in lanes if ln["lane"] == "ep/BQ_DRY")["stopped"]


def test_batch_polled_out_of_quota_stops_the_lane_not_retried_for_hours(
    tmp_path: Path, mock: MockBatchServer, monkeypatch: pytest.MonkeyPatch
):
    mock.quota_polls = True  # the credit ran out while the batch was in flight
    monkeypatch.setenv("BQ_KEY", "poll-key")
    data = write_dataset(tmp_path / "d.jsonl", 3)
    code, run = _run(tmp_path, _keyed_config(tmp_path, mock, "openai", ["BQ_KEY"]), "ok-q", data, "run")
    rs = rows(run)
    assert code == 3 and len(rs) == 3 and len(mock.batches) == 1 and mock.total == 0
    assert all(r["error_kind"] in ("quota", "skipped") and "out of quota" in r["error"] for r in rs)
