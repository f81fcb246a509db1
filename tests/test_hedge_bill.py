"""#40: a hedged call's cancelled send is billed (runner.calls.spend.lost), against the mock OpenAI server on
127.0.0.1: an endpoint with `hedge_after` re-sends the lane's last call when it runs long at a drain, the copy
answers, and the row says so (`hedge`), its `cost_usd` carrying the loser's estimate (at least its prompt and the
winner's output: the safe side); the manifest's spend and the report's cost count it, and `--max-cost` stops on it
(a resumed run finds the ceiling as full as the loser left it). An endpoint without the key never re-sends."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli.main import main
from report.costs import run_costs
from tests.helpers import rows, run_args, write_dataset
from tests.mock_openai import MockServer

ITEMS = 12
MODELS = ("ok-h", "ok-g")
SLOW = f"Question {ITEMS - 1}:"
"""ok-h's last call: its first send thinks SLOW_S, its copy answers as every other call does (0.05 s)."""
SLOW_S = 5.0
PRICE_IN, PRICE_OUT = 10 / 1e6, 2000 / 1e6
"""USD a token: dear, so that a loser's few dozen tokens stand out of the stop message's rounding ($0.0001)."""


@pytest.fixture
def mock():
    srv = MockServer().start()
    srv.latency_of = lambda model, prompt, before: (SLOW_S if model == "ok-h" and SLOW in prompt
                                                    and srv._seen[(model, prompt)] == 1 else 0.05)
    yield srv
    srv.stop()


def _run(tmp_path: Path, mock: MockServer, hedge: str, *extra: str, data: Path | None = None, out: str = "run",
         models: tuple[str, ...] = MODELS) -> int:
    data = data or write_dataset(tmp_path / "d.jsonl", ITEMS)
    cfg = tmp_path / "c.toml"
    text = f'[[endpoints]]\nname = "mock"\nkind = "openai"\nbase_url = "{mock.base_url}"\nmax_concurrency = 2\n{hedge}\n'
    for m in ("ok-h", "ok-g", "ok-k"):  # (two models run: a model's own calls never wait for a lease, the scheduler sends as many as it has)
        text += (f'[[models]]\nname = "{m}"\nendpoint = "mock"\nmodel = "{m}"\nprice_in = {PRICE_IN * 1e6:g}\n'
                 f"price_out = {PRICE_OUT * 1e6:g}\n")
    cfg.write_text(text)
    return main(run_args(data, ",".join(models), cfg, tmp_path / out, "--no-cache", *extra))


def _hedged(out: Path) -> dict:
    got = [r for r in rows(out) if r.get("hedge")]
    assert len(got) == 1 and (got[0]["model"], got[0]["item"]) == ("ok-h", f"q{ITEMS - 1}")
    return got[0]


def test_a_hedged_calls_row_and_the_bill_carry_its_losers_estimate(tmp_path: Path, mock: MockServer):
    assert _run(tmp_path, mock, "hedge_after = 3.0\n", "--max-cost", "100") == 0
    out = tmp_path / "run"
    r = _hedged(out)
    h, u = r["hedge"], r["usage"]
    assert r["error"] is None and mock.total == 2 * ITEMS + 1  # one copy, the slow send's
    assert h["copies"] == 1 and h["won"] == "copy" and 0 < h["lost_s"] < SLOW_S
    winner = u["input_tokens"] * PRICE_IN + u["output_tokens"] * PRICE_OUT
    # the loser: its prompt in full and at least the winner's output (what it would have made, on the safe side)
    assert h["lost_tokens"] >= u["input_tokens"] + u["output_tokens"]
    assert h["lost_cost"] == pytest.approx(u["input_tokens"] * PRICE_IN + (h["lost_tokens"] - u["input_tokens"])
                                           * PRICE_OUT)
    assert r["cost_usd"] == pytest.approx(winner + h["lost_cost"])
    billed = sum(x["cost_usd"] for x in rows(out))
    man = json.loads((out / "manifest.json").read_text())
    assert man["spend"]["--max-cost"]["spent_usd"] == pytest.approx(billed)  # the ceiling counted the loser
    assert sum(c.total for c in run_costs(out / "results.jsonl").values()) == pytest.approx(billed)  # the report's cost too
    others = [x for x in rows(out) if not x.get("hedge")]
    assert all(x["cost_usd"] == pytest.approx(x["usage"]["input_tokens"] * PRICE_IN + x["usage"]["output_tokens"]
                                              * PRICE_OUT) for x in others)


def test_max_cost_stops_on_a_losers_spend(tmp_path: Path, mock: MockServer, capsys: pytest.CaptureFixture[str]):
    assert _run(tmp_path, mock, "hedge_after = 3.0\n", "--max-cost", "100") == 0
    out = tmp_path / "run"
    lost = _hedged(out)["hedge"]["lost_cost"]
    answers = sum(x["usage"]["input_tokens"] * PRICE_IN + x["usage"]["output_tokens"] * PRICE_OUT for x in rows(out))
    # a third model's first call: its worst case, as a ceiling it cannot fit under says (nothing sent)
    alone = tmp_path / "alone.jsonl"
    alone.write_bytes((tmp_path / "d.jsonl").read_bytes().splitlines(keepends=True)[0])
    sent = mock.total
    assert _run(tmp_path, mock, "", "--max-cost", "0.000001", data=alone, out="alone", models=("ok-k",)) == 5
    worst = float(re.search(r"worst case, \$([0-9.]+)", rows(tmp_path / "alone")[0]["error"]).group(1))  # type: ignore[union-attr]
    assert mock.total == sent and lost > 0.01  # (far above the message's rounding, and a prompt's length: $1e-5 a token)
    # ... the run going on with it, under a ceiling its call fits in only if the loser were not billed: none is sent
    ceiling = f"{answers + lost / 2 + worst:.6f}"  # (the answers' own cost, and half the loser's)
    assert _run(tmp_path, mock, "hedge_after = 3.0\n", "--max-cost", ceiling, models=(*MODELS, "ok-k")) == 5
    assert mock.total == sent and f"{ITEMS} calls not sent" in capsys.readouterr().err
    new = rows(out)[2 * ITEMS:]
    assert len(new) == ITEMS and all(r["model"] == "ok-k" and r["error_kind"] == "skipped" for r in new)


def test_an_endpoint_without_hedge_after_never_re_sends(tmp_path: Path, mock: MockServer):
    assert _run(tmp_path, mock, "") == 0
    got = rows(tmp_path / "run")
    assert mock.total == 2 * ITEMS and not any(r.get("hedge") for r in got) and all(r["error"] is None for r in got)
