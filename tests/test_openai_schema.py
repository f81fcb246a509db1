"""Every body the openai provider puts on the wire is valid for the official API: validated against
`CreateChatCompletionRequest` of OpenAI's published OpenAPI description (vendored, MIT, in
tests/data/openai_openapi/ with the commit it came from)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import jsonschema
import orjson
import pytest

from core.types import Decoding, ImagePart, Message, Request, TextPart
from providers.openai import OpenAIProvider
from runner.config import ModelCfg
from tests.mock_openai import MockServer

SCHEMA = orjson.loads((Path(__file__).parent / "data/openai_openapi/chat_request.schema.json").read_bytes())
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _validator() -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(SCHEMA)
    cls.check_schema(SCHEMA)
    return cls(SCHEMA)


def _req(messages: list[Message], **dec) -> Request:
    return Request(suite="t", item="1", messages=messages, decoding=Decoding(**dec))


TEXT = [Message(role="system", content="Be brief."), Message(role="user", content="What is 2+2?")]
IMAGES = [
    Message(
        role="user",
        content=[
            TextPart(text="Which figure comes next?"),
            ImagePart(data=PNG, mime="image/png"),
            ImagePart(data=PNG, mime="image/png", detail="high"),
        ],
    )
]
CASES = {
    "text": (_req(TEXT, max_tokens=64), 1, {}),
    "text, every decoding field": (_req(TEXT, temperature=0.7, max_tokens=64, top_p=0.9, seed=3), 1, {}),
    "images": (_req(IMAGES, max_tokens=32), 1, {}),
    "n": (_req(TEXT, temperature=0.7), 8, {}),
    "params": (_req(TEXT), 1, {"reasoning_effort": "high", "max_completion_tokens": 500}),
    "omit": (_req(TEXT), 1, ModelCfg(name="o", omit=["temperature"]).params),
    "assistant turn": (_req([*TEXT, Message(role="assistant", content="4"), TEXT[1]]), 1, {}),
}


@pytest.fixture(scope="module")
def srv():
    s = MockServer().start()
    yield s
    s.stop()


@pytest.mark.parametrize("case", list(CASES))
def test_wire_bodies_are_valid_requests(case: str, srv: MockServer):
    req, n, params = CASES[case]
    prov = OpenAIProvider(srv.base_url)

    async def send() -> None:
        await prov.complete(req, "gpt-4o-mini", n, 0, "sk-test", params)
        await prov.close()

    asyncio.run(send())
    body = srv.last_body["gpt-4o-mini"]  # what really went over the wire
    errors = sorted(_validator().iter_errors(body), key=str)
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    if case == "omit":
        assert "temperature" not in body
    if case == "n":
        assert body["n"] == 8


@pytest.mark.parametrize(
    "bad",
    [
        {"model": "m", "messages": []},
        {"model": "m", "messages": [{"role": "robot", "content": "hi"}]},
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": "8"},
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "image", "url": "x"}]}]},
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 3},
    ],
)
def test_the_schema_catches_invalid_bodies(bad: dict):
    assert list(_validator().iter_errors(bad))  # the check above can fail
