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


class _RefusesTopP(ContractServer):
    """An endpoint whose deployment refuses top_p (its provider's words: OpenAI's unsupported_parameter)."""

    async def chat(self, request):  # type: ignore[override]
        from aiohttp import web

        body = orjson.loads(await request.read())
        self.bodies[body.get("model", "")] = body
        if "top_p" in body:
            err = {"error": {"message": "Unsupported parameter: 'top_p' is not supported with this model.",
                             "type": "invalid_request_error", "param": "top_p", "code": "unsupported_parameter"}}
            return self._answer(web.json_response(err, status=400), body.get("model", ""), "top_p")
        return await super().chat(_Body(body))


class _Body:
    def __init__(self, body: dict) -> None:
        self._raw = orjson.dumps(body)

    async def read(self) -> bytes:
        return self._raw


def test_a_pooled_model_learns_per_endpoint(tmp_path: Path, contract: ContractServer):
    """#36: a model pooled over two endpoints shared one learned shape: one endpoint's rule (no top_p)
    was applied to the other, or two endpoints with different rules stopped the model. Each endpoint now
    keeps its own."""
    strict = _RefusesTopP().start()
    try:
        cfg = tmp_path / "pool.toml"
        cfg.write_text(f"""
[[endpoints]]
name = "strict"
kind = "openai"
base_url = "http://127.0.0.1:{strict.port}/v1"
max_concurrency = 2

[[endpoints]]
name = "lenient"
kind = "openai"
base_url = "http://127.0.0.1:{contract.port}/v1"
max_concurrency = 2

[[models]]
name = "zeta-9"
endpoints = ["strict", "lenient"]
model = "zeta-9"
params = {{ top_p = 0.9 }}
""")
        out = tmp_path / "run"
        assert main(run_args(_data(tmp_path / "a.jsonl", 0, 12), "zeta-9", cfg, out)) == 0
        rows = _rows(out)
        assert len(rows) == 12 and all(r["error"] is None for r in rows)
        assert len(strict.refusals) <= 2  # learned once on the strict endpoint
        assert contract.bodies["zeta-9"]["top_p"] == 0.9  # the lenient one still gets what was configured
        assert "top_p" not in strict.bodies["zeta-9"]
        kept = {orjson.loads(p.read_bytes())["endpoint"]: orjson.loads(p.read_bytes())["changes"]
                for p in _learned_files()}
        assert [c["refusal"]["field"] for c in kept[f"openai:http://127.0.0.1:{strict.port}/v1"]] == ["top_p"]
        man = orjson.loads((out / "manifest.json").read_bytes())
        assert any("top_p not sent" in d and f"127.0.0.1:{strict.port}" in d for d in man["model_deviations"])
    finally:
        strict.stop()


def test_answers_reused_from_the_cache_carry_the_changes_they_were_made_with(
    tmp_path: Path, contract: ContractServer, monkeypatch: pytest.MonkeyPatch
):
    """#36: an answer made under a learned shape, reused by a run that does not make that change (the rule
    forgotten since), carries the change as that run's deviation."""
    cfg = _learn(tmp_path, contract, monkeypatch)  # n refused: answers made one sample a call
    data = next(p for p in tmp_path.glob("r1.jsonl"))
    assert main(["models", FUTURE_NO_N, "--forget", "--config", str(cfg)]) == 0
    sent = contract.status[200]
    out = tmp_path / "again"
    assert main(run_args(data, FUTURE_NO_N, cfg, out, "--samples", "2", "--temperature", "0.7")) == 0
    assert contract.status[200] == sent  # every answer from the cache
    man = orjson.loads((out / "manifest.json").read_bytes())
    assert any("answers reused from the cache were made with: n > 1 sent as separate calls" in d
               for d in man["model_deviations"]), man["model_deviations"]
