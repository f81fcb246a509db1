"""Streams that end (#39): the idle timeout counts content, not SSE comments; every streamed call has a
total deadline; a malformed event is skipped and counted, and a stream that goes on to deliver is kept,
never re-sent. Against the local mock server (tests.mock_sse's stream faults)."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers.openai import OpenAIProvider
from tests.mock_batch import MockBatchServer
from tests.test_stream import _call, _req


@pytest.fixture
def mock():
    srv = MockBatchServer(delay_s=0.0).start()
    srv.sse.gap_s, srv.sse.stall_s = 0.1, 30.0  # comments for 30 s: far past the 1 s idle timeout
    yield srv
    srv.stop()


def test_keep_alive_comments_after_content_do_not_hold_a_stream_open(mock: MockBatchServer):
    """Before: each comment reset the idle timeout, and the stream ended only when the server gave up."""
    p = OpenAIProvider(mock.base_url, timeout_s=1.0, stream_above_tokens=0)
    comp = _call(p, _req("Q [[stream:keepalive]]", 50), "ok-a")
    assert comp.finish_reasons == ["partial"] and p.partials == {"ok-a": 1}  # cut, kept, not re-sent
    assert mock.total == 1 and mock.sse.cut["keepalive"] == 1


def test_a_stream_of_keep_alives_alone_ends_as_one_error(mock: MockBatchServer):
    p = OpenAIProvider(mock.base_url, timeout_s=1.0, stream_above_tokens=0)
    comp = _call(p, _req("Q [[stream:keepalive_only]]", 50), "ok-a")
    assert comp.finish_reasons == ["partial"] and comp.texts == [None]
    assert mock.total == 1


def test_a_total_deadline_ends_a_slow_stream(mock: MockBatchServer):
    """Every event 0.2 s apart, content all along (the idle timeout never fires), a deadline of 0.5 s."""
    mock.sse.gap_s = 0.2
    p = OpenAIProvider(mock.base_url, timeout_s=5.0, stream_above_tokens=0)
    p.deadline_s = 0.5
    comp = _call(p, _req("Q [[stream:slow]]", 50), "ok-a")
    assert comp.finish_reasons == ["partial"] and mock.total == 1


def test_a_malformed_first_event_is_skipped_and_the_answer_kept(mock: MockBatchServer, caplog):
    """Before: the runner abandoned the stream at the malformed event and sent the call again (paid twice)."""
    p = OpenAIProvider(mock.base_url, timeout_s=5.0, stream_above_tokens=0)
    comp = _call(p, _req("Q [[stream:malformed]]", 50), "ok-a")
    assert comp.finish_reasons == ["stop"] and comp.texts[0]
    assert mock.total == 1  # never re-sent
    assert "a malformed event skipped" in caplog.text


def test_the_deadline_is_a_setting(tmp_path: Path):
    from runner.config import load_config
    from runner.pool import build_models

    cfg = tmp_path / "c.toml"
    cfg.write_text('[[endpoints]]\nname = "e"\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
                   'stream_deadline_s = 900\n[[models]]\nname = "m"\nendpoint = "e"\nmodel = "gpt-4o"\n')
    m = build_models(load_config(cfg), ["m"])["m"]
    assert m.lanes[0].provider.deadline_s == 900
