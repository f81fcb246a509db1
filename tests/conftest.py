"""Shared test setup: no internet, shared data location, a fresh cache per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.servers import pg_cluster, pg_url, redis_server  # noqa: F401  (real-server fixtures)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} not present (CI and developer machines have ../shared)")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own evalsweep cache directory, so tests never see each other's answers."""
    monkeypatch.setenv("EVALSWEEP_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
