"""An `n` call whose worst case (prompt + n x max_tokens) is over the key's TPM bucket is never admitted
whole: its samples go in the fewest calls that fit (runner.calls.call.fit_tpm), each under the bucket,
every sample still one row. Against the real local mock: the requests' count and size (`n`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main
from runner.calls.call import fit_tpm
from tests.helpers import rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


@pytest.fixture
def mock():
    srv = MockServer().start()
    yield srv
    srv.stop()


def _sweep(tmp_path: Path, mock: MockServer, tpm: int, items: int = 2) -> tuple[int, list[dict]]:
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-n"], extra_endpoint=f"tpm = {tpm}\n")
    data = write_dataset(tmp_path / "d.jsonl", items)
    out = tmp_path / "run"
    code = main(run_args(data, "ok-n", cfg, str(out), "--samples", "8", "--temperature", "0.7",
                         "--max-tokens", "4096"))
    return code, rows(out)


def test_eight_samples_of_4096_on_a_14k_key_go_as_three_calls_each_under_the_bucket(tmp_path: Path, mock: MockServer):
    code, rs = _sweep(tmp_path, mock, 14_000)
    assert code == 0 and len(rs) == 16 and all(r["error"] is None for r in rs)
    assert sorted((r["item"], r["sample"]) for r in rs) == [(f"q{i}", s) for i in range(2) for s in range(8)]
    by_item: dict[str, list[int]] = {}
    for _, _, prompt, n in mock.arrivals:
        by_item.setdefault(prompt, []).append(n)
    assert sorted(sorted(ns) for ns in by_item.values()) == [[2, 3, 3], [2, 3, 3]]  # before: [8] each
    assert all(n * 4096 < 14_000 for _, _, _, n in mock.arrivals)  # none over the key's bucket


def test_a_key_that_holds_the_whole_call_gets_it_as_one(tmp_path: Path, mock: MockServer):
    code, rs = _sweep(tmp_path, mock, 200_000, items=1)
    assert code == 0 and len(rs) == 8 and all(r["error"] is None for r in rs)
    assert [n for *_, n in mock.arrivals] == [8]


def test_fit_tpm_fewest_calls_balanced():
    assert fit_tpm(list(range(8)), 40, 4096, 14_000) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert fit_tpm(list(range(8)), 40, 4096, 10_000) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert fit_tpm(list(range(3, 8)), 40, 4096, None) == [[3, 4, 5, 6, 7]]
    assert fit_tpm([0, 1], 40, 50_000, 10_000) == [[0], [1]]  # one sample over the bucket: one a call
