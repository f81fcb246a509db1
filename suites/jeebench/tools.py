"""JEEBench §4.2, function calling: the CoT prompt with a four-operation calculator offered as tools.

The paper: "the JEE exam only allows access to a basic calculator with 4 primitive arithmetic operation
(+, -, /, *) ... we use the newly introduced function-calling API to implement standard arithmetic
operators"; gpt-4-0613 CoT 0.303, with the calculator 0.274. Its function definitions and round limit are
not released: ours are add/subtract/multiply/divide(a, b) and at most ROUNDS tool rounds.

A chain: the answer pass; when its row holds `tool_calls`, the suite runs each call here (numbers only,
never eval) and sends the results as `role: tool` messages in pass `tool1`, then `tool2`, ... Each call is
its own row; a sample's answer is the last row of its chain. A malformed call (arguments not JSON, an
unknown function, a non-number) is answered with an error message as its result, as a tool runner would,
and counted; it never fails the row. The suite speaks OpenAI's shapes only (`tools`, `tool_calls` with JSON
string arguments, `role: tool`); each provider translates (providers.anthropic: `tool_use`/`tool_result`)."""

from __future__ import annotations

import math
from typing import Any

import orjson

from core.types import Message, Request, Row

VARIANT = "cot-tools"
ROUNDS = 8
"""Tool rounds after the answer pass (passes tool1..tool8): a chain still calling then ends unanswered."""
PASSES = tuple(f"tool{k}" for k in range(1, ROUNDS + 1))
DEVIATION = (
    f"§4.2's calculator functions and round limit are not released: ours are add, subtract, multiply and "
    f"divide(a, b) as function tools (OpenAI's `tools`; Anthropic's `tool_use`), at most {ROUNDS} tool "
    "rounds after the answer (a chain still calling then has no answer, scored 0); a malformed call "
    "(arguments not JSON, an unknown function) is answered with an error message as its result and "
    "counted; the paper reports only gpt-4-0613's overall scores"
)
"""Recorded with every cot-tools run."""
OPS = {
    "add": ("a + b", lambda a, b: a + b),
    "subtract": ("a - b", lambda a, b: a - b),
    "multiply": ("a * b", lambda a, b: a * b),
    "divide": ("a / b", lambda a, b: a / b),
}


def _function(name: str, what: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"A basic calculator: returns {what}.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    }


CALCULATOR = [_function(name, what) for name, (what, _) in OPS.items()]


def run_call(call: Any) -> tuple[str, bool]:
    """(the tool message's content, whether the call was well formed) for one of the model's tool calls."""
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict):
        return "error: the tool call has no function", False
    name = fn.get("name")
    if name not in OPS:
        return f"error: no function named {name!r}; the functions are {', '.join(OPS)}", False
    raw = fn.get("arguments")
    try:  # (the spec's JSON string; Ollama's, Gemini's and some vLLM parsers' already an object)
        args = raw if isinstance(raw, dict) else orjson.loads(raw or "")
    except (orjson.JSONDecodeError, TypeError):
        return f"error: the arguments are not JSON: {str(fn.get('arguments'))[:200]!r}", False
    if not isinstance(args, dict):
        return "error: the arguments are not an object with a and b", False
    a, b = args.get("a"), args.get("b")
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b)):
        return f"error: {name} needs two numbers a and b, got {args!r}"[:300], False
    if name == "divide" and b == 0:
        return "error: division by zero", True
    out = OPS[name][1](float(a), float(b))
    if not math.isfinite(out):
        return "error: the result is not a finite number", True
    return repr(out), True


def wire_call(call: Any, i: int) -> dict[str, Any]:
    """One of the model's calls as the assistant turn sends it back, in the spec's shape whatever shape it came
    in: an id (`call_<i>` when it had none: Ollama's), type function, arguments a JSON string (an object,
    as Ollama and some OpenAI-compatible servers send them, is encoded: strict servers refuse an object back,
    https://github.com/openclaw/openclaw/pull/97834). Arguments that are not JSON go back as they came, and
    so does any other field of the call: Gemini's `extra_content.google.thought_signature` must, or Gemini 3
    refuses the next turn (https://ai.google.dev/gemini-api/docs/thought-signatures)."""
    if not isinstance(call, dict):
        return {"id": f"call_{i}", "type": "function", "function": {"name": "", "arguments": ""}}
    fn = call.get("function") if isinstance(call.get("function"), dict) else {}
    args = fn.get("arguments")
    if not isinstance(args, str):
        args = orjson.dumps(args if args is not None else {}).decode()
    return {**call, "id": str(call.get("id") or f"call_{i}"), "type": "function",
            "function": {**fn, "name": str(fn.get("name") or ""), "arguments": args}}


def next_round(req: Request, row: Row) -> list[Request]:
    """The follow-up of a row that called tools: its calls and their results appended, the next pass."""
    calls = row.get("tool_calls")
    if row.get("error") or not calls:
        return []
    k = 0 if row.get("pass") == "answer" else PASSES.index(row["pass"]) + 1 if row.get("pass") in PASSES else -1
    if not 0 <= k < ROUNDS:
        return []
    sent = [wire_call(c, i) for i, c in enumerate(calls)]
    results = [Message(role="tool", content=out, tool_call_id=s["id"], is_error=out.startswith("error: "))
               for c, s in zip(calls, sent, strict=True) for out in [run_call(c)[0]]]
    turn = Message(role="assistant", content=row.get("text") or "", tool_calls=sent)
    return [
        req.model_copy(update={
            "pass_": PASSES[k],
            "sample": row["sample"],
            "messages": [*req.messages, turn, *results],
            "decoding": req.decoding.model_copy(update={"n": 1}),
        })
    ]  # fmt: skip


def final(by: dict[tuple[int, str], Row], s: int) -> Row:
    """Sample `s`'s answer row: the last row of its chain (a failed call ends it: that row, its error)."""
    row = by[(s, "answer")]
    for p in PASSES:
        if row.get("error") or not row.get("tool_calls") or (s, p) not in by:
            break
        row = by[(s, p)]
    return row


def counts(rows: list[Row]) -> dict[str, int]:
    """Tool use over one model's rows: calls made, malformed ones, chains ended by the round limit."""
    out = {"calls": 0, "malformed": 0, "at_limit": 0}
    for r in rows:
        for c in r.get("tool_calls") or []:
            out["calls"] += 1
            out["malformed"] += not run_call(c)[1]
        out["at_limit"] += bool(r.get("tool_calls")) and r.get("pass") == PASSES[-1]
    return out
