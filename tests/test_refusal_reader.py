"""The refusal reader reads the provider's words against the request it refused (#36): whatever field
the request carried, top level or nested, named in any of the shapes providers use (quoted, backticked,
bare, camelCase, in a structured field, or in other words), is the suspect; what the words say of its
value decides the change; nothing essential is ever dropped."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.refusal_fields import bounds, listed
from providers.refusals import FIXED, read

PLAIN = {"model": "new-model-2026", "messages": [{"role": "user", "content": "Question?"}]}


def _read(body: dict | str, **fields: object) -> list[tuple]:
    text = body if isinstance(body, str) else orjson.dumps(body).decode()
    return [(r.field, r.action, r.to, r.values, r.bound) for r in read(400, text, {**PLAIN, **fields})]


def _err(msg: str) -> dict:
    return {"error": {"message": msg, "type": "invalid_request_error"}}


def test_the_wordings_the_issue_lists():
    assert _read(_err("Unsupported parameter: top_p"), top_p=0.9, temperature=0) == [("top_p", "drop", None, (), None)]
    assert _read({"detail": [{"loc": ["body", "frequency_penalty"], "msg": "Extra inputs are not permitted",
                              "type": "extra_forbidden"}]}, frequency_penalty=0.1)[0][:2] == ("frequency_penalty", "drop")
    google = {"error": {"code": 400, "message": "Invalid JSON payload received.", "status": "INVALID_ARGUMENT",
                        "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                                     "fieldViolations": [{"field": "generationConfig.stopSequences"}]}]}}
    assert _read(google, stop=["\n\n"])[0][:2] == ("stop", "drop")
    assert _read(_err("This model does not support thinking"), thinking={"type": "enabled", "budget_tokens": 1024})[0][:2] \
        == ("thinking", "drop")
    assert _read(_err("The model does not support the effort parameter"), reasoning_effort="low")[0][:2] == \
        ("reasoning_effort", "drop")
    assert _read(_err("Logprobs is not enabled for this model"), logprobs=True)[0][:2] == ("logprobs", "drop")
    assert _read(_err("Model does not support Json Output"), response_format={"type": "json_object"})[0][:2] == \
        ("response_format", "drop")
    assert _read(_err("property 'store' is unsupported"), store=False)[0][:2] == ("store", "drop")
    assert _read(_err("Budget 0 is invalid. This model only works in thinking mode."),
                 extra_body={"google": {"thinking_config": {"thinking_budget": 0}}})[0][1] == "drop"
    # renames in every direction among the token limits
    vllm = _err("[{'type': 'extra_forbidden', 'loc': ('body', 'max_completion_tokens'), 'msg': 'Extra inputs are "
                "not permitted', 'input': 100}]")
    assert _read(vllm, max_completion_tokens=100) == [("max_completion_tokens", "rename", "max_tokens", (), None)]
    assert _read(_err("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                      "'max_completion_tokens' instead."), max_tokens=100)[0][:3] == \
        ("max_tokens", "rename", "max_completion_tokens")
    # stated maxima: clamped
    assert _read(_err("max_tokens: 8192 > 4096, which is the maximum allowed number of output tokens"),
                 max_tokens=8192) == [("max_tokens", "clamp", None, (), 4096.0)]
    assert _read({"object": "error", "message": "This model's valid range of max_tokens is [1, 8192]"},
                 max_tokens=16000) == [("max_tokens", "clamp", None, (), 8192.0)]
    # n in other words: separate calls
    for words in ("This model does not support n > 1", "Multiple candidates is not enabled for models/x",
                  "n: only 1 is supported", "Only one completion choice is allowed"):
        assert _read(_err(words), n=8)[0][:2] == ("n", "split"), words
    # enumerations in other forms
    assert _read(_err("service_tier must be one of `none` or `default`"), service_tier="flex")[0][1:4] == \
        ("value", None, ("none", "default"))
    # essential fields are never suspects
    assert _read(_err("Invalid value for 'messages': expected an array")) == []
    assert _read(_err("'model' is not supported")) == []


def test_bounds_and_lists():
    assert bounds("valid range of max_tokens is [1, 8192]") == (1.0, 8192.0)
    assert bounds("max_tokens: 8192 > 4096, which is the maximum allowed") == (None, 4096.0)
    assert bounds("max_tokens must be less than or equal to 32,768") == (None, 32768.0)
    assert bounds("budget_tokens must be at least 1024") == (1024.0, None)
    assert listed("Supported values are: 'low', 'medium', and 'high'.") == ("low", "medium", "high")
    assert listed("must be one of `none` or `default`") == ("none", "default")


NAMES = st.from_regex(r"[a-z]{3,9}(_[a-z]{3,8}){0,2}", fullmatch=True).filter(
    lambda s: not ({s} & FIXED) and not any(w in s for w in (
        "param", "support", "model", "field", "name", "unknown", "valid", "allow", "enable", "extra", "input",
        "argument", "property", "reques", "value", "permit", "option", "unrecog", "must", "only", "not", "cannot",
        "with", "this", "the", "for", "use", "range", "max", "thinking", "effort", "budget", "json", "stop",
        "seed", "store", "penalt", "reason", "log", "candidate", "choice", "completion", "format")))


def _camel(s: str) -> str:
    head, *rest = s.split("_")
    return head + "".join(w.title() for w in rest)


SHAPES = [
    lambda f, c: _err(f"Unsupported parameter: {f}"),
    lambda f, c: _err(f"Unsupported parameter: '{f}' is not supported with this model."),
    lambda f, c: _err(f"`{f}` is not supported on this model"),
    lambda f, c: _err(f"The parameter {f} is not allowed for this endpoint"),
    lambda f, c: _err(f"property '{f}' is unsupported"),
    lambda f, c: _err(f"Argument not supported on this model: {f}"),
    lambda f, c: _err(f"Invalid JSON payload received. Unknown name \"{c}\": Cannot find field."),
    lambda f, c: _err(f"{c} is not enabled for this deployment"),
    lambda f, c: {"error": {"message": "Invalid parameter", "type": "invalid_request_error", "param": f,
                            "code": "unknown_parameter"}},
    lambda f, c: {"detail": [{"loc": ["body", f], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"}]},
    lambda f, c: {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "Request contains an invalid argument.",
                            "details": [{"fieldViolations": [{"field": f"generationConfig.{c}"}]}]}},
]


@settings(max_examples=300, deadline=None)
@given(name=NAMES, other=NAMES, shape=st.sampled_from(range(len(SHAPES))), nested=st.booleans())
def test_any_field_the_request_carries_in_any_shape_is_named(name: str, other: str, shape: int, nested: bool):
    if name == other or name in other or other in name:
        return
    body = SHAPES[shape](name, _camel(name))
    request = {other: 1, "group": {name: True}} if nested else {name: True, other: 1}
    got = read(400, orjson.dumps(body).decode(), {**PLAIN, **request})
    want = f"group.{name}" if nested else name
    assert got and got[0].field == want, (body, request, got)
    assert all(r.field.split(".", 1)[0] not in FIXED for r in got)


def test_a_wrong_type_or_a_long_prompt_is_no_field_to_change():
    """llama-cpp-python's validation of a value of the wrong type (HTTP 500) and a prompt beyond the
    context: renaming or dropping a field answers neither (the real-server tests see both)."""
    typed = {"detail": [{"type": "int_parsing", "loc": ["body", "max_tokens"],
                         "msg": "Input should be a valid integer, unable to parse string as an integer", "input": "six"}]}
    assert read(500, orjson.dumps(typed).decode(), {**PLAIN, "max_tokens": "six"}) == []
    long = _err("the request exceeds the available context size, try increasing it (context_length_exceeded)")
    assert _read(long, max_tokens=16) == []
