"""Reading a refusal the way an engineer does: against the request it refused.

Providers word refusals in ways nobody has collected yet, but a refusal about a field names that field,
and the field is one the refused request carried. So the reader lists the request's fields (top level
and nested, as sent) and looks for each in the provider's words, in any spelling (snake_case or
camelCase, quoted, backticked or bare, a provider's own name for it, or the words people use for it),
after the structured places providers put it (OpenAI `param`, Google `fieldViolations`, FastAPI/Pydantic
`detail[].loc`). What the words say of the field's value follows: listed values, a numeric bound, a
replacement. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

CONTENT = frozenset({"model", "messages", "input", "contents", "system", "system_instruction",
                     "systemInstruction", "stream", "prompt", "tools", "tool_choice", "stream_options"})
"""Fields a request cannot go without (or that carry the suite's content): never suspects."""
LIMIT_NAMES = ("max_tokens", "max_completion_tokens", "max_output_tokens", "max_new_tokens",
               "maxOutputTokens", "num_predict")
"""The answer's token limit, as the APIs name it: renamed among each other, clamped, never dropped."""
COUNTERPART = {"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens",
               "max_output_tokens": "max_tokens", "max_new_tokens": "max_tokens",
               "maxOutputTokens": "max_tokens", "num_predict": "max_tokens"}
"""The other name to send a refused limit as, when the provider names none."""

EQUIVALENT = {  # a provider's own name (normalised) -> the OpenAI-format field we send
    "stopsequences": "stop", "candidatecount": "n", "maxoutputtokens": "max_tokens",
    "responsemimetype": "response_format", "responseschema": "response_format",
    "thinkinglevel": "reasoning_effort", "budgettokens": "thinking.budget_tokens",
    "presencepenalty": "presence_penalty", "frequencypenalty": "frequency_penalty", "topp": "top_p",
    "topk": "top_k", "responselogprobs": "logprobs", "numpredict": "max_tokens", "maxnewtokens": "max_tokens",
}
PHRASES = [  # the words people use for a field -> the fields it may be (the first the request carried)
    (re.compile(r"multiple candidates|candidate ?count|only one candidate|more than one (?:choice|completion|candidate)|"
                r"multiple (?:choices|completions)|\bn\s*(?:>|>=|greater than)\s*1\b|number of completions|"
                r"(?:^|[\s(])n\s*(?::|must\b|is\b|should\b|=)|parameter n\b", re.I),
     ("n",)),
    (re.compile(r"json (?:output|mode|object|schema)|structured outputs?|response format", re.I),
     ("response_format",)),
    (re.compile(r"log ?probs|log probabilities", re.I), ("logprobs", "top_logprobs")),
    (re.compile(r"stop sequences?", re.I), ("stop",)),
    (re.compile(r"(?:thinking|reasoning) budget|\bbudget\b", re.I),
     ("thinking.budget_tokens", "extra_body.google.thinking_config.thinking_budget", "reasoning.max_tokens")),
    (re.compile(r"\beffort\b", re.I), ("reasoning_effort", "reasoning.effort", "output_config.effort")),
    (re.compile(r"\bthinking\b|\breasoning\b", re.I),
     ("thinking", "think", "reasoning_effort", "reasoning", "chat_template_kwargs", "extra_body")),
    (re.compile(r"\bseed\b", re.I), ("seed",)),
    (re.compile(r"penalt", re.I), ("presence_penalty", "frequency_penalty", "repetition_penalty")),
    (re.compile(r"\bstore\b|storing", re.I), ("store",)),
]
REFUSING = re.compile(
    r"not (?:be )?supported|unsupported|(?:does|do|is) not (?:support|accept|allow)|doesn't support|"
    r"unknown|unrecogni[sz]ed|not recogni[sz]ed|not (?:allowed|permitted|enabled|available|valid|a valid)|"
    r"extra (?:inputs|fields)|forbidden|invalid|cannot|can't|must|should|exceed|greater than|less than|"
    r"maximum|at most|range|deprecated|\bonly\b|no longer|not compatible|incompatible|expected", re.I)

CONDITION = re.compile(r"\b(?:when|while|if|whenever|unless)\s+(?:the\s+)?[`'\"]?$", re.I)
"""Words before a field that make it the refusal's condition, not its subject ("Json mode response is not
supported when enable_thinking is true": the json mode is what to give up, the thinking is what we asked for)."""


@dataclass(frozen=True)
class Finding:
    field: str
    """The field as the request carried it (`top_p`, `reasoning.effort`, `max_tokens`)."""
    how: str
    """structured | quoted | named | phrase: how sure the reader is, most first."""


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _norm(name: str) -> str:
    """A name in any spelling, for comparison: `stopSequences`, `stop_sequences` -> `stopsequences`."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def fields_of(body: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Every field the request carried, as a dotted path (nested objects too), content left out."""
    for k, v in body.items():
        if not prefix and k in CONTENT:
            continue
        path = f"{prefix}{k}"
        yield path
        if isinstance(v, dict):
            yield from fields_of(v, path + ".")


def spellings(path: str) -> set[str]:
    """The ways a message may write a field: the path and its last part, snake and camel."""
    out = set()
    for p in (path, path.rsplit(".", 1)[-1]):
        out |= {p, _snake(p), _camel(_snake(p)), p.replace(".", "_")}
    return {s for s in out if s}


def _resolve(name: str, sent: list[str]) -> str | None:
    """The request field a provider's name for it means: itself in any spelling, its last part, or the
    provider's equivalent (`generationConfig.stopSequences` -> `stop`)."""
    names = [name, *name.split(".")[::-1]]
    for n in names:
        k = _norm(n)
        for f in sent:
            if k in (_norm(f), _norm(f.rsplit(".", 1)[-1])):
                return f
        eq = EQUIVALENT.get(k)
        if eq is not None:
            if eq in sent:
                return eq
            if eq == "max_tokens":
                lim = next((f for f in sent if f in LIMIT_NAMES), None)
                if lim is not None:
                    return lim
    return None


def structured(doc: Any) -> list[str]:
    """Field names a provider put in its error's structured places (any nesting)."""
    out: list[str] = []
    if isinstance(doc, list):
        for x in doc:
            out += structured(x)
        return out
    if not isinstance(doc, dict):
        return out
    for k in ("param", "field"):
        if isinstance(doc.get(k), str):
            out.append(doc[k])
    loc = doc.get("loc")
    if isinstance(loc, list) and loc:
        parts = [str(x) for x in loc if x != "body" and not isinstance(x, int)]
        if parts:
            out.append(".".join(parts))
    for k in ("error", "detail", "details", "fieldViolations", "field_violations", "errors"):
        if isinstance(doc.get(k), dict | list):
            out += structured(doc[k])
    return out


def suspects(msg: str, doc: Any, request: dict[str, Any]) -> list[Finding]:
    """The request's fields the refusal names, surest first: its structured fields, then a field
    quoted or backticked in the words, then one named bare next to refusing words, then one the words
    call by another name ("does not support Json Output")."""
    sent = [f for f in fields_of(request)]
    found: dict[str, Finding] = {}

    def add(field: str | None, how: str) -> None:
        if field is not None and field.split(".", 1)[0] not in CONTENT and field not in found:
            found[field] = Finding(field, how)

    for name in structured(doc):
        add(_resolve(name, sent), "structured")
    for q in re.findall(r"[`'\"\u2018\u2019\u201c\u201d]([A-Za-z_][\w.\[\]-]*)[`'\"\u2018\u2019\u201c\u201d]", msg):
        add(_resolve(q.replace("[", ".").replace("]", ""), sent), "quoted")
    refusing = [m.span() for m in REFUSING.finditer(msg)]
    if refusing:
        for f in sorted(sent, key=len, reverse=True):
            for s in sorted(spellings(f), key=len, reverse=True):
                if s == "n":  # the letter alone is read by PHRASES only
                    continue
                for m in re.finditer(rf"(?<![\w.]){re.escape(s)}(?![\w])", msg, re.I if len(s) > 3 else 0):
                    if any(abs(m.start() - a) < 80 or abs(m.end() - b) < 80 for a, b in refusing):
                        add(f, "condition" if CONDITION.search(msg[:m.start()]) else "named")
                        break
    for pat, cands in PHRASES:
        if pat.search(msg):
            add(next((c for c in cands if c in sent or any(f.startswith(c + ".") for f in sent)), None), "phrase")
    order = {"structured": 0, "quoted": 1, "named": 2, "phrase": 3, "condition": 4}
    return sorted(found.values(), key=lambda x: order[x.how])


_NUM = r"(-?\d[\d,]*(?:\.\d+)?)"
_UPPER = [
    re.compile(rf"range of \S+ (?:is|should be|must be)?\s*\[\s*{_NUM}\s*,\s*{_NUM}\s*\]", re.I),  # [lo, hi]
    re.compile(rf"between {_NUM} and {_NUM}", re.I),
    re.compile(rf"{_NUM}\s*>\s*{_NUM},? which is the maximum", re.I),  # "8192 > 4096, which is the max"
]
_MAX = re.compile(rf"(?:maximum(?: value| allowed| is| of)*|at most|less than or equal to|<=|must not exceed|"
                  rf"cannot exceed|cannot be greater than|up to|no more than|limit(?: is| of)?|max(?:imum)? is)"
                  rf"\D{{0,40}}?{_NUM}", re.I)
_MIN = re.compile(rf"(?:at least|greater than or equal to|>=|minimum(?: value| is| of)*|no less than)\D{{0,40}}?{_NUM}",
                  re.I)


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def bounds(msg: str) -> tuple[float | None, float | None]:
    """(lowest, highest) values the words allow, where they state any."""
    for i, pat in enumerate(_UPPER):
        if m := pat.search(msg):
            a, b = _num(m.group(1)), _num(m.group(2))
            return (a, b) if i < 2 else (None, b)
    hi = _MAX.search(msg)
    lo = _MIN.search(msg)
    return (_num(lo.group(1)) if lo else None), (_num(hi.group(1)) if hi else None)


_LISTED = re.compile(r"(?:one of|supported values(?: are)?|allowed values(?: are)?|valid values(?: are)?|"
                     r"must be|should be|expected|permitted values|options are|supports? only|only supports?)"
                     r"\s*:?\s*(.{0,200})", re.I | re.S)
_VALUE = re.compile(r"[`'\"\u2018\u2019]([\w.-]+)[`'\"\u2018\u2019]")


def listed(msg: str) -> tuple[str, ...]:
    """The values the words offer ("must be one of `none` or `default`", "Supported values are: 'low',
    'high'"), in order, once each."""
    out: list[str] = []
    for m in _LISTED.finditer(msg):
        for v in _VALUE.findall(m.group(1)):
            if v not in out:
                out.append(v)
    return tuple(out)


def replacement(msg: str, field: str, sent: list[str]) -> str | None:
    """A field the words suggest instead ("Use 'max_completion_tokens' instead", "please use X")."""
    m = re.search(r"(?:use|try|replace (?:it )?with|instead(?: use)?|in favou?r of)\s+[`'\"]?([A-Za-z_][\w.]*)[`'\"]?",
                  msg, re.I)
    if m and _norm(m.group(1)) != _norm(field) and m.group(1).lower() not in ("the", "a", "an", "it", "this"):
        return m.group(1)
    return None


def value_of(request: dict[str, Any], path: str) -> Any:
    cur: Any = request
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur
