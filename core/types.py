"""Requests and result rows: the plain data every stage passes along.

Suites build `Request` objects (validated once, at the suite edge). Inside the scheduler a request
travels as itself and results travel as plain dicts (`Row`), written with orjson: no per-call
validation or copies on the hot path.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

Row = dict[str, Any]
"""One line of results.jsonl: model, suite, item, sample, pass, key, text, usage, cost_usd, ..."""


@dataclass
class Completion:
    """One call's answer: one text per requested sample, usage summed over them."""

    texts: list[str | None]
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reasons: list[str | None] = field(default_factory=list)
    cost_usd: float | None = None
    """Set by providers that know their own cost (sim); else the runner prices the usage."""
    limits: dict[str, float] | None = None
    """The answer's x-ratelimit-* limits (providers.http.parse_limits), learned by the lane."""
    cached_input_tokens: int | None = None
    """Of input_tokens, read from the provider's prompt cache (billed at its cache-read price)."""
    cache_write_tokens: int | None = None
    """Of input_tokens, written to the prompt cache (Anthropic's cache_creation_input_tokens)."""
    reasoning_tokens: int | None = None
    """Of output_tokens, spent thinking (billed as output, never shown)."""
    reported_cost: float | None = None
    """USD the provider says the call cost (OpenRouter's usage.cost): wins over our pricing."""
    cut: str | None = None
    """A stream cut mid-answer: how (the provider's mid-stream error words, the timeout), for its row."""
    received_chars: int = 0
    """A cut stream's output received before the cut (characters): what it consumed, without usage."""
    tool_calls: list[list[dict[str, Any]] | None] = field(default_factory=list)
    """Per sample, the assistant's `tool_calls` as sent (plain dicts, arguments still a JSON string:
    a malformed one is the suite's to report, not a failed call); empty when none were asked for."""
    hedge: dict[str, Any] | None = None
    """A call sent twice (runner.budgets.hedge): which send answered and how long the cancelled one ran."""


class TextPart(BaseModel):
    model_config = ConfigDict(frozen=True)
    type: Literal["text"] = "text"
    text: str


class ImagePart(BaseModel):
    """An image from a file path or raw bytes; sent as a base64 data URL, keyed by its bytes' SHA-256."""

    model_config = ConfigDict(frozen=True)
    type: Literal["image"] = "image"
    path: str | None = None
    data: bytes | None = None
    mime: str | None = None
    detail: Literal["auto", "low", "high"] | None = None
    _memo: dict[str, str] = PrivateAttr(default_factory=dict)
    """sha256/data URL of in-memory bytes, computed once per part (n samples share one part)."""

    @model_validator(mode="after")
    def _one_source(self) -> ImagePart:
        if (self.path is None) == (self.data is None):
            raise ValueError("an image part needs exactly one of `path` or `data`")
        return self

    @classmethod
    def from_base64(cls, b64: str, mime: str | None = None, **kw: Any) -> ImagePart:
        if b64.startswith("data:"):
            head, _, b64 = b64.partition(",")
            mime = mime or head[5:].split(";")[0]
        return cls(data=base64.b64decode(b64), mime=mime, **kw)

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        return _read_file(self.path)  # type: ignore[arg-type]

    def sha256(self) -> str:
        if self.data is not None:
            h = self._memo.get("sha256")
            if h is None:
                h = self._memo["sha256"] = hashlib.sha256(self.data).hexdigest()
            return h
        return _file_sha256(self.path, *_stat(self.path))  # type: ignore[arg-type]

    def media_type(self) -> str:
        if self.mime:
            return self.mime
        return _sniff_mime(self.read()[:16])

    def data_url(self) -> str:
        if self.path is not None:
            return _file_data_url(self.path, *_stat(self.path), self.mime)
        url = self._memo.get("url")
        if url is None:
            url = self._memo["url"] = (
                f"data:{self.media_type()};base64,{base64.b64encode(self.read()).decode()}"
            )
        return url


Part = TextPart | ImagePart


class Message(BaseModel):
    """One chat turn. `tool_calls` (an assistant's, as the OpenAI wire has them) and `tool_call_id`
    (a `tool` message answering one of them) carry a function-calling chain (JEEBench §4.2)."""

    model_config = ConfigDict(frozen=True)
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[Part]
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    is_error: bool = False
    """A `tool` message whose result is the tool's error: Anthropic's `tool_result` says so (`is_error`)."""


class Decoding(BaseModel):
    """Decoding parameters. `n` is the number of samples this request stands for (self-consistency)."""

    model_config = ConfigDict(frozen=True)
    temperature: float | None = 0.0
    """None: no temperature is sent, the provider's default (as VRB's reference code does)."""
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    n: int = Field(1, ge=1)


class Request(BaseModel):
    """One logical call: identity (suite, item, model, sample, pass) + messages + decoding.

    `decoding.n > 1` stands for samples `sample .. sample+n-1`; the runner turns it into one call with
    the provider's `n` where supported, separate calls elsewhere, and one row/cache entry per sample.
    `via` names the model that is actually called when it differs from `model` (an LLM judge reading
    `model`'s answer). `prefix` is where the prefix this request shares with other requests ends, as
    (message, part) of its last part (a str content is part 0): the system text, exemplars, or an image
    asked about several times; `resent` says a later pass sends these messages again as its own start.
    Both only let providers cache what is re-sent (providers.cache_marks); neither is sent nor keyed.
    `sim` carries hints for the built-in simulated provider only (never sent, never
    part of the cache key): `{"correct": str, "wrong": [str, ...]}` realistic response texts, optional
    `"difficulty"` in [0, 1]. `meta` is the suite's own bookkeeping, kept out of calls and keys.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True)
    suite: str
    item: str
    model: str = ""
    sample: int = 0
    pass_: str = Field("answer", alias="pass")
    messages: list[Message]
    decoding: Decoding = Decoding()
    via: str | None = None
    sim: dict[str, Any] | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    prefix: tuple[int, int] | None = None
    resent: bool = False
    tools: list[dict[str, Any]] | None = None
    """OpenAI Chat Completions `tools` (JSON-schema functions) offered to the model; sent and keyed."""

    @property
    def target(self) -> str:
        """The configured model name that is called."""
        return self.via or self.model

    def identity(self, sample: int | None = None) -> str:
        """The key that makes a result row unique within a run directory."""
        s = self.sample if sample is None else sample
        return row_identity(self.model, self.item, s, self.pass_)


_new = object.__new__
_set = object.__setattr__
assert not Request.__private_attributes__ and Request.model_config.get("extra") != "allow"


def replaced(req: Request, **fields: Any) -> Request:
    """`req.model_copy(update=fields)` without pydantic's generic steps (~0.9 us instead of ~2; a validated
    `Request(...)` ~4): once a request on the hot path (the scheduler's copy for its model, a suite's
    request from a validated template). A `Request` has neither private attributes nor extras (asserted
    above), so a copy is its field values and the set of fields given. No validation, as in `model_copy`:
    `fields` are of their field's type already."""
    r = _new(Request)
    _set(r, "__dict__", {**req.__dict__, **fields})
    _set(r, "__pydantic_fields_set__", req.__pydantic_fields_set__ | fields.keys())
    _set(r, "__pydantic_extra__", None)
    _set(r, "__pydantic_private__", None)
    return r


def row_identity(model: str, item: str, sample: int, pass_: str) -> str:
    return f"{model}\x1f{item}\x1f{sample}\x1f{pass_}"


BLOCK_FINISH = frozenset({"content_filter", "refusal"})
"""Finish reasons of a provider's own block (OpenAI/Azure content filter, Gemini safety through litellm,
Anthropic's `refusal` stop reason): the provider answered by declining, no transport failure."""


def blocked(row: dict[str, Any]) -> bool:
    """An error row that is a provider's block of the request (a finish reason above, or an HTTP
    content-policy refusal, providers.base.http_error): a refusal at the API level."""
    if not row.get("error"):
        return False
    return row.get("finish_reason") in BLOCK_FINISH or "content-policy refusal" in str(row["error"])


def answer_problem(v: Any) -> str | None:
    """Why a value (a cached answer, a results row) cannot be a success row (None: it can). Checked on
    every cache read, as provider bodies are, and on every row scored: a value that parses but holds the
    wrong types (a damaged or foreign entry) is a miss, never a success."""
    if not isinstance(v, dict):
        return f"a {type(v).__name__}, not an object"
    if not isinstance(v.get("text"), str):
        return f"text is {type(v.get('text')).__name__}"
    u = v.get("usage")
    if u is not None:
        if not isinstance(u, dict):
            return f"usage is {type(u).__name__}"
        for k, x in u.items():
            if x is not None and (isinstance(x, bool) or not isinstance(x, int) or x < 0):
                return f"usage.{k} is {x!r}"
    c = v.get("cost_usd")
    if c is not None and (isinstance(c, bool) or not isinstance(c, int | float) or c < 0):
        return f"cost_usd is {c!r}"
    f = v.get("finish_reason")
    if f is not None and not isinstance(f, str):
        return f"finish_reason is {type(f).__name__}"
    return None


def text_of(content: str | list[Part]) -> str:
    """The text of a message's content, images left out (for token estimates and follow-up prompts)."""
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content if isinstance(p, TextPart))


def user(*parts: str | Path | ImagePart, detail: str | None = None) -> Message:
    """A user message from text and images, in order: `str` is text, `Path` an image file."""
    if len(parts) == 1 and isinstance(parts[0], str):
        return Message(role="user", content=parts[0])
    out: list[Part] = []
    for p in parts:
        if isinstance(p, str):
            out.append(TextPart(text=p))
        elif isinstance(p, Path):
            out.append(ImagePart(path=str(p), detail=detail))  # type: ignore[arg-type]
        else:
            out.append(p)
    if len(out) == 1 and isinstance(out[0], TextPart):
        return Message(role="user", content=out[0].text)
    return Message(role="user", content=out)


# --- image helpers: hashing and encoding are cached per (path, mtime, size) so that samples and
# --- repeated models do not re-read and re-encode the same image on every call.


def _stat(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"image file not found: {path}") from None


@lru_cache(maxsize=65536)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(_read_file(path)).hexdigest()


@lru_cache(maxsize=256)
def _file_data_url(path: str, mtime_ns: int, size: int, mime: str | None) -> str:
    data = _read_file(path)
    return f"data:{mime or _sniff_mime(data[:16])};base64,{base64.b64encode(data).decode()}"


def _sniff_mime(head: bytes) -> str:
    if head.startswith(b"\x89PNG"):
        return "image/png"
    if head.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"
