"""Mock batch servers on 127.0.0.1: OpenAI's Batch API (files + batches) and Anthropic's Message
Batches, beside the live OpenAI chat endpoint of `MockServer` and a live Anthropic `/v1/messages`.

Answers are those of the live mock (`answer_text`), so a batch sweep must score exactly like a live
one. Configurable: `delay_s` (processing time of a batch), `outcome(prompt)` -> ok | expired |
errored | canceled per request, shuffled (out-of-order) result files, `fail_creates` (next N batch
creations answer HTTP 500) and `no_batch_api` (404 on /files, as a plain vLLM server would). A key
containing `dry` is out of credit on every call (OpenAI: HTTP 429 `insufficient_quota`;
Anthropic: HTTP 400 "credit balance is too low"), and `quota_polls` makes status checks answer so
(credit ran out while a batch was in flight).
It counts every submission of every custom_id, the files it was sent (lines, bytes, models) and live
calls per prompt (`prompts`, `_seen`), so tests can prove nothing was sent twice or lost.
OpenAI batches take `/v1/chat/completions` or `/v1/responses` lines (every line's `url` the batch's
`endpoint`, as OpenAI requires); a live `/v1/responses` answers like the batch's Responses lines.
A request offered `tools` is answered as the live mocks answer it (tool_completion, tool_message), live and
in a batch alike: a cot-tools chain runs the same either way.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from tests.mock_openai import (
    _QUOTA,
    MockServer,
    _last_user_text,
    answer_text,
    chat_completion,
    tool_completion,
    tool_message,
)

_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


CHAT, RESPONSES = "/v1/chat/completions", "/v1/responses"


def response_object(model: str, prompt: str) -> dict[str, Any]:
    """A Responses API answer (https://platform.openai.com/docs/api-reference/responses/object)."""
    text = answer_text(model, prompt, 0)
    return {
        "id": "resp_mock", "object": "response", "model": model, "status": "completed",
        "output": [{"type": "reasoning", "id": "rs_1", "summary": []},
                   {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": len(prompt) // 4 + 1, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 12, "output_tokens_details": {"reasoning_tokens": 4}, "total_tokens": 0},
    }


def tool_response(model: str, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Responses API function calling (https://platform.openai.com/docs/guides/function-calling?api-mode=responses):
    a `function_call` output item (call_id, name, arguments as a JSON string) until a `function_call_output`
    input item answers it, then an answer quoting its output. As OpenAI does, a chat-shaped tool (`function`
    nested) is a 400 "Missing required parameter: 'tools[0].name'", and with `store: false` an item sent
    back with its `id` is a 400 (https://github.com/continuedev/continue/issues/9101)."""
    def refuse(msg: str, param: str) -> tuple[dict[str, Any], int]:
        return {"error": {"message": msg, "type": "invalid_request_error", "param": param, "code": None}}, 400

    for k, t in enumerate(body["tools"]):
        if "name" not in t:
            return refuse(f"Missing required parameter: 'tools[{k}].name'.", f"tools[{k}].name")
    for it in body["input"]:
        if body.get("store") is False and it.get("type") in ("function_call", "reasoning") and it.get("id"):
            return refuse(f"Item with id '{it['id']}' not found. Items are not persisted when `store` is set to "
                          "false. Try again with `store` set to true, or remove this item from your input.", "input")
    done = [i for i in body["input"] if i.get("type") == "function_call_output"]
    if done:
        out: dict[str, Any] = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                               "content": [{"type": "output_text", "text": f"The answer is {done[-1]['output']}.",
                                            "annotations": []}]}
    else:
        out = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": body["tools"][0]["name"],
               "arguments": '{"a": 12.5, "b": 8}', "status": "completed"}
    return {"id": "resp_tools", "object": "response", "model": model, "status": "completed",
            "output": [{"type": "reasoning", "id": "rs_1", "summary": []}, out],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}, 200


def _prompt(url: str, body: dict[str, Any]) -> str:
    """The last user text of a chat or Responses body."""
    if url != RESPONSES:
        return _last_user_text(body["messages"])
    user = [i for i in body["input"] if i.get("role") == "user"][-1]
    return "".join(p.get("text", "") for p in user["content"] if p.get("type") == "input_text")


def _message(model: str, prompt: str) -> dict[str, Any]:
    return {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": answer_text(model, prompt, 0)}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": len(prompt) // 4 + 1, "output_tokens": 12},
    }


class MockBatchServer(MockServer):
    def __init__(
        self,
        *,
        delay_s: float = 0.3,
        outcome: Callable[[str], str] | None = None,
        shuffle: bool = True,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.delay_s = delay_s
        self.outcome = outcome or (lambda prompt: "ok")
        self.shuffle = shuffle
        self.fail_creates = 0
        self.no_batch_api = False
        self.quota_polls = False
        self.files: dict[str, bytes] = {}
        self.uploads: list[dict[str, Any]] = []  # per batch input: lines, bytes, models
        self.batches: dict[str, dict[str, Any]] = {}
        self.submissions: Counter[str] = Counter()  # custom_id -> times submitted in a batch
        self.auth: Counter[str] = Counter()  # keys seen on batch calls
        self.max_tokens: dict[str, int] = {}  # model -> the max_tokens of its last live Messages call
        self._n = 0

    def app(self) -> web.Application:
        app = super().app()
        r = app.router
        r.add_post("/v1/files", self.upload)
        r.add_get("/v1/files/{fid}/content", self.content)
        r.add_post("/v1/batches", self.create_openai)
        r.add_get("/v1/batches", self.list_openai)
        r.add_get("/v1/batches/{bid}", self.get_openai)
        r.add_post("/v1/messages", self.live_anthropic)
        r.add_post("/v1/responses", self.live_responses)
        r.add_post("/v1/messages/batches", self.create_anthropic)
        r.add_get("/v1/messages/batches/{bid}", self.get_anthropic)
        r.add_get("/v1/messages/batches/{bid}/results", self.results_anthropic)
        return app

    def _id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n:04d}"

    def _key(self, request: web.Request) -> str:
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        key = request.headers.get("x-api-key") or bearer
        self.auth[key] += 1
        return key

    def _no_credit(self, request: web.Request, poll: bool = False) -> web.Response | None:
        if "dry" not in self._key(request) and not (poll and self.quota_polls):
            return None
        if request.path.startswith("/v1/messages"):
            msg = "Your credit balance is too low to access the Anthropic API."
            return web.json_response(
                {"type": "error", "error": {"type": "invalid_request_error", "message": msg}}, status=400
            )
        return web.json_response(_QUOTA, status=429)

    @property
    def live_total(self) -> int:
        return self.total

    # --- OpenAI ---------------------------------------------------------------------------------

    async def upload(self, request: web.Request) -> web.Response:
        if (refused := self._no_credit(request)) is not None:
            return refused
        if self.no_batch_api:
            return web.json_response({"error": {"message": "Not Found"}}, status=404)
        form = await request.post()
        assert form.get("purpose") == "batch", form.get("purpose")
        data = form["file"].file.read()  # type: ignore[union-attr]
        fid = self._id("file-")
        self.files[fid] = data
        return web.json_response({"id": fid, "object": "file", "bytes": len(data), "purpose": "batch"})

    async def content(self, request: web.Request) -> web.Response:
        self._key(request)
        return web.Response(body=self.files[request.match_info["fid"]], content_type="application/jsonl")

    async def create_openai(self, request: web.Request) -> web.Response:
        if (refused := self._no_credit(request)) is not None:
            return refused
        body = await request.json()
        if self.fail_creates > 0:
            self.fail_creates -= 1
            return web.json_response({"error": {"message": "try again"}}, status=500)
        url = body["endpoint"]
        assert url in (CHAT, RESPONSES) and body["completion_window"] == "24h", body
        data = self.files[body["input_file_id"]]
        reqs = []
        for line in data.splitlines():
            d = orjson.loads(line)
            assert d["method"] == "POST", d
            if d["url"] != url:  # OpenAI: every request of a batch goes to the batch's endpoint
                msg = f"The URL provided for this request does not match the batch endpoint {url}"
                return web.json_response({"error": {"message": msg}}, status=400)
            if url == RESPONSES:
                assert "n" not in d["body"] and "messages" not in d["body"] and "max_tokens" not in d["body"], d
            reqs.append((d["custom_id"], d["body"]))
        ids = [c for c, _ in reqs]
        if len(set(ids)) != len(ids):
            return web.json_response({"error": {"message": "duplicate custom_id"}}, status=400)
        models = {b["model"] for _, b in reqs}
        self.uploads.append({"lines": len(reqs), "bytes": len(data), "models": models, "ids": ids})
        for c in ids:
            self.submissions[c] += 1
        bid = self._id("batch_")
        self.batches[bid] = {
            "kind": "openai",
            "url": url,
            "t": time.monotonic(),
            "reqs": reqs,
            "metadata": body.get("metadata") or {},
            "files": None,
        }
        return web.json_response(self._openai_view(bid))

    def _openai_view(self, bid: str) -> dict[str, Any]:
        b = self.batches[bid]
        n = len(b["reqs"])
        view = {
            "id": bid,
            "object": "batch",
            "endpoint": b["url"],
            "completion_window": "24h",
            "metadata": b["metadata"],
            "output_file_id": None,
            "error_file_id": None,
            "request_counts": {"total": n, "completed": 0, "failed": 0},
            "status": "in_progress",
        }
        if time.monotonic() - b["t"] < self.delay_s:
            return view
        if b["files"] is None:
            ok, bad = [], []
            for cid, body in b["reqs"]:
                prompt = _prompt(b["url"], body)
                fate = self.outcome(prompt)
                if fate == "ok":
                    answer = (
                        response_object(body["model"], prompt)
                        if b["url"] == RESPONSES
                        else tool_completion(body["model"], body)  # offered tools: the live mock's answer
                        if body.get("tools")
                        else chat_completion(body["model"], prompt, int(body.get("n", 1)))
                    )
                    resp = {"status_code": 200, "request_id": "r", "body": answer}
                    ok.append({"id": "batch_req", "custom_id": cid, "response": resp, "error": None})
                elif fate == "errored":
                    resp = {
                        "status_code": 500,
                        "request_id": "r",
                        "body": {"error": {"message": "server had an error", "type": "server_error"}},
                    }
                    bad.append({"id": "batch_req", "custom_id": cid, "response": resp, "error": None})
                else:
                    err = {"code": "batch_expired", "message": "not executed before the window expired"}
                    bad.append({"id": "batch_req", "custom_id": cid, "response": None, "error": err})
            b["expired"] = any(
                self.outcome(_prompt(b["url"], body)) not in ("ok", "errored")
                for _, body in b["reqs"]
            )
            b["files"] = (self._store(ok), self._store(bad))
            b["counts"] = {"total": n, "completed": len(ok), "failed": len(bad)}
        view.update(
            status="expired" if b["expired"] else "completed",
            request_counts=b["counts"],
            output_file_id=b["files"][0],
            error_file_id=b["files"][1],
        )
        return view

    def _store(self, lines: list[dict[str, Any]]) -> str | None:
        if not lines:
            return None
        if self.shuffle:
            random.Random(len(lines)).shuffle(lines)
        fid = self._id("file-")
        self.files[fid] = b"".join(orjson.dumps(x) + b"\n" for x in lines)
        return fid

    async def get_openai(self, request: web.Request) -> web.Response:
        if (refused := self._no_credit(request, poll=True)) is not None:
            return refused
        bid = request.match_info["bid"]
        if bid not in self.batches:
            return web.json_response({"error": {"message": "No such batch"}}, status=404)
        return web.json_response(self._openai_view(bid))

    async def list_openai(self, request: web.Request) -> web.Response:
        self._key(request)
        data = [self._openai_view(b) for b, v in self.batches.items() if v["kind"] == "openai"]
        return web.json_response({"object": "list", "data": data[::-1]})

    # --- Anthropic --------------------------------------------------------------------------------

    async def live_anthropic(self, request: web.Request) -> web.Response:
        key = request.headers.get("x-api-key", "")
        if "dry" in key:
            return self._no_credit(request) or web.Response(status=500)
        assert request.headers.get("anthropic-version") == "2023-06-01"
        body = await request.json()
        prompt = _last_user_text(body["messages"])
        assert body["max_tokens"] > 0
        with self._lock:
            self.total += 1
            self.prompts[prompt] += 1
            self.per_model[body["model"]] += 1
            self.keys[key] += 1
            self._seen[(body["model"], prompt)] += 1
            self.max_tokens[body["model"]] = body["max_tokens"]
            seen = self._seen[(body["model"], prompt)]
        if self._fault(body["model"], prompt, seen) == "hang":  # `[[fault:hang*1]]`: past the client's timeout
            await asyncio.sleep(self.timeout_hang_s)
        if body.get("tools"):  # the live MessagesServer's answer (tests.mock_openai.tool_message)
            return web.json_response(tool_message(body["model"], body))
        return web.json_response(_message(body["model"], prompt))

    async def live_responses(self, request: web.Request) -> web.Response:
        """A live Responses call (a batch item's fallback), counted like a live chat call."""
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        body = await request.json()
        prompt = _prompt(RESPONSES, body)
        with self._lock:
            self.total += 1
            self.prompts[prompt] += 1
            self.per_model[body["model"]] += 1
            self.keys[key] += 1
            self._seen[(body["model"], prompt)] += 1
            self.last_body[body["model"]] = body
        if body.get("tools"):
            answer, status = tool_response(body["model"], body)
            return web.json_response(answer, status=status)
        return web.json_response(response_object(body["model"], prompt))

    async def create_anthropic(self, request: web.Request) -> web.Response:
        if (refused := self._no_credit(request)) is not None:
            return refused
        assert request.headers.get("anthropic-version") == "2023-06-01"
        body = await request.json()
        reqs = [(r["custom_id"], r["params"]) for r in body["requests"]]
        ids = [c for c, _ in reqs]
        if len(set(ids)) != len(ids) or not all(_CUSTOM_ID.match(c) for c in ids):
            return web.json_response({"type": "error", "error": {"message": "bad custom_id"}}, status=400)
        assert all(p["max_tokens"] > 0 and "n" not in p for _, p in reqs)
        self.uploads.append(
            {
                "lines": len(reqs),
                "bytes": request.content_length,
                "models": {p["model"] for _, p in reqs},
                "ids": ids,
            }
        )
        for c in ids:
            self.submissions[c] += 1
        bid = self._id("msgbatch_")
        self.batches[bid] = {"kind": "anthropic", "t": time.monotonic(), "reqs": reqs}
        return web.json_response(self._anthropic_view(bid, request))

    def _anthropic_view(self, bid: str, request: web.Request) -> dict[str, Any]:
        b = self.batches[bid]
        ended = time.monotonic() - b["t"] >= self.delay_s
        fates = Counter(self.outcome(_last_user_text(p["messages"])) for _, p in b["reqs"])
        counts = {
            "processing": 0 if ended else len(b["reqs"]),
            "succeeded": fates["ok"] if ended else 0,
            "errored": fates["errored"] if ended else 0,
            "canceled": fates["canceled"] if ended else 0,
            "expired": fates["expired"] if ended else 0,
        }
        base = f"http://{request.host}"
        return {
            "id": bid,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "results_url": f"{base}/v1/messages/batches/{bid}/results" if ended else None,
        }

    async def get_anthropic(self, request: web.Request) -> web.Response:
        if (refused := self._no_credit(request, poll=True)) is not None:
            return refused
        bid = request.match_info["bid"]
        if bid not in self.batches:
            return web.json_response({"type": "error", "error": {"message": "not found"}}, status=404)
        return web.json_response(self._anthropic_view(bid, request))

    async def results_anthropic(self, request: web.Request) -> web.Response:
        self._key(request)
        b = self.batches[request.match_info["bid"]]
        out = []
        for cid, p in b["reqs"]:
            prompt = _last_user_text(p["messages"])
            fate = self.outcome(prompt)
            if fate == "ok":
                msg = tool_message(p["model"], p) if p.get("tools") else _message(p["model"], prompt)
                res: dict[str, Any] = {"type": "succeeded", "message": msg}
            elif fate == "errored":
                res = {
                    "type": "errored",
                    "error": {"type": "error", "error": {"type": "api_error", "message": "Internal error"}},
                }
            else:
                res = {"type": fate}
            out.append({"custom_id": cid, "result": res})
        if self.shuffle:
            random.Random(len(out)).shuffle(out)
        return web.Response(
            body=b"".join(orjson.dumps(x) + b"\n" for x in out), content_type="application/jsonl"
        )
