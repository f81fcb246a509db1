"""What the providers' refusals taught us about each model, applied from the model's next call on and
kept for the next run.

A refusal that names what the model refuses (providers.refusals) changes the model's request shape
for the rest of the run; the refused call, and every call refused in the old shape meanwhile, is sent
again. What was learned is a small JSON file per model (endpoint + provider model id) under the cache
directory's `learned/`, loaded when the next run wires its models, so that run sends the learned shape
from its first call. The cache keys stay those of the configured request: the learned change is the
provider's rule, the same for every call, so an answer already paid for is found again.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from providers.base import ProviderError
from providers.refusals import Refusal, Sent, adapt, read
from runner.atomic import write_json
from runner.pool import ModelEntry

log = logging.getLogger("evalsweep")

MAX_CHANGES = 12
"""Changes one model may learn in a run: past them a refusal is final (no endless adapting)."""
DIR = "learned"
RECHECK_DAYS = 14
"""A rule older than this is re-checked: the next run's first call goes in the configured shape once;
accepted, the rule is forgotten (a transient 400 never removes a field for good); refused, relearned."""


@dataclass
class Learned:
    sent: Sent
    path: Path | None = None
    """The model's file under the cache directory; None: kept for this run only (--no-cache)."""
    changes: list[dict[str, Any]] = field(default_factory=list)
    """Each: the refusal (providers.refusals.Refusal.record), what changed, the date and the status."""
    version: int = 0
    """Changes applied so far: a call refused in an older shape is sent again without learning."""
    refused: int = 0
    """Requests of this run refused and sent again in the new shape (the price of learning)."""
    endpoint: str = ""
    base: Any = None
    """The shape the model's profile gave, before any refusal (providers.shape.departures reads it)."""
    inherited: dict[str, str] = field(default_factory=dict)
    """Changes answers reused from the cache were made with, this run's requests not (said -> date)."""
    rechecking: list[dict[str, Any]] = field(default_factory=list)
    """Rules from earlier runs not applied this run (old, or --relearn): the first accepted call forgets them."""


def endpoint_key(endpoints: list[Any]) -> str:
    """Where a model is served: its endpoints' kinds and base URLs (names are the user's labels)."""
    return ",".join(sorted({f"{e.kind}:{e.base_url or 'default'}" for e in endpoints}))


def path_for(cache_dir: Path, endpoint: str, model_id: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)[:80]
    h = hashlib.sha256(f"{endpoint}\n{model_id}".encode()).hexdigest()[:12]
    return cache_dir / DIR / f"{slug}.{h}.json"


_WARNED: set[tuple[Path, str]] = set()


def load(path: Path) -> dict[str, Any] | None:
    """A model's learned rules; a file that is not what this module writes (corrupt, hand-edited) is
    one warning naming it, then ignored: the model is sent as configured and learns again."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        doc = orjson.loads(raw)
        bad = _problem(doc)
    except orjson.JSONDecodeError as e:
        bad = f"not JSON ({e})"
    if bad is None:
        return doc
    if (path, bad) not in _WARNED:  # once per file and fault, however many runs a process makes
        _WARNED.add((path, bad))
        log.warning("%s: ignored (%s); the model is sent as configured and learns again (delete the file, "
                    "or `evalsweep models NAME --forget`)", path, bad)
    return None


def _problem(doc: Any) -> str | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("changes"), list):
        return 'no "changes" list'
    for i, c in enumerate(doc["changes"]):
        r = c.get("refusal") if isinstance(c, dict) else None
        if not isinstance(r, dict):
            return f"changes[{i}]: no refusal"
        for k in ("field", "action", "words"):
            if not isinstance(r.get(k), str):
                return f"changes[{i}].refusal.{k}: missing or not a string"
        if r["action"] not in ("drop", "rename", "value", "split", "clamp"):
            return f"changes[{i}].refusal.action: {r['action']!r} is no action"
    return None


def _due(c: dict[str, Any], relearn: bool) -> bool:
    """A rule to re-check this run: --relearn, or learned more than RECHECK_DAYS ago (or undated)."""
    if relearn:
        return True
    try:
        day = datetime.fromisoformat(str(c.get("date"))).replace(tzinfo=UTC)
    except ValueError:
        return True
    return (datetime.now(UTC) - day).days > RECHECK_DAYS


def attach(models: dict[str, ModelEntry], cache_dir: Path | None, relearn: bool = False) -> None:
    """Give every shaped model its memory, and replay what earlier runs learned onto its requests: the
    recent rules; old ones (or all, with `relearn`) are re-checked by sending the configured shape."""
    for m in models.values():
        if m.profile is None:
            continue
        eps = list(dict.fromkeys(endpoint_key([ln.endpoint]) for ln in m.lanes))
        m.learned_by = {}
        for ep in eps:  # one store per endpoint: a pooled model's endpoints may refuse different things
            path = None if cache_dir is None else path_for(cache_dir, ep, m.model_id)
            mem = Learned(Sent(m.shape, dict(m.cfg.params), not m.supports_n), path, endpoint=ep, base=m.shape)
            doc = load(path) if path is not None else None
            if doc is not None:
                mem.rechecking = [c for c in doc["changes"] if _due(c, relearn)]
                doc = {**doc, "changes": [c for c in doc["changes"] if not _due(c, relearn)]}
            mem.sent, mem.changes = replay(doc, mem.sent, m.profile)
            m.learned_by[ep] = mem
        m.learned = m.learned_by[eps[0]] if eps else None
        for mem in m.learned_by.values():
            _apply(m, mem)


def _mem(m: ModelEntry, lane: Any = None) -> Learned:
    """The memory of the endpoint a call goes to (a pooled model's), else the model's."""
    if lane is not None and len(m.learned_by) > 1:
        mem = m.learned_by.get(endpoint_key([lane.endpoint]))
        if mem is not None:
            return mem
    return _of(m)


def _mems(m: ModelEntry) -> list[Learned]:
    return list(m.learned_by.values()) if m.learned_by else [m.learned] if m.learned is not None else []


def shape(m: ModelEntry, lane: Any = None) -> Any:
    """The request shape a call to `lane` goes in: its endpoint's, for a pooled model."""
    return m.shape if m.learned is None or len(m.learned_by) <= 1 else _mem(m, lane).sent.shape


def accepted(m: ModelEntry, lane: Any = None) -> None:
    """A call of the model was answered: rules being re-checked that it did not need are forgotten."""
    mem = _mem(m, lane) if m.learned is not None else None
    if mem is None or not mem.rechecking:
        return
    gone = [c for c in mem.rechecking if (c["refusal"]["field"], c["refusal"]["action"])
            not in {(x["refusal"]["field"], x["refusal"]["action"]) for x in mem.changes}]
    mem.rechecking = []
    for c in gone:
        log.warning("%s (%s): re-checked: the provider now takes what it refused on %s (%s); rule forgotten",
                    m.cfg.name, m.model_id, c.get("date", "?"), c["refusal"]["words"][:160])
    _save(m, mem)


def forget(cache_dir: Path) -> int:
    """Every learned rule under the cache directory removed (`cache prune --all`); how many files."""
    n = 0
    for p in (cache_dir / DIR).glob("*.json"):
        p.unlink(missing_ok=True)
        n += 1
    return n


def replay(doc: dict[str, Any] | None, sent: Sent, profile: Any) -> tuple[Sent, list[dict[str, Any]]]:
    """A model's requests after the refusals `doc` keeps, in the order they came, each change with the
    words it is said in (a refusal about a field this config no longer sends changes nothing)."""
    changes = []
    for c in (doc or {}).get("changes", []):
        try:
            got = adapt(sent, Refusal.of(c["refusal"]), profile)
        except (KeyError, TypeError, ValueError):
            continue
        if got is not None:
            sent = got[0]
            changes.append({**c, "said": got[1]})
    return sent, changes


def config_paths(cfg: Any, name: str, cache_dir: Path) -> list[Path]:
    """Where a configured model's learned rules are kept, one file per endpoint it is served by ([]: a
    provider that learns nothing)."""
    from runner.config import Endpoint

    m = cfg.resolve(name)
    kind = cfg.provider_of(m)
    if kind not in ("openai", "anthropic", "litellm"):
        return []
    eps = [cfg.endpoint(e) for e in m.endpoint_names] or [Endpoint(name=name, kind=kind)]
    keys = dict.fromkeys(endpoint_key([e]) for e in eps)
    return [path_for(cache_dir, k, m.model_id) for k in keys]


def for_config(cfg: Any, name: str, cache_dir: Path) -> list[tuple[str, str]]:
    """(the change, its source: the date and the refusal's words) for each thing a configured model
    learned (`evalsweep models NAME`), on each endpoint it is served by."""
    from providers.capabilities import resolve
    from providers.shape import shape_for

    m = cfg.resolve(name)
    paths = config_paths(cfg, name, cache_dir)
    if not paths:
        return []
    profile = resolve(m, cfg.provider_of(m))
    shape = shape_for(profile)
    out = []
    for path in paths:
        doc = load(path)
        _, changes = replay(doc, Sent(None if shape.trivial else shape, dict(m.params), False), profile)
        where = f" (on {doc.get('endpoint')})" if len(paths) > 1 and doc else ""
        out += [(c["said"] + where, f"{source(c)}: \"{c['refusal']['words'][:200]}\""
                 + (" (re-checked on the next run)" if _due(c, False) else "")) for c in changes]
    return out


def _apply(m: ModelEntry, mem: Learned) -> None:
    if len(m.learned_by) <= 1:  # (a pooled model's shape is its endpoints' own: `shape(m, lane)`)
        m.shape = mem.sent.shape
    if mem.sent.split_n:
        m.supports_n = False  # (any of its endpoints refusing n: one sample a call everywhere)


def _of(m: ModelEntry) -> Learned:
    if m.learned is None:  # a model wired without attach (a library caller): learn for this run only
        m.learned = Learned(Sent(m.shape, dict(m.cfg.params), not m.supports_n), base=m.shape)
    return m.learned


def profile_shape(m: ModelEntry) -> Any:
    """The model's shape as its profile made it, before what its refusals taught."""
    return m.shape if m.learned is None else m.learned.base


def version(m: ModelEntry, lane: Any = None) -> int:
    return 0 if m.learned is None else _mem(m, lane).version


def params(m: ModelEntry, lane: Any = None) -> dict[str, Any]:
    """The body fields the model's requests carry beyond the suite's: the config's, as learned."""
    return m.cfg.params if m.learned is None else _mem(m, lane).sent.params


def retry(m: ModelEntry, err: ProviderError, sent_version: int, n: int = 1, lane: Any = None) -> bool:
    """True when the refused call (of `n` samples) is to be sent again: its model's requests changed
    since it went out, or change now because the provider named what it refuses (the caller sends
    `n` > 1 as single calls once the model takes one sample a call). False: a final error row (a refusal
    nobody can read, or the same refusal after adapting)."""
    if m.profile is None:
        return False
    sent = _sent(err)
    refusals = read(err.status, err.body, sent)
    if not refusals:
        if sent is not None and m.learned is not None and any(  # a field already adapted away, refused again
                (r.field, r.action) in {(c["refusal"]["field"], c["refusal"]["action"])
                                        for c in _mem(m, lane).changes}
                for r in read(err.status, err.body)):
            err.refuses_model = True  # the same refusal after adapting to it: runner.calls.gate stops the model
        return False
    mem = _mem(m, lane)
    if mem.version != sent_version or (n > 1 and mem.sent.split_n and any(r.action == "split" for r in refusals)):
        mem.refused += 1  # (a group of samples made before the model was known to take one a call)
        return True
    if mem.version >= MAX_CHANGES:
        err.refuses_model = True  # nothing more to learn: runner.calls.gate stops the model (its kind: model_refused)
        return False
    day = datetime.now(UTC).date().isoformat()
    learned = []
    known = {(c["refusal"]["field"], c["refusal"]["action"]) for c in mem.changes}
    for r in refusals:
        if (r.field, r.action) in known:  # the same refusal after adapting to it: final
            continue
        got = adapt(mem.sent, r, m.profile)
        if got is None:
            continue
        mem.sent, said = got
        learned.append({"refusal": r.record(), "said": said, "date": day, "status": err.status})
    if not learned:
        if any((r.field, r.action) in known for r in refusals):
            err.refuses_model = True  # the same refusal after adapting to it: runner.calls.gate stops the model
        return False
    mem.changes += learned
    mem.version += 1
    mem.refused += 1
    _apply(m, mem)
    for c in learned:
        log.warning("%s (%s): refused by the provider (%s); from now on: %s", m.cfg.name, m.model_id,
                    c["refusal"]["words"][:200], c["said"])
    _save(m, mem)
    return True


def _sent(err: ProviderError) -> dict[str, Any] | None:
    """The refused request's body (a dict), where the provider kept it."""
    try:
        doc = orjson.loads(err.request) if err.request else None
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def _save(m: ModelEntry, mem: Learned) -> None:
    if mem.path is None:
        return
    doc = {"endpoint": mem.endpoint, "model": m.model_id, "changes": [
        {k: v for k, v in c.items() if k != "said"} for c in mem.changes]}
    try:
        mem.path.parent.mkdir(parents=True, exist_ok=True)
        write_json(mem.path, doc)
    except OSError as e:
        log.warning("cannot keep what %s learned in %s: %s", m.cfg.name, mem.path, e.strerror)


def made_with(m: ModelEntry) -> list[dict[str, str]]:
    """What an answer made now is stored with in the cache: the changes its request went out with."""
    return [{"said": c["said"], "date": c.get("date", "?")} for mem in _mems(m) for c in mem.changes]


def inherit(m: ModelEntry | None, v: dict[str, Any]) -> None:
    """An answer from the cache made under learned changes this run does not make: its deviation is the
    run's too (it reuses the answer, so it reuses how it was asked)."""
    made = v.get("learned")
    if m is None or not made or not isinstance(made, list):
        return
    mem = _of(m)
    now = {c["said"] for x in _mems(m) for c in x.changes}
    for c in made:
        if isinstance(c, dict) and isinstance(c.get("said"), str) and c["said"] not in now:
            mem.inherited.setdefault(c["said"], str(c.get("date", "?")))


def source(c: dict[str, Any]) -> str:
    return f"learned from the provider's refusal on {c.get('date', '?')}"


def deviations(name: str, m: ModelEntry) -> list[str]:
    """One sentence per learned change: recorded beside the model's other departures (a pooled model's
    naming the endpoint it was learned on)."""
    pooled = len(m.learned_by) > 1
    out = [f"{name}: {c['said']}{f' (on {mem.endpoint})' if pooled else ''} ({source(c)}: "
           f"\"{c['refusal']['words'][:160]}\")" for mem in _mems(m) for c in mem.changes]
    return out + [f"{name}: answers reused from the cache were made with: {said} (learned from the provider's "
                  f"refusal on {day})" for mem in _mems(m) for said, day in mem.inherited.items()]


def summary(models: dict[str, ModelEntry], names: list[str]) -> dict[str, Any]:
    """manifest.json `learned`: per model that learned anything, its changes and the requests they cost."""
    out = {}
    for n in names:
        mems = _mems(models[n]) if n in models else []
        changes = [c["said"] for mem in mems for c in mem.changes]
        refused = sum(mem.refused for mem in mems)
        if changes or refused:
            out[n] = {"changes": changes, "requests_refused": refused}
    return out
