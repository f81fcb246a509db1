"""Every spelling in which a server has been seen to echo a key back: as sent, JSON-escaped (`\\/`,
`\\u00e9`, every character `\\uXXXX`), URL-encoded (either hex case), base64 (alone, inside a basic-auth
pair, URL-safe) and inside a bytes repr. The mock servers paste these into answers; the tests count
what reached disk."""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote


def spellings(key: str) -> dict[str, str]:
    j = json.dumps(key)[1:-1]
    url = quote(key, safe="")
    return {
        "raw": key,
        "json": j,
        "json_slash": j.replace("/", "\\/"),
        "u_every": "".join(f"\\u{ord(c):04x}" for c in key),
        "u_every_upper": "".join(f"\\u{ord(c):04X}" for c in key),
        "url": url,
        "url_lower": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), url),
        "base64": base64.b64encode(key.encode()).decode(),
        "base64_basic": base64.b64encode(b"user:" + key.encode()).decode(),
        "base64_url": base64.urlsafe_b64encode(b"x" + key.encode()).decode(),
        "bytes_repr": repr(j.replace("/", "\\/").encode()),
    }


def echo_all(key: str) -> str:
    """A text echoing `key` in every spelling, one a line."""
    return "\n".join(f"{name}: {s}" for name, s in spellings(key).items())


def leaked(text: str, key: str, run: int = 8) -> list[str]:
    """Runs of `run` characters of `key` (or of a spelling of them) found in `text`: [] when none."""
    found = []
    for name, s in spellings(key).items():
        step = run * 6 if name.startswith("u_every") else run
        found += [f"{name}:{s[i:i + step]}" for i in range(0, len(s) - step + 1) if s[i : i + step] in text]
    return found
