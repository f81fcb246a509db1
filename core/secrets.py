"""Secrets out of everything we print or store: server echoes, URLs and header values.

Keys live in environment variables and reach only the lanes; but a key can come back inside a server's
answer (whole, cut short, JSON-escaped as `\\uXXXX` or `\\/`, or URL-escaped), and a password or key
can ride inside a URL (`user:PASS@host`, `?password=`, `?key=`, a path segment). Both are redacted
before anything is cut, printed, logged or written.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import quote

REDACTED = "[redacted]"
SECRET_PARAMS = re.compile(
    r"(pass|passwd|pwd|passphrase|password|key|token|auth|authorization|secret|sig|signature|credentials?)$",
    re.IGNORECASE,
)
"""A query parameter whose value is a secret: any name ENDING in one of these words (access_key,
private_token, session_token, X-Amz-Signature, subscription-key, X-Amz-Credential, sslpassword,
client_secret, code-signature...), whatever its prefix and separators."""


@lru_cache(maxsize=256)
def _forms(secret: str) -> tuple[str, ...]:
    """The ways a server may echo a secret: as sent, JSON-escaped (non-ASCII as \\uXXXX, / as \\/, or
    every character as \\uXXXX), URL-escaped (either hex case), base64 (standard and URL-safe, at any
    byte offset of a longer encoded string), and inside a Python bytes repr. Cached: every answer is
    scrubbed with the same few keys (the hot path)."""
    j = json.dumps(secret)[1:-1]
    every = "".join(f"\\u{ord(c):04x}" for c in secret)
    url = quote(secret, safe="")
    out = {secret, j, json.dumps(secret, ensure_ascii=False)[1:-1], j.replace("/", "\\/"),
           secret.replace("/", "\\/"), url, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), url),
           every, every.upper().replace("\\U", "\\u"), repr(secret.encode())[2:-1],
           repr(j.replace("/", "\\/").encode())[2:-1], *_base64(secret)}
    return tuple(sorted((f for f in out if len(f) >= 8), key=len, reverse=True))


@lru_cache(maxsize=256)
def _ends(secret: str) -> tuple[tuple[str, str], ...]:
    """Per spelling, how its first and last 8 characters of the key read: what a cut-short echo still
    shows (a `\\uXXXX` spelling takes 6 characters a character, so its ends are 48 long)."""
    out = []
    for f in _forms(secret):
        w = 48 if f.startswith("\\u") and f[6:8] == "\\u" else 8
        out.append((f[:w], f[-w:]))
    return tuple(dict.fromkeys(out))


def _base64(secret: str) -> list[str]:
    """The part of a base64 text that spells `secret` whatever its offset in the encoded bytes (a
    `user:key` basic-auth header, a token inside an encoded JSON blob): three alignments, each cut to
    the characters that depend on the secret's bytes alone."""
    raw, out = secret.encode(), []
    for pad in range(3):
        enc = base64.b64encode(b"\0" * pad + raw).decode().rstrip("=")
        head = -(-pad * 4 // 3)  # characters touched by the padding bytes
        tail = len(enc) if (pad + len(raw)) % 3 == 0 else len(enc) - 1  # last, partial character
        core = enc[head:tail]
        out += [core, core.replace("+", "-").replace("/", "_")]
    return out


@lru_cache(maxsize=256)
def _marks(secret: str) -> tuple[str, ...]:
    """Every distinct start and end of a spelling: a text holding none of them holds no spelling, whole
    or cut (one pass of a few substring searches on the hot path)."""
    return tuple(dict.fromkeys(m for pair in _ends(secret) for m in pair))


def scrub(text: str, secrets: Any) -> str:
    """Remove every secret from a server's text, whole or cut short, BEFORE anything truncates it.

    A key echoed in an error body and then cut to a snippet would survive a plain replace of the
    whole key, so runs of 8+ characters of a key's start or end are redacted too."""
    if isinstance(secrets, str):
        secrets = (secrets,)
    for s in secrets or ():
        if not s or len(s) < 8:
            continue
        for m in _marks(s):
            if m in text:
                break
        else:  # the common case: no spelling starts or ends here (~0.5 ns a character a mark)
            continue
        for f in _forms(s):
            if f in text:
                text = text.replace(f, REDACTED)
        for head, tail in _ends(s):
            if head in text:
                text = re.sub(re.escape(head) + r"[\w\-.\\/%+=]*", REDACTED, text)
            if tail in text:
                text = re.sub(r"[\w\-.\\/%+=]*" + re.escape(tail), REDACTED, text)
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
        return m.group(0) if not SECRET_PARAMS.search(name) else f"{m.group(1)}{name}=***"

    url = re.sub(r"([?&;])([^=&;#]+)=([^&;#]*)", param, url)
    given = [s for s in secrets if s]
    for s in [v for u in given if "://" in u for v in url_secrets(u)] + given:
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


def url_secrets(url: str) -> list[str]:
    """The secret parts of a URL (its userinfo password, the values of secret-named query parameters):
    what a library's error message may quote on its own, without the URL around it."""
    from urllib.parse import unquote

    out = [m.group(1) for m in re.finditer(r"://[^:/@?#]*:([^@/?#]+)@", url)]
    out += [m.group(2) for m in re.finditer(r"[?&;]([^=&;#]+)=([^&;#]+)", url) if SECRET_PARAMS.search(m.group(1))]
    return [x for v in out for x in dict.fromkeys((v, unquote(v)))]
