"""The providers' own limits and errors, against the mock on 127.0.0.1: 429 storms, keys out of quota,
overloaded servers, retry-after-ms and x-ratelimit-* headers, servers that ignore `n`."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cli.main import main
from tests.helpers import rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer

FAST_RETRY = "retry_initial_s = 0.01\nretry_max_s = 0.05\n"


@pytest.fixture
def mock():
    srv = MockServer().start()
    yield srv
    srv.stop()


def _run(tmp_path: Path, cfg: Path, models: str, data: Path, *extra: str, out: str = "run") -> tuple[int, Path]:
    code = main(run_args(data, models, cfg, str(tmp_path / out), *extra))
    return code, tmp_path / out


def _by_prompt(mock: MockServer) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {}
    for t, _, prompt, _ in mock.arrivals:
        times.setdefault(prompt, []).append(t)
    return times


def _assert_told_waits_honoured(mock: MockServer) -> None:
    for model in ("ratelimit-ms", "ratelimit-reset"):  # told 300 ms; backoff alone would be <= 50 ms
        ts: dict[str, list[float]] = {}
        for t, m, prompt, _ in mock.arrivals:
            if m == model:
                ts.setdefault(prompt, []).append(t)
        assert all(len(v) == 2 and v[1] - v[0] >= 0.28 for v in ts.values()), (model, ts)


def test_a_429_storm_delays_each_refused_request_not_the_lane(tmp_path: Path, mock: MockServer):
    mock.faults, mock.retry_after, mock.latency_s = {"429": 0.3}, 1.0, 0.05
    cfg = write_config(
        tmp_path / "c.toml", mock.base_url, ["ok-storm"], extra_endpoint=FAST_RETRY + "max_concurrency = 8\n"
    )
    data = write_dataset(tmp_path / "d.jsonl", 60)
    code, out = _run(tmp_path, cfg, "ok-storm", data)
    rs = rows(out)
    assert code == 0 and len(rs) == 60 and all(r["error"] is None for r in rs)
    assert mock.injected["429"] >= 10
    times = _by_prompt(mock)
    refused = [ts for ts in times.values() if len(ts) > 1]
    for ts in refused:  # each refused request waited what it was told...
        assert all(b - a >= 0.95 for a, b in zip(ts, ts[1:], strict=False))
    # ...while the lane went on: within the second after the first 429, other prompts were sent.
    first_429 = min(ts[0] for ts in refused)
    others = [t for ts in times.values() for t in ts if first_429 < t < first_429 + 0.9]
    assert len(others) >= 8


def test_a_key_out_of_quota_hands_its_calls_to_the_other_key(
    tmp_path: Path, mock: MockServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("Q_KEY_1", "dry-key")
    monkeypatch.setenv("Q_KEY_2", "good-key")
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[[endpoints]]\nname = "pool"\nbase_url = "{mock.base_url}"\n'
        'api_key_env = ["Q_KEY_1", "Q_KEY_2"]\nmax_concurrency = 4\nmax_attempts = 6\n'
        '[[models]]\nname = "ok-pool"\nendpoint = "pool"\n'
    )
    data = write_dataset(tmp_path / "d.jsonl", 30)
    code, out = _run(tmp_path, cfg, "ok-pool", data)
    rs = rows(out)
    assert code == 0 and len(rs) == 30 and all(r["error"] is None for r in rs)
    assert {r["lane"] for r in rs} == {"pool/Q_KEY_2"}
    assert 1 <= mock.keys["dry-key"] <= 4  # stopped at the first answer; never retried
    lanes = orjson.loads((out / "manifest.json").read_bytes())["lanes"]["ok-pool"]
    dry = next(ln for ln in lanes if ln["lane"] == "pool/Q_KEY_1")
    assert "out of quota" in dry["stopped"] and "dry-key" not in dry["stopped"]


def test_the_only_key_out_of_quota_gives_error_rows_and_opens_the_breaker(
    tmp_path: Path, mock: MockServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("Q_KEY", "dry-only")
    cfg = write_config(
        tmp_path / "c.toml", mock.base_url, ["ok-q"], key_env="Q_KEY", extra_endpoint="max_concurrency = 2\n"
    )
    data = write_dataset(tmp_path / "d.jsonl", 20)
    code, out = _run(tmp_path, cfg, "ok-q", data)
    rs = rows(out)
    assert code == 3 and len(rs) == 20 and all(r["error"] for r in rs)
    assert mock.keys["dry-only"] <= 2  # the lane stopped at once
    assert all("out of quota" in r["error"] for r in rs)
    assert {r["error_kind"] for r in rs} <= {"quota", "skipped"}
    assert any(r["error_kind"] == "skipped" and "circuit breaker" in r["error"] for r in rs)


def test_overloaded_and_rate_limit_headers_are_honoured(tmp_path: Path, mock: MockServer):
    models = ["overloaded-once", "ratelimit-ms", "ratelimit-reset"]
    cfg = write_config(tmp_path / "c.toml", mock.base_url, models, extra_endpoint=FAST_RETRY)
    data = write_dataset(tmp_path / "d.jsonl", 2)
    code, out = _run(tmp_path, cfg, ",".join(models), data)
    rs = rows(out)
    assert code == 0 and all(r["error"] is None and r["attempts"] == 2 for r in rs)
    _assert_told_waits_honoured(mock)


def _litellm_config(path: Path, base_url: str, models: list[str], key_env: str) -> Path:
    """The same mock behind the litellm provider (`openai/<name>`: litellm's OpenAI client)."""
    text = (
        f'[[endpoints]]\nname = "lite"\nkind = "litellm"\nbase_url = "{base_url}"\n'
        f'api_key_env = "{key_env}"\nmax_concurrency = 2\n{FAST_RETRY}\n'
    )
    for m in models:
        text += f'[[models]]\nname = "{m}"\nendpoint = "lite"\nmodel = "openai/{m}"\n'
    path.write_text(text)
    return path


def test_litellm_key_out_of_quota_stops_its_lane(tmp_path: Path, mock: MockServer, monkeypatch: pytest.MonkeyPatch):
    """OpenAI's 429 `insufficient_quota` through litellm's RateLimitError: out of quota, not retried."""
    monkeypatch.setenv("LITE_Q_KEY", "dry-lite-key")
    cfg = _litellm_config(tmp_path / "c.toml", mock.base_url, ["ok-lite"], "LITE_Q_KEY")
    code, out = _run(tmp_path, cfg, "ok-lite", write_dataset(tmp_path / "d.jsonl", 10))
    rs = rows(out)
    assert code == 3 and len(rs) == 10 and all(r["error"] for r in rs)
    assert mock.keys["dry-lite-key"] <= 2  # the lane stopped at once
    assert all("out of quota" in r["error"] and "dry-lite-key" not in r["error"] for r in rs)
    assert {r["error_kind"] for r in rs} <= {"quota", "skipped"} and rs[0]["error_kind"] == "quota"


def test_litellm_overloaded_and_rate_limit_headers_are_honoured(
    tmp_path: Path, mock: MockServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("LITE_KEY", "lite-key")
    models = ["overloaded-once", "ratelimit-ms", "ratelimit-reset"]
    cfg = _litellm_config(tmp_path / "c.toml", mock.base_url, models, "LITE_KEY")
    code, out = _run(tmp_path, cfg, ",".join(models), write_dataset(tmp_path / "d.jsonl", 2))
    rs = rows(out)
    assert code == 0 and len(rs) == 6 and all(r["error"] is None and r["attempts"] == 2 for r in rs)
    _assert_told_waits_honoured(mock)


def test_limits_are_learned_from_headers_and_reported(tmp_path: Path, mock: MockServer):
    mock.report_limits = (3000, 200_000)
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-learn"], extra_endpoint="tpm = 1000000\n")
    data = write_dataset(tmp_path / "d.jsonl", 20)
    code, out = _run(tmp_path, cfg, "ok-learn", data)
    assert code == 0
    (lane,) = orjson.loads((out / "manifest.json").read_bytes())["lanes"]["ok-learn"]
    assert (lane["rpm"], lane["rpm_source"]) == (3000, "provider")  # none configured: adopted
    assert (lane["tpm"], lane["tpm_source"]) == (200_000, "provider")  # configured higher: lowered
    assert lane["admitted"] == 20 and lane["use"] is not None
    log = (out / "log.txt").read_text()
    assert log.count("configured tpm 1e+06 is above the 200000 the provider reports") == 1
    assert mock.max_in_window("") <= 50  # paced at the learned 3,000 RPM = 50 a second


def test_a_server_ignoring_n_keeps_its_choice_and_sends_the_rest_separately(tmp_path: Path, mock: MockServer):
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["no-n-a"], extra_endpoint="max_concurrency = 1\n")
    data = write_dataset(tmp_path / "d.jsonl", 6)
    code, out = _run(tmp_path, cfg, "no-n-a", data, "--samples", "4", "--temperature", "0.7")
    rs = rows(out)
    assert code == 0 and len(rs) == 24 and all(r["error"] is None for r in rs)
    assert all(r["attempts"] == 1 for r in rs)  # no retry burned on it
    assert len({r["key"] for r in rs}) == 24
    with_n = [a for a in mock.arrivals if a[3] == 4]
    assert 1 <= len(with_n) <= 2  # the item(s) already queued when we learned it; then one by one
    assert mock.total == 24  # one call per sample: every answer that came back was kept
    assert (out / "log.txt").read_text().count("ignores `n`") == 1


def test_supports_n_false_in_config_never_sends_n(tmp_path: Path, mock: MockServer):
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["no-n-b"], extra_endpoint="supports_n = false\n")
    data = write_dataset(tmp_path / "d.jsonl", 3)
    code, _ = _run(tmp_path, cfg, "no-n-b", data, "--samples", "4", "--temperature", "0.7")
    assert code == 0 and mock.total == 12 and {a[3] for a in mock.arrivals} == {1}


def test_a_hung_probe_does_not_hold_a_lane_without_limits_to_one_call(tmp_path: Path):
    """No rpm/tpm: the lane's first call alone probes the key's limits. A probe that times out teaches
    nothing, so the calls behind it go out together instead of one timeout after another."""
    srv = MockServer(timeout_hang_s=3.0, faults={"hang": 1.0}).start()
    try:
        cfg = write_config(
            tmp_path / "c.toml", srv.base_url, ["ok-hung"],
            extra_endpoint="timeout_s = 1\nmax_attempts = 1\nmax_concurrency = 10\n",
        )
        data = write_dataset(tmp_path / "d.jsonl", 10)
        code, out = _run(tmp_path, cfg, "ok-hung", data)
        rs = rows(out)
        assert code == 3 and len(rs) == 10 and all("timed out" in (r["error"] or "") for r in rs)
        ts = sorted(t for t, *_ in srv.arrivals)
        assert len(ts) == 10
        # One timeout (1 s) after the probe, the other nine were sent together, not 1 s apart each.
        assert ts[-1] - ts[1] < 0.8, [round(t - ts[0], 2) for t in ts]
    finally:
        srv.stop()
