"""Provider answers checked at the edge: any body becomes a well-typed `Completion` or a retryable
`ProviderError`, so nothing malformed is ever cached, written as a success, or crashes a scorer.

Well-typed means: one text per sample, each `str` or `None`; a finish reason `str` or `None`; token
counts `int` or `None`. A body that breaks these rules (content an object, `message` a string,
`choices` of ints, null content that claims to have stopped normally) is the server's fault and worth
another attempt; odd but harmless fields (usage counts sent as digit strings) are normalised.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from core.types import Completion
from providers.base import ProviderError

log = logging.getLogger("evalsweep")

NO_TEXT_OK = frozenset({"length", "content_filter", "max_tokens", "refusal", "tool_calls", "tool_use", "partial"})
"""Finish reasons under which an empty answer is the model's real answer (an error row, no retry);
`partial`: a stream cut before the choice finished (providers.stream)."""


def malformed(what: str) -> ProviderError:
    return ProviderError(f"malformed response: {what}", retryable=True)


def tokens(v: Any) -> int | None:
    """A token count as int, or None when absent or unusable (never a string, float or bool)."""
    if type(v) is int:  # the usual case first (a bool is not `type(v) is int`): ~9 counts an answer
        return v if v >= 0 else None
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if v >= 0 else None
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    if isinstance(v, float) and v.is_integer() and v >= 0:
        return int(v)
    return None


def content_text(content: Any, where: str) -> str | None:
    """An OpenAI message's `content`: a string, null, or a list of text parts (joined)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for p in content:
            if not isinstance(p, dict):
                raise malformed(f"{where} holds a {type(p).__name__}, not a content part")
            t = p.get("text")
            if t is not None and not isinstance(t, str):
                raise malformed(f"{where} part text is {type(t).__name__}")
            out.append(t or "")
        return "".join(out)
    raise malformed(f"{where} is {type(content).__name__}, not a string")


def finish(v: Any, where: str) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise malformed(f"{where} is {type(v).__name__}")


def checked(
    texts: list[str | None],
    reasons: list[str | None],
    ins: Any,
    outs: Any,
    seen: list[bool] | None = None,
    details: tuple[Any, Any, Any, Any] = (None, None, None, None),
    called: list[bool] | None = None,
) -> Completion:
    """The final check every provider's parse ends with: null text only with a reason that explains it, or
    with tool calls (`called`: Gemini's OpenAI-compatible endpoint ends a turn of calls with finish_reason
    "stop", https://github.com/open-webui/computer/issues/224). Choices not `seen` (a server that ignored
    `n`) stay (None, None) for the scheduler to send again."""
    if None in texts:  # (each text is a str or None: an answer with every text skips the loop)
        for i, (t, r) in enumerate(zip(texts, reasons, strict=True)):
            if seen is not None and not seen[i]:
                continue
            if t is None and r not in NO_TEXT_OK and not (called and called[i]):
                raise malformed(f"choice {i} has no text (finish_reason={r!r})")
    cached, writes, reasoning, cost = details
    return Completion(
        texts=texts,
        input_tokens=tokens(ins),
        output_tokens=tokens(outs),
        finish_reasons=reasons,
        cached_input_tokens=tokens(cached),
        cache_write_tokens=tokens(writes),
        reasoning_tokens=tokens(reasoning),
        reported_cost=cost
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0
        else None,
    )


def _sub(d: Any, key: str, field: str) -> Any:
    v = d.get(key)
    return v.get(field) if isinstance(v, dict) else None


def openai_usage(usage: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """(cached input, cache writes, reasoning, reported cost) of an OpenAI-format usage object:
    OpenAI's prompt_tokens_details.cached_tokens and .cache_write_tokens (parts of prompt_tokens) and
    completion_tokens_details.reasoning_tokens (https://platform.openai.com/docs/api-reference/chat/object);
    DeepSeek's prompt_cache_hit_tokens (api-docs.deepseek.com/guides/kv_cache); litellm's Anthropic
    cache_creation_input_tokens; OpenRouter's usage.cost (openrouter.ai/docs/use-cases/usage-accounting);
    xAI's cost_in_usd_ticks, 1e10 ticks a dollar (docs.x.ai/developers/cost-tracking)."""
    got = usage.get("prompt_tokens_details")
    details = got if isinstance(got, dict) else _NONE
    cached = details.get("cached_tokens")
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")
    writes = details.get("cache_write_tokens")
    if writes is None:
        writes = usage.get("cache_creation_input_tokens")
    cost = usage.get("cost")
    if cost is None:
        ticks = usage.get("cost_in_usd_ticks")
        if isinstance(ticks, int) and not isinstance(ticks, bool) and ticks >= 0:
            cost = ticks / 1e10
    got = usage.get("completion_tokens_details")
    return cached, writes, got.get("reasoning_tokens") if isinstance(got, dict) else None, cost


_NONE: dict[str, Any] = {}
"""An absent details object (read, never written)."""


def output_billed(model: Any, ins: Any, outs: Any, reasoning: Any, total: Any) -> Any:
    """The output tokens a call is billed for, cross-checked against `total_tokens`.

    input + output must add up to the total. xAI counts reasoning outside `completion_tokens` (total =
    prompt + completion + reasoning) and bills it as output (docs.x.ai consumption and rate limits), so
    there the output is completion + reasoning. Any other surplus is billed as output too (a provider
    bills the total; Gemini bills unreported thoughts at the output rate) and said once per model."""
    i, o, r, t = tokens(ins), tokens(outs), tokens(reasoning), tokens(total)
    if i is None or o is None or t is None or i + o == t:
        return outs
    if r and i + o + r == t:
        return o + r
    if model not in _UNEVEN:
        _UNEVEN.add(model)
        log.warning(
            "model %s: usage does not add up (prompt %d + completion %d%s != total_tokens %d); %s",
            model or "(unnamed)", i, o, f" + reasoning {r}" if r else "", t,
            f"the {t - i - o:,} tokens beyond are billed as output" if t > i + o else "billed as its parts",
        )
    return max(o, t - i)


_UNEVEN: set[Any] = set()
"""Models already warned about (one warning each per process)."""


def server_error(body: dict[str, Any]) -> str | None:
    """The message of an error object a server put in a 200 (`{"error": {"message": ...}}`, a bare
    string, or vLLM's own `{"object": "error", "message", "type", "code"}`), cut to a snippet; None when
    the body holds none."""
    err = body.get("error")
    if err is None and body.get("object") == "error" and body.get("message"):  # vLLM's ErrorResponse
        code = body.get("code") or body.get("type")
        return f"{body['message']}{f' ({code})' if code else ''}"[:300]
    if isinstance(err, dict):
        msg, code = err.get("message"), err.get("code") or err.get("type")
        said = " ".join(str(x) for x in (msg, f"({code})" if code else None) if x)
        return said[:300] or str(err)[:300]
    return str(err)[:300] if err else None


FLOODS = [0]
"""Answers seen with more choices than requested (one warning, then every 1,000th)."""


def flooded(body: dict[str, Any], choices: list[Any], n: int) -> list[Any]:
    """A server that sent more choices than the `n` asked (one seen sending 50,000 for n=1): keep the
    first `n`. Its usage is billed as reported, all of it: the provider charges what it generated, and
    billing a share would let a --max-cost ceiling under-count real spend (the warning says so)."""
    FLOODS[0] += 1
    if FLOODS[0] % 1000 == 1:
        usage = body.get("usage")
        outs = tokens(usage.get("completion_tokens")) if isinstance(usage, dict) else None
        billed = f"all {outs:,} output tokens it reported" if outs is not None else "the usage it reported"
        log.warning("the server sent %d choices for n=%d (%d such answers so far): keeping the first %d; "
                    "the row bills %s, for every choice sent", len(choices), n, FLOODS[0], n, billed)
    return choices[:n]


Choices = tuple[list[str | None], list[str | None], list[list[dict[str, Any]] | None], list[bool] | None]
"""An answer's choices read: texts, finish reasons, tool calls (empty: none), which were seen (None: all)."""


def _one(choices: list[Any]) -> Choices | None:
    """The usual answer read at once: one choice, its content a string, no tool calls, its finish reason
    a string or null. None for any other (`_each` checks it field by field, to the same outcome)."""
    ch = choices[0]
    msg = ch.get("message") if type(ch) is dict else None
    text = msg.get("content") if type(msg) is dict else None
    if type(text) is not str or msg.get("tool_calls") is not None:  # type: ignore[union-attr]
        return None
    why = ch.get("finish_reason")
    return ([text], [why], [], None) if why is None or type(why) is str else None


def _each(choices: list[Any], n: int) -> Choices:
    texts: list[str | None] = [None] * n
    reasons: list[str | None] = [None] * n
    tool_calls: list[list[dict[str, Any]] | None] = []
    seen = [False] * n
    for i, ch in enumerate(choices):
        if not isinstance(ch, dict):
            raise malformed(f"choices[{i}] is {type(ch).__name__}, not an object")
        idx = ch.get("index", i)
        if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n or seen[idx]:
            idx = i
        if idx >= n:
            break
        msg = ch.get("message")
        if msg is None:
            msg = {}
        if not isinstance(msg, dict):
            raise malformed(f"choices[{i}].message is {type(msg).__name__}, not an object")
        text = msg.get("content")  # (a string: the usual answer, no call and no f-string for its check)
        texts[idx] = text if type(text) is str else content_text(text, f"choices[{i}].message.content")
        calls = msg.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
                raise malformed(f"choices[{i}].message.tool_calls is not a list of objects")
            tool_calls = tool_calls or [None] * n
            tool_calls[idx] = calls
        why = ch.get("finish_reason")
        reasons[idx] = why if type(why) is str else finish(why, f"choices[{i}].finish_reason")
        seen[idx] = True
    if not any(seen):
        raise ProviderError(f"response has {len(choices)} choices, {n} requested", retryable=True)
    return texts, reasons, tool_calls, seen


def openai_chat(body: Any, n: int) -> Completion:
    """A decoded chat.completion body with `n` requested choices."""
    if not isinstance(body, dict):
        raise malformed(f"body is {type(body).__name__}, not an object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        said = server_error(body)
        raise malformed(f"an HTTP 200 carrying an error: {said}" if said else "no choices")
    if len(choices) > n:
        choices = flooded(body, choices, n)
    texts, reasons, tool_calls, seen = (n == 1 and _one(choices)) or _each(choices, n)
    usage = body.get("usage")
    if not isinstance(usage, dict):
        usage = _NONE
    details = openai_usage(usage)
    ins = tokens(usage.get("prompt_tokens"))  # each count read once (`checked` keeps an int as it is)
    outs = output_billed(body.get("model"), ins, usage.get("completion_tokens"), details[2], usage.get("total_tokens"))
    done = checked(texts, reasons, ins, outs, seen, details, [c is not None for c in tool_calls] if tool_calls else None)
    done.tool_calls = tool_calls
    return done


def anthropic_message(body: Any) -> Completion:
    """A Messages response: text blocks joined; `tool_use` blocks as OpenAI-shaped `tool_calls` (so a
    suite reads one spelling whatever the provider); thinking blocks left out of the text (those of a turn
    that called tools go with its first call: THINKING_FIELD)."""
    if not isinstance(body, dict) or not isinstance(body.get("content"), list):
        raise malformed(f"Messages body without a content list: {str(body)[:120]}")
    texts = []
    calls: list[dict[str, Any]] = []
    thinking = [b for b in body["content"] if isinstance(b, dict) and b.get("type") in THINKING_BLOCKS]
    for i, b in enumerate(body["content"]):
        if not isinstance(b, dict):
            raise malformed(f"content[{i}] is {type(b).__name__}, not a block")
        if b.get("type") == "text":
            t = b.get("text")
            if not isinstance(t, str):
                raise malformed(f"content[{i}].text is {type(t).__name__}, not a string")
            texts.append(t)
        elif b.get("type") == "tool_use":
            calls.append(tool_use_call(b, i))
    usage = body.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    reason = finish(body.get("stop_reason"), "stop_reason")
    # Anthropic's input_tokens leaves out the cached prefix read and the one written
    # (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#tracking-cache-performance):
    # our input_tokens counts all input, as OpenAI's prompt_tokens does, with the two parts named.
    read, write = (
        tokens(usage.get("cache_read_input_tokens")),
        tokens(usage.get("cache_creation_input_tokens")),
    )
    ins = tokens(usage.get("input_tokens"))
    if ins is not None:
        ins += (read or 0) + (write or 0)
    done = checked(
        ["".join(texts) if texts else None],
        [reason],
        ins,
        usage.get("output_tokens"),
        details=(read, write, None, None),
    )
    if calls:
        if thinking:  # sent back before the turn's tool_use blocks (providers.anthropic.tool_use_turn)
            calls[0] = {**calls[0], THINKING_FIELD: thinking}
        done.tool_calls = [calls]
    return done


THINKING_BLOCKS = ("thinking", "redacted_thinking")
THINKING_FIELD = "anthropic_thinking"
"""The thinking blocks of a turn that called tools, kept whole (signature included) on its first call: with
extended thinking on, Anthropic refuses a next turn whose assistant turn does not start with them, unmodified
(https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks). A suite
sends a call back with every field it came with (JEEBench: tools.wire_call)."""


def tool_use_call(block: dict[str, Any], i: int) -> dict[str, Any]:
    """A Messages `tool_use` block (id, name, input: an object) as an OpenAI tool call, its arguments
    the input as a JSON string (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/
    implement-tool-use#handling-tool-use-and-tool-result-content-blocks). An input left a string (a
    stream whose input_json_delta pieces do not make JSON: providers.stream) goes as it came, for the
    suite to answer as malformed."""
    name, raw = block.get("name"), block.get("input")
    if not isinstance(name, str):
        raise malformed(f"content[{i}] is a tool_use without a name")
    args = raw if isinstance(raw, str) else json.dumps(raw if raw is not None else {}, ensure_ascii=False)
    return {"id": str(block.get("id") or f"toolu_{i}"), "type": "function",
            "function": {"name": name, "arguments": args}}
