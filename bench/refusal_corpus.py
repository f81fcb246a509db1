"""End to end on refusal bodies real providers sent (tests/data/refusals/corpus.jsonl): each corpus
entry becomes a model no map knows, on a local contract mock that refuses it with that entry's body for
as long as the request still carries what the provider refused (the field; a limit above the bound; `n`
> 1; always, for an entry that names nothing we may change). The real runner (`evalsweep run jsonl:`,
10 items x 2 samples, 4 calls at once) must learn from the body alone.

Prints per provider: models whose rows all end ok (of those a change can fix), requests refused per
model (at most 2 is the goal), models stopped (the unfixable ones, in how many requests), and whether
any request ever lacked `model` or `messages`.

    python bench/refusal_corpus.py
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aiohttp import web  # noqa: E402

from providers.refusal_fields import value_of  # noqa: E402
from tests.mock_contract import ContractServer  # noqa: E402

CORPUS = [orjson.loads(x) for x in (REPO / "tests/data/refusals/corpus.jsonl").read_bytes().splitlines()]


def still_refused(e: dict[str, Any], body: dict[str, Any]) -> bool:
    want = e["expect"]
    if want is None:
        return True
    if "fields" in want:
        return any(value_of(body, f) is not None for f in want["fields"])
    v = value_of(body, want["field"])
    if want["action"] == "split":
        return int(body.get("n", 1)) > 1
    if want["action"] == "value" and "values" in want:
        return v is not None and v not in want["values"]
    if want["action"] == "clamp":
        return isinstance(v, int | float) and v > want["bound"]
    return v is not None


class CorpusServer(ContractServer):
    """Model `corpus-<i>`: refused with entry i's body while the request still carries what it refused."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: Counter[str] = Counter()
        self.essential_missing = 0

    async def chat(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        model = body.get("model", "")
        self.sent[model] += 1
        if not body.get("model") or not body.get("messages"):
            self.essential_missing += 1
        if model.startswith("corpus-"):
            e = CORPUS[int(model.split("-")[1])]
            if still_refused(e, body):
                return self._answer(web.Response(status=e["status"], text=e["body"], content_type="application/json"),
                                    model, e["provider"])
        return await super().chat(_Again(request, body))


class _Again:
    def __init__(self, request: web.Request, body: dict[str, Any]) -> None:
        self._raw = orjson.dumps(body)
        self.headers = request.headers

    async def read(self) -> bytes:
        return self._raw


def _config(path: Path, port: int) -> None:
    text = (f'[[endpoints]]\nname = "mock"\nkind = "openai"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
            "max_concurrency = 4\n")
    for i, e in enumerate(CORPUS):
        params = {k: v for k, v in e["request"].items() if k not in ("model", "messages", "stream")}  # (the runner streams or not)
        text += (f'\n[[models]]\nname = "corpus-{i}"\nendpoint = "mock"\nmodel = "corpus-{i}"\nprice_in = 1.0\n'
                 f"price_out = 2.0\nparams = {_toml(params)}\n")
    path.write_text(text)


def _toml(v: Any) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f'"{k}" = {_toml(x)}' for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return orjson.dumps(v).decode()
    return repr(v)


def main() -> int:
    from cli.main import main as cli

    srv = CorpusServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            _config(t / "c.toml", srv.port)
            data = t / "d.jsonl"
            data.write_bytes(b"".join(orjson.dumps({"id": f"q{i}", "prompt": f"What is {i} + 2?",
                                                    "choices": ["w", "x", "y", "z"], "answer": "A"}) + b"\n"
                                      for i in range(10)))
            import os

            os.environ["EVALSWEEP_CACHE_DIR"] = str(t / "cache")
            models = ",".join(f"corpus-{i}" for i in range(len(CORPUS)))
            cli(["run", f"jsonl:{data}", "--models", models, "--config", str(t / "c.toml"), "--out", str(t / "run"),
                 "--no-live", "--no-score", "--samples", "2", "--temperature", "0.7"])
            rows = [orjson.loads(x) for x in (t / "run" / "results.jsonl").read_bytes().splitlines()]
            man = orjson.loads((t / "run" / "manifest.json").read_bytes())
    finally:
        srv.stop()
    by_model: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_model[r["model"]].append(r)
    refused = Counter(m for m, _ in srv.refusals)
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])  # fixable, ok, unfixable, stopped, max refused
    held = [0, 0]  # held-out entries (never tuned on), those handled
    for i, e in enumerate(CORPUS):
        m = f"corpus-{i}"
        t_ = table[e["provider"]]
        rs = by_model[m]
        if e["expect"] is None:
            t_[2] += 1
            ok = all(r["error_kind"] in ("fatal", "model_refused") for r in rs) and refused[m] <= 2
            t_[3] += ok
        else:
            t_[0] += 1
            ok = len(rs) == 20 and all(r["error"] is None for r in rs)
            t_[1] += ok
        if e.get("held_out"):
            held[0] += 1
            held[1] += ok
            if not ok:
                print(f"  not ok: {m} ({e['provider']}, {e['source']}): {Counter(r['error_kind'] for r in rs)}")
        t_[4] = max(t_[4], refused[m])
    print(f"{'provider':<11} {'fixable ok':>11} {'unfixable stopped':>18} {'max refused/model':>18}")
    for p, (fx, ok, un, st, mx) in sorted(table.items()):
        print(f"{p:<11} {f'{ok}/{fx}':>11} {f'{st}/{un}':>18} {mx:>18}")
    fx = sum(v[0] for v in table.values())
    ok = sum(v[1] for v in table.values())
    print(f"{'all':<11} {f'{ok}/{fx}':>11} ({ok / max(fx, 1):.0%}); requests refused per model: "
          f"max {max(refused.values(), default=0)}, mean {sum(refused.values()) / len(CORPUS):.2f}; "
          f"requests without model/messages: {srv.essential_missing}; changes recorded: "
          f"{sum(len(v['changes']) for v in man.get('learned', {}).values())}")
    print(f"held-out entries (no rule was chosen on them): {held[1]}/{held[0]} handled")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
