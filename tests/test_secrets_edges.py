"""Secrets where they hide: passwords and keys inside URLs (userinfo, query parameters, path segments),
keys echoed JSON- or URL-escaped by a server, and keys that no header can carry."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import orjson
from aiohttp import web

from core.secrets import redact_url, scrub
from runner.config import load_config
from tests.helpers import cli, fake_key, run_args, write_config, write_dataset
from tests.mock_openai import MockServer

KEY = "sk-test/ab+cd/é-0123456789xyz"  # "/" and a non-ASCII (latin-1) character: escaped differently by servers


def test_urls_lose_their_passwords_and_keys():
    assert redact_url("redis://:hunter2hunter2@redis.lab:6379/0") == "redis://:***@redis.lab:6379/0"
    assert redact_url("redis://redis.lab:6379/0?password=hunter2hunter2&db=1") == (
        "redis://redis.lab:6379/0?password=***&db=1")
    assert redact_url("postgresql://ev@pg.lab/ev?sslmode=require&password=hunter2") == (
        "postgresql://ev@pg.lab/ev?sslmode=require&password=***")
    assert redact_url("https://api.x.com/v1?api_key=K123&key=K456&token=T") == (
        "https://api.x.com/v1?api_key=***&key=***&token=***")
    assert redact_url(f"https://user:{fake_key('secret-1')}@h/v1") == "https://user:***@h/v1"
    assert redact_url(f"https://h/keys/{fake_key('secret-123456')}/v1", [fake_key("secret-123456")]) == "https://h/keys/***/v1"
    assert redact_url("https://h/v1?model=x") == "https://h/v1?model=x"


def test_echoes_escaped_by_json_or_urls_are_scrubbed():
    for echo in (json.dumps(KEY), json.dumps(KEY).replace("/", "\\/"), json.dumps(KEY, ensure_ascii=False)):
        out = scrub(f'{{"error": "bad key {echo[1:-1]} given"}}', KEY)
        assert "0123456789" not in out and "ab+cd" not in out, out
    from urllib.parse import quote

    assert "0123456789" not in scrub(f"GET /v1?key={quote(KEY, safe='')}", KEY)


def _echo_server() -> tuple[web.AppRunner, int, threading.Thread]:
    """A server answering 500 with the bearer key echoed inside a JSON body, escaped as PHP and others
    do (`\\/`, `\\u00e9`): the echo on disk would be another spelling of the key."""
    import asyncio

    async def handle(request: web.Request) -> web.Response:
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        body = json.dumps({"error": {"message": f"invalid request for key {key}"}}).replace("/", "\\/")
        return web.Response(status=500, text=body, content_type="application/json")

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"data": []})

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    return runner, port, t


def test_a_key_echoed_escaped_never_reaches_disk(tmp_path: Path):
    runner, port, _ = _echo_server()
    cfg = write_config(tmp_path / "c.toml", f"http://127.0.0.1:{port}/v1", ["echo"], key_env="ECHO_KEY",
                       extra_endpoint="max_attempts = 2\nretry_initial_s = 0.01\n")
    data = write_dataset(tmp_path / "d.jsonl", 3)
    env = {**os.environ, "ECHO_KEY": KEY, "EVALSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    r = cli(*run_args(data, "echo", cfg, tmp_path / "run"), env=env)
    assert r.returncode == 3, r.stderr
    spellings = {KEY, json.dumps(KEY)[1:-1], json.dumps(KEY)[1:-1].replace("/", "\\/"), "0123456789xyz", "ab+cd"}
    for p in [*(tmp_path / "run").rglob("*"), *(tmp_path / "cache").rglob("*")]:
        if p.is_file():
            data_ = p.read_bytes().decode("utf-8", "replace")
            assert not any(s in data_ for s in spellings), p
    assert not any(s in r.stderr + r.stdout for s in spellings)
    rows = [orjson.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_bytes().splitlines()]
    assert all("[redacted]" in x["error"] for x in rows)


def test_a_key_with_a_newline_is_refused_naming_its_variable(tmp_path: Path):
    srv = MockServer().start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], key_env="NL_KEY")
        data = write_dataset(tmp_path / "d.jsonl", 2)
        env = {**os.environ, "NL_KEY": fake_key("good-part") + "\n" + fake_key("pasted-twice")}
        r = cli(*run_args(data, "ok-a", cfg, tmp_path / "run"), env=env)
        assert r.returncode == 2 and "NL_KEY" in r.stderr and "a newline" in r.stderr
        assert fake_key("good-part") not in r.stderr and srv.total == 0
    finally:
        srv.stop()


def test_a_key_inside_base_url_is_kept_out_of_config_json_and_errors(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH_KEY", fake_key("path-key-0123456789"))
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[[endpoints]]\nname = "e"\nbase_url = "https://gw.example/keys/{fake_key("path-key-0123456789")}/v1?key=qk-0123456789"\n'
        'api_key_env = "PATH_KEY"\nheaders = { "x-api-key" = "hk-0123456789" }\n'
        '[[models]]\nname = "m"\nendpoint = "e"\n'
    )
    snap = orjson.dumps(load_config(cfg).snapshot(["m"])).decode()
    assert "0123456789" not in snap and "gw.example/keys/***/v1?key=***" in snap
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[[endpoints]]\nname = "e"\nbase_url = "ftp://user:{fake_key("ftp-secret-0123456789")}@h/v1"\n'
                   '[[models]]\nname = "m"\nendpoint = "e"\n')
    r = cli("models", "--config", str(bad))
    assert r.returncode == 2 and "not an http(s) URL" in r.stderr and "0123456789" not in r.stderr


def test_cache_commands_with_postgres_down_say_so_without_a_traceback(tmp_path: Path):
    cfg = tmp_path / "c.toml"
    url = f"postgresql://ev@/ev?host={tmp_path}/nowhere&password=hunter2hunter2"
    cfg.write_text(f'[shared]\ncache_url = "{url}"\n')
    for args in (["cache", "stats"], ["cache", "prune", "--all"]):
        r = cli(*args, "--config", str(cfg), "--cache-dir", str(tmp_path / "cache"))
        assert "Traceback" not in r.stderr and "unreachable" in r.stderr, r.stderr
        assert "hunter2" not in r.stderr + r.stdout


def test_a_config_cache_dir_that_is_a_file_is_a_clear_error(tmp_path: Path):
    f = tmp_path / "afile"
    f.write_text("x")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'cache_dir = "{f}/sub"\n')
    r = cli("models", "--config", str(cfg))
    assert r.returncode == 2 and "is a file, not a directory" in r.stderr and "Traceback" not in r.stderr
