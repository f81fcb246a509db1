"""`evalsweep cache stats|prune`: what the response cache holds (a table with dates; `--json` for
scripts) and dropping entries by age, model or all."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from runner.config import ConfigError, load_config, redact_url

EXIT_OK = 0


def _when(t: Any) -> str:
    if t is None:
        return "-"
    dt = t if isinstance(t, datetime) else datetime.fromtimestamp(float(t), UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _size(n: int | None) -> str:
    n = n or 0
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def print_stats(out: dict[str, Any]) -> None:
    """One table per layer (local, shared): entries per model, then size and the oldest/newest entry."""
    from rich.table import Table

    from core.term import console

    layers = [("local cache " + out["directory"], out)]
    if "shared" in out and "error" not in out["shared"]:
        layers.append(("shared cache " + out["shared"]["url"], out["shared"]))
    con = console()
    for title, st in layers:
        t = Table(title=title, title_justify="left")
        t.add_column("model", overflow="fold")
        t.add_column("entries", justify="right")
        for m, n in sorted(st["per_model"].items()):
            t.add_row(m, f"{n:,}")
        t.add_row("total", f"{st['entries']:,}", style="bold")
        con.print(t)
        con.print(
            f"{_size(st['bytes'])}; oldest entry {_when(st['oldest'])}, newest {_when(st['newest'])}",
            highlight=False,
        )


def cmd_cache(argv: list[str]) -> int:
    from cache.disk import prune, stats
    from cache.store import default_cache_dir
    from runner.config import shared_urls

    p = argparse.ArgumentParser(prog="evalsweep cache", description="Inspect or prune the response cache.")
    sub = p.add_subparsers(dest="action", required=True)
    s = sub.add_parser("stats", help="what the cache holds, per model, with dates")
    s.add_argument("--cache-dir", type=Path, help="default $EVALSWEEP_CACHE_DIR or ~/.cache/evalsweep")
    s.add_argument("--config", help="for [shared] cache_url (or set EVALSWEEP_CACHE_URL)")
    s.add_argument("--json", action="store_true", help="machine-readable (epoch timestamps, bytes)")
    pr = sub.add_parser("prune", help="drop entries by age, model or all")
    pr.add_argument("--cache-dir", type=Path, help="default $EVALSWEEP_CACHE_DIR or ~/.cache/evalsweep")
    pr.add_argument("--config", help="for [shared] cache_url (or set EVALSWEEP_CACHE_URL)")
    pr.add_argument("--older-than", type=float, metavar="DAYS", help="drop entries written more than DAYS ago")
    pr.add_argument("--model", help="provider model id whose entries to drop")
    pr.add_argument("--all", action="store_true", help="drop every entry")
    a = p.parse_args(argv)
    d = a.cache_dir or default_cache_dir()
    url = shared_urls(load_config(a.config)).cache_url
    if a.action == "stats":
        out = stats(d)
        if url:
            out["shared"] = _shared(url, "stats", lambda: _pg().stats(url))
        if a.json:
            print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
        else:
            print_stats(out)
        return EXIT_OK
    if a.older_than is None and a.model is None and not a.all:
        raise ConfigError("cache prune: say what to drop: --older-than DAYS, --model ID or --all")
    how = {"older_than_days": a.older_than, "model": a.model, "everything": a.all}
    print(f"removed {prune(d, **how)} entries from {d}")
    if a.all:  # what providers' refusals taught lives beside the answers: cleared with them
        from runner.calls.learned import forget

        print(f"removed {forget(d)} learned request rules from {d}/learned")
    if url:
        n = _shared(url, "prune", lambda: _pg().prune(url, **how))
        if isinstance(n, int):
            print(f"removed {n} entries from the shared cache {redact_url(url)}")
        else:
            return 1
    return EXIT_OK


def _pg() -> Any:
    from cache import pg

    return pg


def _shared(url: str, what: str, fn: Any) -> Any:
    """The shared layer's part, or one line saying it could not be reached (never a traceback)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - psycopg's errors: the server is down or refuses us
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        msg = f"shared cache {redact_url(url)} unreachable: {redact_url(why, [url])}"
        print(f"evalsweep: cache {what}: {msg}", file=sys.stderr)
        return {"url": redact_url(url), "error": msg}
