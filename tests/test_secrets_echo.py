"""Issue 31.6: a key echoed back in any spelling (JSON-escaped, every character `\\uXXXX`, URL-encoded,
base64, a bytes repr), in a non-JSON 200 or inside an answer's text, leaves none of its characters in
results.jsonl, scored.jsonl, the report, log.txt, the cache or the terminal; URLs with secrets in query
parameters (`sslpassword`, `access_key`, `X-Amz-Signature`...) are printed redacted everywhere."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from core.secrets import redact_url, scrub
from tests.echoes import echo_all, leaked, spellings
from tests.helpers import cli, rows, write_config
from tests.mock_openai import MockServer

KEY = "sk-proj/Zq+9é-" + "Ab3dE6gH9jK2mN5pQ8sT1v"  # 36 characters: "/", "+" and a non-ASCII one
FAST = "retry_initial_s = 0.01\nretry_max_s = 0.05\nmax_attempts = 2\ntimeout_s = 5\n"


@pytest.mark.parametrize("name", list(spellings(KEY)))
def test_every_spelling_is_scrubbed_whole_or_cut(name: str):
    s = spellings(KEY)[name]
    assert leaked(scrub(f"<p>{s}</p>", KEY), KEY) == []
    cut = f"key: {s}"[: 5 + len(s) * 2 // 3]  # an echo cut short by someone's snippet
    assert leaked(scrub(cut, KEY), KEY, run=12) == []


def test_a_key_echoed_in_every_spelling_leaves_nothing_on_disk(tmp_path: Path):
    srv = MockServer(retry_after=0.05).start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], key_env="ECHO31_KEY", extra_endpoint=FAST)
        data = tmp_path / "d.jsonl"
        prompts = ["Proxy page [[fault:echo_spellings*]]", "Echo in text [[fault:echo_spellings_text]]", "Plain"]
        data.write_bytes(b"".join(
            orjson.dumps({"id": f"q{i}", "prompt": p, "choices": list("wxyz"), "answer": "A"}) + b"\n"
            for i, p in enumerate(prompts)))
        cache = tmp_path / "cache"
        env = {**os.environ, "ECHO31_KEY": KEY, "EVALSWEEP_CACHE_DIR": str(cache)}
        out = tmp_path / "run"
        r = cli("run", f"jsonl:{data}", "--models", "ok-a", "--config", str(cfg), "--out", str(out), "--no-live",
                env=env)
        rep = cli("report", str(out), "--out", str(tmp_path / "report"), env=env)
    finally:
        srv.stop()
    assert srv.keys[KEY] >= 4  # the key really went out, and came back in every spelling
    assert r.returncode == 3, r.stderr
    assert rep.returncode == 0, rep.stderr
    files = [p for root in (out, cache, tmp_path / "report") for p in root.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"results.jsonl", "scored.jsonl", "log.txt"} <= names, names
    for p in files:
        assert leaked(p.read_bytes().decode("utf-8", "replace"), KEY) == [], p
    for text in (r.stdout, r.stderr, rep.stdout, rep.stderr):
        assert leaked(text, KEY) == []
    got = {x["item"]: x for x in rows(out)}
    assert "malformed response body" in got["q0"]["error"] and "[redacted]" in got["q0"]["error"]
    assert got["q1"]["error"] is None and got["q1"]["text"].count("[redacted]") == len(spellings(KEY))
    assert "step by step" in got["q1"]["text"]  # the answer itself survives the scrubbing


def test_secret_query_parameters_are_redacted():
    url = ("https://h.example/v1?access_key=AK1&private_token=PT2&session_token=ST3&X-Amz-Signature=SG4"
           "&X-Amz-Credential=CR5&subscription-key=SK6&client_secret=CS7&sslpassword=PW8&api-version=2024-06-01")
    red = redact_url(url)
    assert not any(v in red for v in ("AK1", "PT2", "ST3", "SG4", "CR5", "SK6", "CS7", "PW8")), red
    assert "api-version=2024-06-01" in red and "access_key=***" in red


def test_echo_all_really_holds_the_key():  # the fixture itself: every spelling differs and is present
    text = echo_all(KEY)
    assert len(set(spellings(KEY).values())) == len(spellings(KEY)) and KEY in text
    assert len(leaked(text, KEY)) > 100


def test_sslpassword_in_cache_url_is_never_printed(tmp_path: Path):
    from tests.helpers import closed_port, write_dataset

    url = f"postgresql://ev@127.0.0.1:{closed_port()}/ev?sslmode=require&sslpassword=HunterSecret99&connect_timeout=2"
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[shared]\ncache_url = "{url}"\n')
    data = write_dataset(tmp_path / "d.jsonl", 2)
    env = {**os.environ, "EVALSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    base = ["run", f"jsonl:{data}", "--models", "sim/strong", "--config", str(cfg), "--no-live", "--no-score"]
    run = cli(*base, "--out", str(tmp_path / "run"), env=env)
    join = cli(*base, "--out", str(tmp_path / "join"), "--join", env=env)
    stats = cli("cache", "stats", "--config", str(cfg), env=env)
    assert run.returncode == 0 and join.returncode == 2 and "--join" in join.stderr
    assert "sslpassword=***" in run.stderr + join.stderr
    texts = [run.stderr, run.stdout, join.stderr, stats.stdout, stats.stderr]
    texts += [p.read_text() for p in (tmp_path / "run").iterdir() if p.is_file()]
    assert not [t for t in texts if "HunterSecret99" in t]
