"""Secrets out of everything we print or store: server echoes, URLs and header values.

Keys live in environment variables and reach only the lanes; but a key can come back inside a server's
answer (whole, cut short, JSON-escaped as `\\uXXXX` or `\\/`, or URL-escaped), and a password or key
can ride inside a URL (`user:PASS@host`, `?password=`, `?key=`, a path segment). Both are redacted
before anything is cut, printed, logged or written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import quote

REDACTED = "[redacted]"
SECRET_PARAMS = re.compile(
    r"^(password|passwd|pass|pwd|key|api[-_]?key|apikey|access[-_]?token|token|auth|secret|sig|signature"
    r"|client[-_]?secret|x-api-key)$",
    re.IGNORECASE,
)


@lru_cache(maxsize=256)
def _forms(secret: str) -> tuple[str, ...]:
    """The ways a server may echo a secret: as sent, JSON-escaped (non-ASCII as \\uXXXX, / as \\/), and
    URL-escaped. Cached: every answer is scrubbed with the same few keys (the hot path)."""
    out = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
           json.dumps(secret)[1:-1].replace("/", "\\/"), secret.replace("/", "\\/"), quote(secret, safe="")}
    return tuple(sorted(out, key=len, reverse=True))


def scrub(text: str, secrets: Any) -> str:
    """Remove every secret from a server's text, whole or cut short, BEFORE anything truncates it.

    A key echoed in an error body and then cut to a snippet would survive a plain replace of the
    whole key, so runs of 8+ characters of a key's start or end are redacted too."""
    if isinstance(secrets, str):
        secrets = (secrets,)
    for s in secrets or ():
        if not s or len(s) < 8:
            continue
        for f in _forms(s):
            if f in text:
                text = text.replace(f, REDACTED)
        for f in _forms(s):
            if f[:8] in text:
                text = re.sub(re.escape(f[:8]) + r"[A-Za-z0-9_\-.\\/%]*", REDACTED, text)
            if f[-8:] in text:
                text = re.sub(r"[A-Za-z0-9_\-.\\/%]*" + re.escape(f[-8:]), REDACTED, text)
    return text


def header_secrets(headers: dict[str, str]) -> list[str]:
    """The secret values of a request's headers (bearer tokens, API-key headers)."""
    out = []
    for k, v in headers.items():
        kl = k.lower()
        if kl == "authorization":
            out.append(v.split(" ", 1)[-1])
        elif "key" in kl or "token" in kl or "secret" in kl:
            out.append(v)
    return out


def redact_url(url: str, secrets: Iterable[str | None] = ()) -> str:
    """A URL fit for a log line or a run directory: the userinfo's password, the values of query
    parameters that name a secret (password, key, api_key, token...), and any path segment or value
    equal to one of `secrets`, replaced by ***."""
    url = re.sub(r"(://[^:/@?#]*:)[^@/?#]*@", r"\1***@", url)
    url = re.sub(r"(://)([^:/@?#]{16,})@", r"\1***@", url)  # a bare token as the userinfo

    def param(m: re.Match[str]) -> str:
        name = m.group(2)
        return m.group(0) if not SECRET_PARAMS.match(name) else f"{m.group(1)}{name}=***"

    url = re.sub(r"([?&;])([^=&;#]+)=([^&;#]*)", param, url)
    for s in secrets:
        if s and len(s) >= 4:
            for f in _forms(s):
                url = url.replace(f, "***")
    return url


def bad_key_chars(value: str) -> str | None:
    """What makes an API key unusable in a header (whitespace, a newline, control characters): said at
    start, naming its variable, instead of failing every call."""
    for ch in value:
        if ch.isspace() or ord(ch) < 32 or ord(ch) == 127:
            return {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", " ": "a space"}.get(
                ch, f"the control character U+{ord(ch):04X}"
            )
    return None
