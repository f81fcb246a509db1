"""#39 at the issue's scale, against the mock server on 127.0.0.1: 100 streams cut mid-answer under
`--max-cost 10` (before: billed $112.90 while the run said $0.00). The mock keeps its own bill of every
stream it served (the whole answer it generated, cut or not), at the run's model's prices; it stays
within the ceiling, the calls not sent end as rows naming the ceiling, and going on with a higher one
sends exactly those: the cut ones were billed and are kept (`--resend-partial` sends them again)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cli.main import main
from tests.helpers import rows, run_args, write_dataset
from tests.mock_openai import MockServer

PRICE_IN, PRICE_OUT = 5000.0, 10000.0
"""USD per million tokens: a cut stream here bills ~$0.2 at the mock, so 100 of them would cross $10."""


@pytest.fixture
def mock():
    srv = MockServer().start()
    yield srv
    srv.stop()


def _config(path: Path, base_url: str) -> Path:
    path.write_text(
        f'[[endpoints]]\nname = "mock"\nkind = "openai"\nbase_url = "{base_url}"\n'
        "stream_above_tokens = 0\nmax_concurrency = 4\n\n"
        f'[[models]]\nname = "ok-a"\nendpoint = "mock"\nmodel = "ok-a"\nprice_in = {PRICE_IN}\n'
        f"price_out = {PRICE_OUT}\n"
    )
    return path


def test_100_cut_streams_under_a_10_dollar_ceiling_then_going_on(tmp_path: Path, mock: MockServer):
    data = write_dataset(tmp_path / "d.jsonl", 100, prefix="Explain at length [[stream:cut]] question")
    cfg = _config(tmp_path / "c.toml", mock.base_url)
    out = tmp_path / "run"
    args = run_args(data, "ok-a", cfg, out, "--max-tokens", "50", "--cache-dir", str(tmp_path / "cache"))
    assert main([*args, "--max-cost", "10"]) == 5
    first = rows(out)
    cut = [r for r in first if r.get("finish_reason") == "partial"]
    skipped = [r for r in first if r.get("error_kind") == "skipped"]
    assert len(first) == 100 and len({r["item"] for r in first}) == 100  # one final row each
    assert len(cut) + len(skipped) == 100 and cut and skipped
    assert all("--max-cost $10" in r["error"] and "reached" in r["error"] for r in skipped)
    assert mock.sse.cut["cut"] == mock.total == len(cut)  # every call sent was cut, and only those
    assert mock.sse.bill(PRICE_IN, PRICE_OUT) <= 10  # what the provider would bill, by its own count
    assert mock.sse.bill(PRICE_IN, PRICE_OUT) * 100 / len(cut) > 10  # all 100 would have crossed it

    before = Counter(mock.prompts)
    assert main([*args, "--max-cost", "100"]) == 3  # every stream cut again: 3, calls failed
    second = rows(out)[100:]
    # exactly the skipped calls: the cut ones were billed, and a rerun does not pay for them again
    assert sorted(r["item"] for r in second) == sorted(r["item"] for r in skipped)
    assert len(second) == len(skipped) and all(r.get("finish_reason") == "partial" for r in second)
    assert mock.total == 100 and set(before.values()) == {1}
    assert set(Counter(mock.prompts).values()) == {1}  # 0 requests paid twice
    assert mock.sse.bill(PRICE_IN, PRICE_OUT) <= 100
    # nothing left but the kept rows: nothing sent, and the exit still says the run has error rows
    assert main([*args, "--max-cost", "100"]) == 3 and mock.total == 100

    # asked for, the cut ones (all 100 now) are sent again, each once
    assert main([*args, "--max-cost", "1000", "--resend-partial"]) == 3
    assert len(rows(out)) == 200 + len(skipped) and set(Counter(mock.prompts).values()) == {2}
