"""The cache knows who answered (#36): a second server serving the same model id got the first server's
answers. An answer is served for another call only where the config says it is the same provider: the
same base URL (any of its keys), or the endpoints one model is pooled over; a provider's public API keeps
the bare model id as its key (existing caches keep working there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main
from runner.config import Endpoint
from runner.pool import server_of
from tests.helpers import rows, run_args, write_dataset
from tests.mock_openai import MockServer


@pytest.fixture
def two():
    a, b = MockServer().start(), MockServer().start()
    yield a, b
    a.stop()
    b.stop()


def _cfg(path: Path, a: MockServer, b: MockServer) -> Path:
    path.write_text(f"""
[[endpoints]]
name = "a"
kind = "openai"
base_url = "{a.base_url}"

[[endpoints]]
name = "b"
kind = "openai"
base_url = "{b.base_url}"

[[models]]
name = "on-a"
endpoint = "a"
model = "ok-a"
price_in = 1.0
price_out = 2.0

[[models]]
name = "on-b"
endpoint = "b"
model = "ok-a"
price_in = 1.0
price_out = 2.0
""")
    return path


def test_two_servers_of_one_model_id_never_share_answers(tmp_path: Path, two: tuple[MockServer, MockServer]):
    a, b = two
    cfg = _cfg(tmp_path / "c.toml", a, b)
    data = write_dataset(tmp_path / "d.jsonl", 5)
    assert main(run_args(data, "on-a", cfg, tmp_path / "ra")) == 0
    assert a.total == 5
    assert main(run_args(data, "on-b", cfg, tmp_path / "rb")) == 0
    assert b.total == 5  # its own answers: before, 0 (the first server's, from the cache)
    assert not any(r["cached"] for r in rows(tmp_path / "rb"))
    assert main(run_args(data, "on-a", cfg, tmp_path / "ra2")) == 0  # the same server again: from the cache
    assert a.total == 5 and all(r["cached"] for r in rows(tmp_path / "ra2"))


def test_what_keys_the_server():
    assert server_of(Endpoint(name="o", kind="openai", base_url="https://api.openai.com/v1")) is None
    assert server_of(Endpoint(name="o", kind="openai")) is None
    assert server_of(Endpoint(name="v", kind="openai", base_url="http://GPU-1:8000/v1/")) == "gpu-1:8000/v1"
    assert server_of(Endpoint(name="s", kind="sim")) is None
