"""What a refused request says the model refuses, and the request shape that follows from it.

Every month brings models that no map knows; their first refusal names what they take: OpenAI's
`{"error": {"param", "code": "unsupported_parameter" | "unsupported_value"}}` ("Use 'X' instead",
"Supported values are: ...", "Only the default (1) value is supported"), Anthropic's
`invalid_request_error` messages naming fields, Gemini's OpenAI-compatible endpoint, xAI, DeepSeek,
vLLM/SGLang's validation errors, llama.cpp, litellm's `UnsupportedParamsError`. `read` turns such an
answer into `Refusal`s; `adapt` turns the refusals into the model's next request shape. Only the
provider's own words drive a change. Given the refused request, `read` reads the words against it
(providers.refusal_fields: any field the request carried, named in any wording, and what the words say
of its value); the phrasings below are read first where they match, for the pairs and lists they
know, and alone when no request is given. An answer nothing reads is no refusal: the call stays an
error row. Pure functions: no I/O, no state (runner.calls.learned keeps what was learned).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import orjson

from providers import refusal_fields as rf
from providers.capabilities import SAMPLING, Profile
from providers.shape import Shape, shape_for

EFFORT_SCALE = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
"""reasoning effort levels, least to most (openai-openapi `ReasoningEffort`)."""
FIXED = frozenset({"model", "messages", "input", "system", "system_instruction", "systemInstruction", "stream"})
"""Fields a request cannot go without: a refusal naming one is not ours to adapt to."""
LIMITS = frozenset(rf.LIMIT_NAMES)
"""A suite's answer budget: renamed or clamped where the provider says so, never dropped."""


@dataclass(frozen=True)
class Refusal:
    field: str
    """The request field as we send it (`reasoning_effort`, `reasoning.effort`, `top_p`, `n`...)."""
    action: str
    """drop | rename (to `to`) | value (the nearest of `values`; none named: drop) | split (n=1 calls)
    | clamp (to `bound`, the provider's stated limit)."""
    to: str | None = None
    values: tuple[str, ...] = ()
    refused: str | None = None
    words: str = ""
    """The provider's message, for the log and the record."""
    bound: float | None = None

    def record(self) -> dict[str, Any]:
        out = {"field": self.field, "action": self.action, "to": self.to, "values": list(self.values),
               "refused": self.refused, "words": self.words}
        if self.bound is not None:
            out["bound"] = self.bound
        return out

    @classmethod
    def of(cls, d: dict[str, Any]) -> Refusal:
        bound = d.get("bound")
        return cls(str(d["field"]), str(d["action"]), d.get("to"), tuple(str(v) for v in d.get("values") or ()),
                   d.get("refused"), str(d.get("words") or ""),
                   float(bound) if isinstance(bound, int | float) and not isinstance(bound, bool) else None)


def _snake(name: str) -> str:
    """xAI names fields in camelCase (`presencePenalty`, `reasoningEffort`)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _parts(body: str) -> tuple[str, str | None, str | None]:
    """(message, param, code) of an error body in any of the providers' envelopes; a body that is not
    JSON (litellm's exception text, a message already unwrapped) is its own message."""
    text = body.strip()
    if text.startswith("HTTP ") and ": " in text:  # a ProviderError's message: "HTTP 400: {...}"
        text = text.split(": ", 1)[1]
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text, None, None
    if isinstance(doc, list) and doc and isinstance(doc[0], dict):  # Gemini: [{"error": {...}}]
        doc = doc[0]
    if not isinstance(doc, dict):
        return text, None, None
    err = doc.get("error", doc)
    if isinstance(err, str):  # xAI: {"code": "...", "error": "Argument not supported on this model: ..."}
        return err, None, None
    if not isinstance(err, dict):
        return text, None, None
    msg = err.get("message")
    if isinstance(msg, str) and msg.lstrip().startswith("{"):  # a gateway wrapping the provider's body
        inner = _parts(msg)
        if inner[0] != msg:
            return inner
    param, code = err.get("param"), err.get("code")
    return (msg if isinstance(msg, str) else text, param if isinstance(param, str) else None,
            code if isinstance(code, str) else None)


_N = r"(\w+(?:\.\w+)*)"  # a field name, dotted for a nested one (never a sentence's full stop)
_QUOTED = re.compile(r"'([^']+)'")
_SUPPORTED = re.compile(r"Supported values are:?\s*(.+?)(?:\.\s*$|\.\s+[A-Z]|$)", re.S)
_USE = re.compile(rf"Use '{_N}' instead")
_OAI_PARAM = re.compile(rf"Unsupported parameter: '{_N}'")
_OAI_VALUE = re.compile(rf"Unsupported value: '{_N}' does not support '?([^' ]+)'?")
_OAI_VALUE_ONLY = re.compile(r"Unsupported value: '([^']+)' is not supported with the")
_DEFAULT_ONLY = re.compile(r"Only the default \(([^)]*)\)")
_UNRECOGNIZED = re.compile(rf"Unrecognized request argument supplied: {_N}")
_XAI = re.compile(rf"Argument not supported on this model: {_N}")
_NO_PARAM = re.compile(rf"does not support (?:the )?parameter `?{_N}`?")
_LITELLM = re.compile(r"does not support parameters: \[([^\]]*)\]")
_BOTH = re.compile(r"`(\w+)` and `(\w+)` cannot both be specified")
_UNSET = re.compile(r"`(\w+)` (?:must be unset|is not supported|may only be set to \S+)")
_EXTRA = re.compile(rf"(?:^|[\s'\"]){_N}: Extra inputs are not permitted")
_GEMINI_UNKNOWN = re.compile(rf"Unknown name \\?\"{_N}\\?\"(?: at '[^']*')?: Cannot find field")
_GEMINI_LEVEL = re.compile(r"Thinking level (\w+) is not supported for this model")
_PYDANTIC = re.compile(rf"'type': '(\w+)', 'loc': \('body', '{_N}'\), 'msg': [\"']([^\"]*)[\"']")
_LLAMA_N = re.compile(r"[Oo]nly one completion choice is allowed")


def _values(text: str) -> tuple[str, ...]:
    """The values a message lists: "'low', 'medium', and 'high'" or "Input should be 'low' or 'high'"."""
    return tuple(_QUOTED.findall(text))


def _value_refusal(field: str, msg: str, refused: str | None, words: str) -> Refusal:
    if field == "n":
        return Refusal("n", "split", words=words)
    m = _SUPPORTED.search(msg)
    values = _values(m.group(1)) if m else ()
    if not values and _DEFAULT_ONLY.search(msg):  # "Only the default (1) value": not sent at all
        return Refusal(field, "drop", refused=refused, words=words)
    return Refusal(field, "value", values=values, refused=refused, words=words)


def read(status: int | None, body: str | None, request: dict[str, Any] | None = None) -> list[Refusal]:
    """The refusals an error answer names; [] for anything else (it stays an error row). `request`:
    the refused request's body, read against the words."""
    if not body or (status is not None and status not in (400, 422) and status < 500):
        return []
    msg, param, code = _parts(body)
    out = _usable(_read(msg, param, code))
    if request:  # read against the request: a field it did not carry is no refusal of ours to adapt to
        sent = set(rf.fields_of(request)) | {"n"}
        out = [r for r in out if r.field in sent] or _usable(against(msg, _doc(body), request))
    return out


def _usable(out: list[Refusal]) -> list[Refusal]:
    """Nothing essential is ever dropped, and an answer budget is renamed or clamped, never dropped."""
    return [r for r in out if r.field.split(".", 1)[0] not in FIXED
            and (r.field not in LIMITS or r.action in ("rename", "clamp"))]


def _doc(body: str) -> Any:
    text = body.strip()
    if text.startswith("HTTP ") and ": " in text:
        text = text.split(": ", 1)[1]
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


NOT_A_FIELD = re.compile(
    r"valid (?:integer|number|string|boolean)|int_parsing|float_parsing|string_type|bool_parsing|type_error|"
    r"context.?length|context window|context size|maximum context|too many tokens|prompt is too long", re.I)
"""Refusals no change of fields answers: a value of the wrong type (it would be renamed or dropped in
vain), a prompt beyond the context (the item's)."""


def against(msg: str, doc: Any, request: dict[str, Any]) -> list[Refusal]:
    """The refusals the words make of the fields the request carried (providers.refusal_fields): the
    surest suspects, each with what the words say of its value."""
    if NOT_A_FIELD.search(msg):  # a value of the wrong type (our bug, or the config's), a prompt too long
        return []
    found = rf.suspects(msg, doc, request)
    if not found:
        return []
    best = [f for f in found if f.how == found[0].how]
    words = " ".join(msg.split())[:300]
    sent = list(rf.fields_of(request))
    return [_refusal(f.field, msg, request, sent, words) for f in best]


def _refusal(field: str, msg: str, request: dict[str, Any], sent: list[str], words: str) -> Refusal:
    """What to do about one suspect field, from what the words say of it."""
    if field == "n":
        return Refusal("n", "split", words=words)
    value = rf.value_of(request, field)
    lo, hi = rf.bounds(msg)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if field in LIMITS:
        if hi is not None and (not number or value > hi):
            return Refusal(field, "clamp", refused=str(value), bound=hi, words=words)
        to = rf.replacement(msg, field, sent)
        to = to if to in LIMITS else rf.COUNTERPART.get(field, "max_tokens")
        return Refusal(field, "rename", to=to, words=words)
    values = tuple(v for v in rf.listed(msg) if v != str(value) and rf._norm(v) != rf._norm(field))
    if values:
        return Refusal(field, "value", values=values, refused=None if value is None else str(value), words=words)
    if number and (hi is not None and value > hi or lo is not None and value < lo):
        return Refusal(field, "clamp", refused=str(value), bound=hi if hi is not None and value > hi else lo,
                       words=words)
    to = rf.replacement(msg, field, sent)
    if to is not None and to in request.get("extra_body", {}) | request:  # (a field we send under another name)
        return Refusal(field, "rename", to=to, words=words)
    return Refusal(field, "drop", refused=None if value is None else str(value), words=words)


def _read(msg: str, param: str | None, code: str | None) -> list[Refusal]:
    words = " ".join(msg.split())[:300]
    if _LLAMA_N.search(msg):  # llama.cpp server: n > 1
        return [Refusal("n", "split", words=words)]
    if (m := _OAI_PARAM.search(msg)) or (code == "unsupported_parameter" and param):  # OpenAI
        field = param or m.group(1)  # type: ignore[union-attr]
        use = _USE.search(msg)
        return [Refusal(field, "rename", to=use.group(1), words=words) if use else Refusal(field, "drop", words=words)]
    if code == "unsupported_value" or _OAI_VALUE.search(msg) or _OAI_VALUE_ONLY.search(msg):
        m = _OAI_VALUE.search(msg)
        field = param or (m.group(1) if m else None)
        if field is None:
            return []
        refused = m.group(2) if m else (v.group(1) if (v := _OAI_VALUE_ONLY.search(msg)) else None)
        return [_value_refusal(field, msg, refused, words)]
    for pat in (_UNRECOGNIZED, _XAI, _NO_PARAM, _EXTRA, _GEMINI_UNKNOWN):  # OpenAI/Azure, xAI, DeepSeek,
        if names := pat.findall(msg):  # Anthropic's unknown fields, Gemini's OpenAI-compatible endpoint
            return [Refusal(f, "drop", words=words) for f in dict.fromkeys(map(_snake, names))]  # (each one named)
    if m := _LITELLM.search(msg):  # litellm.UnsupportedParamsError
        return [Refusal(f, "drop", words=words) for f in _values(m.group(1))]
    if m := _BOTH.search(msg):  # Anthropic: "`temperature` and `top_p` cannot both be specified"
        keep, other = m.group(1), m.group(2)
        return [Refusal(other if keep == "temperature" else keep, "drop", words=words)]
    if m := _UNSET.search(msg):  # Anthropic: "`top_k` must be unset when thinking is enabled"
        return [Refusal(m.group(1), "drop", words=words)]
    if m := _GEMINI_LEVEL.search(msg):  # "Thinking level MEDIUM is not supported for this model"
        return [Refusal("reasoning_effort", "value", refused=m.group(1).lower(), words=words)]
    if m := _PYDANTIC.search(msg):  # vLLM / SGLang / llama-cpp-python validation of our body
        kind, field, text = m.groups()
        if kind == "extra_forbidden":
            return [Refusal(field, "drop", words=words)]
        if kind in ("literal_error", "enum"):
            return [Refusal(field, "value", values=_values(text), words=words)]
    return []


def nearest(current: Any, values: tuple[str, ...]) -> str | None:
    """The supported value closest to the one refused: on the effort scale, the next one up on a tie
    (a model made to reason keeps reasoning); numbers by distance; else the first named."""
    if not values:
        return None
    if current in EFFORT_SCALE and all(v in EFFORT_SCALE for v in values):
        i = EFFORT_SCALE.index(current)
        return min(values, key=lambda v: (abs(EFFORT_SCALE.index(v) - i), -EFFORT_SCALE.index(v)))
    try:
        x = float(current)
        return min(values, key=lambda v: abs(float(v) - x))
    except (TypeError, ValueError):
        return values[0]


@dataclass(frozen=True)
class Sent:
    """How one model's requests go out: its shape, its extra body fields, one sample per call or not."""

    shape: Shape | None
    params: dict[str, Any]
    split_n: bool = False


def base_shape(shape: Shape | None, profile: Profile | None) -> Shape | None:
    """A shape to change: the model's, or the profile's trivial one when it is sent as it always was."""
    return shape if shape is not None or profile is None else shape_for(profile)


def adapt(sent: Sent, r: Refusal, profile: Profile | None = None) -> tuple[Sent, str] | None:
    """The requests after refusal `r`, and the change in words; None when nothing we send changes
    (a field we never send, a value already the nearest): the refusal stays an error."""
    shape, params = base_shape(sent.shape, profile), dict(sent.params)
    if r.action == "split":
        params = {k: v for k, v in sent.params.items() if k != "n"}  # (a configured n goes too)
        if sent.split_n and params == sent.params:
            return None
        return replace(sent, split_n=True, params=params), "n > 1 sent as separate calls"
    if r.action == "clamp":
        return _clamp(sent, base_shape(sent.shape, profile), r)
    if shape is None:  # sim, replay: no request shape
        return None
    fields = dict(shape.fields)
    f = r.field
    top = f.split(".", 1)[0]
    if r.action == "rename":
        if not r.to:
            return None
        renamed = False
        if f in params:  # (the config's own field, and the suite's limit below, both move)
            params[r.to] = params.pop(f)
            renamed = True
        if f in LIMITS and shape.limit_field == f:
            shape = replace(shape, limit_field=r.to)
            renamed = True
        return _out(sent, shape, params, f"{f} sent as {r.to}") if renamed else None
    if r.action == "value":
        home = params if rf.value_of(params, f) is not None else fields  # (nested in either: reasoning.effort)
        cur = rf.value_of(home, f)
        to = nearest(r.refused if cur is None else cur, r.values)
        if to is not None and to != cur and cur is not None:
            _set(home, f, to)
            return _out(sent, replace(shape, fields=fields), params, f"{f} {to!r} instead of {cur!r}")
        if to is not None:
            return None
    # drop (or a value refused with none named: the provider's default), wherever the body gets it from:
    # the config's params, the profile's fields, the suite's sampling
    before = (orjson.loads(orjson.dumps(params)), dict(fields), shape.drop)
    _pop(params, f)
    if top in fields:
        sub = fields[top]
        if "." in f and isinstance(sub, dict) and len(sub) > 1:
            fields[top] = {k: v for k, v in sub.items() if k != f.split(".", 1)[1]}
        else:
            del fields[top]
    drop = tuple(sorted({*shape.drop, f})) if f in SAMPLING - {"n"} else shape.drop
    if (params, fields, drop) == before:
        return None
    return _out(sent, replace(shape, fields=fields, drop=drop), params, f"{f} not sent (its provider's default)")


def _clamp(sent: Sent, shape: Shape | None, r: Refusal) -> tuple[Sent, str] | None:
    """A value past the provider's stated limit: the limit instead. A token limit is capped (answers
    longer than it are cut: recorded, it may fall below the protocol's budget); a field the config or
    the profile sets takes the bound; any other (the suite's sampling) is not sent."""
    if r.bound is None:
        return None
    params = dict(sent.params)
    bound: int | float = int(r.bound) if float(r.bound).is_integer() else r.bound
    if r.field in params:
        if params[r.field] == bound:
            return None
        params[r.field] = bound
        return _out(sent, shape, params, f"{r.field} {bound} (the provider's limit) instead of {r.refused}") \
            if shape is not None else (replace(sent, params=params), f"{r.field} {bound} instead of {r.refused}")
    if shape is None:
        return None
    if r.field in LIMITS:
        cap = int(r.bound)
        if shape.cap is not None and shape.cap <= cap:
            return None
        return _out(sent, replace(shape, cap=cap), params,
                    f"{r.field} at most {cap:,} (the provider's maximum; longer answers are cut)")
    fields = dict(shape.fields)
    top = r.field.split(".", 1)[0]
    if top in fields:
        cur = rf.value_of(fields, r.field)
        if cur == bound:
            return None
        _set(fields, r.field, bound)
        return _out(sent, replace(shape, fields=fields), params, f"{r.field} {bound} instead of {cur}")
    return adapt(sent, Refusal(r.field, "drop", refused=r.refused, words=r.words))


def _pop(d: dict[str, Any], path: str) -> None:
    """Remove a field, nested or not, and any object it leaves empty (a copy of each level it changes)."""
    top, _, rest = path.partition(".")
    if not rest:
        d.pop(top, None)
    elif isinstance(d.get(top), dict):
        sub = dict(d[top])
        _pop(sub, rest)
        if sub:
            d[top] = sub
        else:
            del d[top]


def _set(d: dict[str, Any], f: str, value: Any) -> None:
    if "." in f:
        top, sub = f.split(".", 1)
        d[top] = {**d.get(top, {}), sub: value}
    else:
        d[f] = value


def _out(sent: Sent, shape: Shape, params: dict[str, Any], said: str) -> tuple[Sent, str]:
    return Sent(None if shape.trivial else shape, params, sent.split_n), said
