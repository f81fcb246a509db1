"""What a model's rows in a run directory were made with, so a resume never mixes two models' answers
under one name: a model's provider id, provider kind and request settings are recorded in the manifest
(`model_settings`) when it first runs there; a resume whose config changed any of them is refused (exit
2) naming each field, and config.json keeps every earlier snapshot it replaced (`earlier`).

Endpoints, keys, limits and prices are not part of it: the same model served by another endpoint or key
answers the same (its cache entries are shared too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from runner.config import Config, ConfigError

FIELDS = ("model", "provider", "params", "omit", "reasoning_effort", "thinking_budget", "api", "max_output_tokens",
          "path")


def model_settings(m: dict[str, Any]) -> dict[str, Any]:
    """The answer-deciding settings of a model as config.json dumps it (`ModelCfg` + provider)."""
    out = {k: m.get(k) for k in FIELDS}
    out["model"] = m.get("model") or m.get("name")
    out["params"] = dict(m.get("params") or {})
    out["omit"] = sorted(m.get("omit") or [])
    return out


def current(cfg: Config, names: list[str]) -> dict[str, dict[str, Any]]:
    return {m["name"]: model_settings(m) for m in cfg.snapshot(names)["models"]}


def recorded(out: Path, manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per model, the settings its rows in `out` were made with: the manifest's, else (a run directory
    made before they were recorded) those of its config.json."""
    got = manifest.get("model_settings")
    if isinstance(got, dict):
        return got
    try:
        snap = orjson.loads((out / "config.json").read_bytes())
        return {m["name"]: model_settings(m) for m in snap.get("models", []) if isinstance(m, dict)}
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return {}


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """`field: old → new` for each field that differs (params one key at a time)."""
    out = []
    for k in FIELDS:
        a, b = old.get(k), new.get(k)
        if k == "params" and isinstance(a, dict) and isinstance(b, dict):
            out += [f"params.{p}: {a.get(p, '(unset)')!r} → {b.get(p, '(unset)')!r}"
                    for p in sorted(set(a) | set(b)) if a.get(p, "(unset)") != b.get(p, "(unset)")]
        elif a != b:
            out.append(f"{k}: {a!r} → {b!r}")
    return out


def check_models(out: Path, manifest: dict[str, Any], now: dict[str, dict[str, Any]]) -> None:
    """Refuse (ConfigError: exit 2, nothing sent) to resume `out` for a model whose settings changed."""
    then = recorded(out, manifest)
    bad = [(name, c) for name, s in now.items() if name in then for c in [changes(then[name], s)] if c]
    if not bad:
        return
    lines = "\n  ".join(f"{name}: {'; '.join(c)}" for name, c in bad)
    raise ConfigError(
        f"{out} holds rows of {', '.join(repr(n) for n, _ in bad)} made with other model settings than the "
        f"config's now:\n  {lines}\nResuming would mix two models' answers under one name. Restore those "
        f"settings to resume, or start a new run directory (--out {out.parent / (out.name + '-2')}), or give "
        "the changed model a new name."
    )


def check_dir(out: Path, cfg: Config, names: list[str]) -> None:
    """`check_models` for a run directory that may not exist yet (the run and the dry run, before any
    network)."""
    from runner.results import read_manifest

    if (out / "manifest.json").exists():
        check_models(out, read_manifest(out), current(cfg, names))


def keep_earlier(path: Path, snap: dict[str, Any], when: str) -> dict[str, Any]:
    """config.json's new snapshot, with the one it replaces (if it differs) kept under `earlier`: what
    each run of the directory used."""
    try:
        old = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return snap
    if not isinstance(old, dict):
        return snap
    earlier = list(old.pop("earlier", None) or [])
    old.pop("replaced", None)
    if old != snap:
        earlier.append({**old, "replaced": when})
    return {**snap, "earlier": earlier} if earlier else snap
