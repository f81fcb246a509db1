"""The learned store stays honest (#36): a corrupt or hand-edited entry is one warning naming the file,
then ignored; a rule is re-checked after RECHECK_DAYS or with --relearn (forgotten if the provider now
takes the configured shape, relearned if not); `models NAME` shows each rule with its date and words;
`models NAME --forget` and `cache prune --all` clear them. Real runs against the contract mock."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from cli.main import main
from tests.helpers import run_args
from tests.mock_contract import FUTURE_NO_N, ContractServer
from tests.test_refusals import KEYS, _config, _data, _rows


@pytest.fixture
def contract():
    srv = ContractServer().start()
    yield srv
    srv.stop()


def _learned_files() -> list[Path]:
    return sorted((Path(os.environ["EVALSWEEP_CACHE_DIR"]) / "learned").glob("*.json"))


def _learn(tmp_path: Path, contract: ContractServer, monkeypatch: pytest.MonkeyPatch, out: str = "r1") -> Path:
    for k in KEYS:
        monkeypatch.setenv(k, "contract-test-key-0123456789")
    cfg = _config(tmp_path, contract.port)
    first = 100 * len(list(tmp_path.glob("r*")))  # new items each time: no answer from the cache
    assert main(run_args(_data(tmp_path / f"{out}.jsonl", first, 3), FUTURE_NO_N, cfg, tmp_path / out, "--samples",
                         "2", "--temperature", "0.7")) == 0
    assert len(_learned_files()) == 1
    return cfg


def test_a_corrupt_or_hand_edited_entry_is_one_warning_then_ignored(
    tmp_path: Path, contract: ContractServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
):
    cfg = _learn(tmp_path, contract, monkeypatch)
    path = _learned_files()[0]
    doc = orjson.loads(path.read_bytes())
    del doc["changes"][0]["refusal"]["words"]  # hand-edited: a rule without the provider's words
    path.write_bytes(orjson.dumps(doc))
    capsys.readouterr()
    for extra in (["--dry-run"], []):
        code = main(run_args(_data(tmp_path / "b.jsonl", 10, 2), FUTURE_NO_N, cfg, tmp_path / "r2", "--samples",
                             "2", "--temperature", "0.7", *extra))
        said = capsys.readouterr()
        assert code == 0 and "Traceback" not in said.err + said.out
    assert caplog.text.count(f"{path}: ignored (changes[0].refusal.words: missing") == 1  # once, not per run
    path.write_bytes(b"{not json")
    assert main(run_args(_data(tmp_path / "c.jsonl", 20, 2), FUTURE_NO_N, cfg, tmp_path / "r3", "--samples", "2",
                         "--temperature", "0.7")) == 0
    said = capsys.readouterr()
    assert f"{path}: ignored (not JSON" in caplog.text and "Traceback" not in said.err
    assert all(r["error"] is None for r in _rows(tmp_path / "r3"))  # relearned: n refused once, then split


def test_an_old_rule_is_rechecked_and_forgotten_when_the_provider_takes_the_request(
    tmp_path: Path, contract: ContractServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
):
    """A transient 400 once removed temperature for good (never re-checked); now a rule older than
    RECHECK_DAYS is tried once: the provider takes temperature, so the rule goes, the recent one stays."""
    cfg = _learn(tmp_path, contract, monkeypatch)
    path = _learned_files()[0]
    doc = orjson.loads(path.read_bytes())
    doc["changes"].append({"refusal": {"field": "temperature", "action": "drop", "to": None, "values": [],
                                       "refused": None, "words": "temperature is temporarily unavailable"},
                           "date": "2025-01-01", "status": 400})
    path.write_bytes(orjson.dumps(doc))
    capsys.readouterr()
    assert main(["models", FUTURE_NO_N, "--config", str(cfg)]) == 0  # each rule, its date and its words
    shown = capsys.readouterr().out
    assert "on 2025-01-01: \"temperature is temporarily unavailable\" (re-checked on the next run)" in shown, shown
    contract.refusals.clear()
    assert main(run_args(_data(tmp_path / "b.jsonl", 10, 3), FUTURE_NO_N, cfg, tmp_path / "r2", "--samples", "2",
                         "--temperature", "0.7")) == 0
    assert contract.bodies[FUTURE_NO_N]["temperature"] == 0.7  # the configured shape, sent again
    kept = orjson.loads(path.read_bytes())["changes"]
    assert [c["refusal"]["field"] for c in kept] == ["n"] and contract.refusals == []
    assert "re-checked: the provider now takes what it refused on 2025-01-01" in caplog.text

    # --relearn re-checks a recent rule too: n is refused again, relearned with today's date
    contract.refusals.clear()
    assert main(run_args(_data(tmp_path / "c.jsonl", 20, 3), FUTURE_NO_N, cfg, tmp_path / "r3", "--samples", "2",
                         "--temperature", "0.7", "--relearn")) == 0
    assert [m for m, _ in contract.refusals] == [FUTURE_NO_N]  # one request to re-check it
    assert [c["refusal"]["field"] for c in orjson.loads(path.read_bytes())["changes"]] == ["n"]


def test_forget_and_prune_all_clear_the_rules(
    tmp_path: Path, contract: ContractServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    cfg = _learn(tmp_path, contract, monkeypatch)
    assert main(["models", FUTURE_NO_N, "--forget", "--config", str(cfg)]) == 0
    assert _learned_files() == [] and "forgot what it learned" in capsys.readouterr().out
    _learn(tmp_path, contract, monkeypatch, "r2")
    assert main(["cache", "prune", "--all"]) == 0
    assert _learned_files() == [] and "removed 1 learned request rules" in capsys.readouterr().out
