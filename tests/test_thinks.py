"""A model that *can* reason but does not on this request (Claude without thinking: litellm's map says
`supports_reasoning`) answering "" cut by the limit is an empty answer, never `reasoning_exhausted`;
an o3 answering the same is. Against a real local server that answers every call that way."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import orjson
from aiohttp import web

from cli.main import main
from tests.helpers import run_args


class EmptyLengthServer:
    """/v1/chat/completions: no text, finish_reason "length", 50 output tokens."""

    def __init__(self) -> None:
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({
            "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 50, "total_tokens": 60},
        })

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": []})

    def start(self) -> EmptyLengthServer:
        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self._chat)
            app.router.add_get("/v1/models", self._models)
            self._runner = web.AppRunner(app)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            self._loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self._ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def test_exhausted_only_when_the_request_reasons(tmp_path: Path) -> None:
    srv = EmptyLengthServer().start()
    try:
        cfg = tmp_path / "c.toml"
        cfg.write_text(
            f'[[endpoints]]\nname = "proxy"\nkind = "openai"\nbase_url = "http://127.0.0.1:{srv.port}/v1"\n'
            '[[models]]\nname = "claude"\nendpoint = "proxy"\nmodel = "claude-sonnet-4-5"\n'
            '[[models]]\nname = "o3"\nendpoint = "proxy"\nmodel = "o3"\n'
        )
        data = tmp_path / "d.jsonl"
        data.write_bytes(orjson.dumps({"id": "q", "prompt": "2+2?", "choices": ["3", "4"], "answer": "B"}) + b"\n")
        main(run_args(data, "claude,o3", cfg, tmp_path / "run"))
    finally:
        srv.stop()
    rows = {r["model"]: r for r in map(orjson.loads, (tmp_path / "run" / "results.jsonl").read_bytes().splitlines())}
    assert rows["o3"]["error_kind"] == "reasoning_exhausted"
    assert rows["claude"].get("error_kind") != "reasoning_exhausted", rows["claude"]
