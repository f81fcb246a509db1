"""One experiment's scores.json extras read across its run directories: the protocol's deviations as
sentences (every directory's, the request-shaping table merged) and every directory's suite tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def deviations_of(protocol: Any) -> list[str]:
    """scores.json `protocol: {"deviations": [...]}` as sentences (absent in older run dirs: [])."""
    devs = protocol.get("deviations") if isinstance(protocol, dict) else None
    if not isinstance(devs, list):
        return []
    out = []
    for d in devs:
        if isinstance(d, dict):
            text = d.get("text") or d.get("message") or d.get("what") or d.get("deviation")
            d = text if isinstance(text, str) else "; ".join(f"{k}: {x}" for k, x in d.items())
        if d:
            out.append(str(d))
    return out


def merge_extra(into: dict[str, Any], new: dict[str, Any], dirs: list[Path], d: Path) -> None:
    """One experiment's scores.json extras from several run directories (`dirs`: those merged before `d`):
    every directory's deviations (a per-model one, such as a max_tokens fallback, names its model) and
    every directory's suite tables, each titled with its directory once there are two; the rest is `d`'s."""
    old_proto, tables = into.get("protocol"), into.get("tables")
    old_devs = deviations_of(old_proto)
    into.update(new)
    old_shaping = dict((old_proto or {}).get("request_shaping") or {}) if isinstance(old_proto, dict) else {}
    if dirs and "protocol" in new:
        devs = old_devs + [x for x in deviations_of(new["protocol"]) if x not in old_devs]
        into["protocol"] = {"protocol": "custom" if devs else "paper", "deviations": devs}
        shaping = {**old_shaping, **((new["protocol"] or {}).get("request_shaping") or {})}
        if shaping:
            into["protocol"]["request_shaping"] = shaping
    if dirs and isinstance(tables, list) and isinstance(new.get("tables"), list):
        if len(dirs) == 1:
            tables = _titled(tables, dirs[0])
        into["tables"] = tables + _titled(new["tables"], d)


def _titled(tables: list[Any], d: Path) -> list[dict[str, Any]]:
    return [{**t, "title": f"{t.get('title', '')} (run {d})"} for t in tables if isinstance(t, dict)]
