"""What makes two commands the same run, whatever their paths are called.

A run directory is resumed (or joined with `--join`) only by a command with the same settings. Data
is named by a path (`jsonl:PATH`, `--data-dir`), and hosts that share a run directory often mount the
data elsewhere: a path's spelling is not the data. So a path setting matches when it names the same
data: the same file bytes (SHA-256), or a folder with the same file names and sizes. The manifest
records each path setting's identity when the run is created; a later command whose path differs is
checked against it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

JSONL = "jsonl:"


def spec_fingerprint(spec: Any) -> dict[str, Any]:
    """What must match for a directory to be resumed (the limit and the model list may change);
    `spec` a suites.base.RunSpec."""
    return {
        "suite": spec.suite,
        "options": spec.options,
        "samples": spec.samples,
        "temperature": spec.temperature,
    }


def path_settings(fp: dict[str, Any]) -> dict[str, str]:
    """The settings of a fingerprint that name data on disk: {setting: path}."""
    out: dict[str, str] = {}
    suite = fp.get("suite")
    if isinstance(suite, str) and suite.startswith(JSONL):
        out["suite"] = suite[len(JSONL):]
    for k, v in (fp.get("options") or {}).items():
        if isinstance(v, str) and v and (k.endswith("_dir") or k.endswith("_path") or _names_data(v)):
            out[f"options.{k}"] = v
    return out


def _names_data(v: str) -> bool:
    """An option whose value is a file or folder on disk is data, whatever the option is called."""
    try:
        return len(v) < 4096 and "\n" not in v and Path(v).exists()
    except (OSError, ValueError):
        return False


def data_identity(path: str) -> str | None:
    """SHA-256 of a file's bytes, or of a folder's relative file names and sizes; None if absent."""
    p = Path(path)
    h = hashlib.sha256()
    if p.is_file():
        with p.open("rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        return "file:" + h.hexdigest()
    if p.is_dir():
        for root, dirs, files in os.walk(p):
            dirs.sort()
            for name in sorted(files):
                full = Path(root) / name
                h.update(f"{full.relative_to(p).as_posix()}\x1f{full.stat().st_size}\n".encode())
        return "dir:" + h.hexdigest()
    return None


def identities(fp: dict[str, Any]) -> dict[str, str | None]:
    """What the manifest records beside a new run's spec."""
    return {k: data_identity(v) for k, v in path_settings(fp).items()}


def _without_paths(fp: dict[str, Any]) -> dict[str, Any]:
    out = {**fp, "options": dict(fp.get("options") or {})}
    for k in path_settings(fp):
        if k == "suite":
            out["suite"] = JSONL
        else:
            out["options"].pop(k.split(".", 1)[1], None)
    return out


def differences(old: dict[str, Any], new: dict[str, Any], recorded: dict[str, Any] | None) -> list[str]:
    """The settings in which `new` is another run than `old`, one phrase each ([] = the same run).
    A path setting spelled differently is the same when its data's identity is the recorded one (or,
    for runs made before identities were recorded, the old path's, where this host can read it)."""
    out: list[str] = []
    a, b = _without_paths(old), _without_paths(new)
    for k in sorted(set(a) | set(b)):
        if k == "options":
            continue
        if a.get(k) != b.get(k):
            out.append(f"{k}: {a.get(k)!r} (this command: {b.get(k)!r})")
    oa, ob = a["options"], b["options"]
    for k in sorted(set(oa) | set(ob)):
        if oa.get(k) != ob.get(k):
            out.append(f"--{k.replace('_', '-')}: {oa.get(k)!r} (this command: {ob.get(k)!r})")
    pa, pb = path_settings(old), path_settings(new)
    for k in sorted(set(pa) | set(pb)):
        if pa.get(k) == pb.get(k):  # the same path: its content must still be what the run was made from
            want = (recorded or {}).get(k)
            got = data_identity(pb[k]) if want is not None else None
            if want is not None and got is not None and got != want:
                out.append(f"{k}: {pb[k]!r} was edited since this run began (its content is not the data "
                           "the run's rows were made from)")
            continue
        if k in pa and k in pb:
            want = (recorded or {}).get(k) or data_identity(pa[k])
            got = data_identity(pb[k])
            if want is not None and want == got:
                continue
        out.append(f"{k}: {pa.get(k)!r} (this command: {pb.get(k)!r}; not the same data)")
    return out
