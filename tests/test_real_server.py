"""The openai provider against real OpenAI-compatible servers on 127.0.0.1: llama-cpp-python's server
(a tiny model the tests make themselves, see tests/tiny_gguf.py) and the litellm proxy in front of it.

The servers live in their own virtualenv (`.venv-servers`, made by .ci/run: llama-cpp-python is built
from its sdist there, and its web stack stays out of ours). These tests skip, saying why, only when that
environment cannot be found; set EVALSWEEP_SERVERS_PYTHON to use another interpreter.

What the tests found where the real servers differ from tests/mock_openai.py is asserted below and
listed in the module's `DIFFERENCES`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson
import pytest

from tests.helpers import REPO, cli, fake_key, rows, run_args, write_dataset

DIFFERENCES = """
- llama-cpp-python ignores `n`: one choice for n = 3, and so does the litellm proxy in front of it
  (the mock honours n).
- llama-cpp-python sends no x-ratelimit-* headers and accepts any key; the litellm proxy sends
  x-ratelimit-limit/remaining-requests/-tokens (no reset-*) when its model has rpm/tpm.
- a field of the wrong type is HTTP 500 with a pydantic "validation error" and a Python traceback in
  the body (through the proxy: a 500 "InternalServerError" wrapping it), not a 400/422.
- a prompt beyond the context window is HTTP 400 `context_length_exceeded` naming the token counts.
- the proxy without a database answers a key that is not its master key with HTTP 400
  `no_db_connection`, not 401.
"""

LLAMA_VERSION = "0.3.36"
MASTER_KEY = f"sk-{secrets.token_hex(12)}"  # made per test session: no key-shaped string in the tree


def _servers_python() -> str:
    for cand in (
        os.environ.get("EVALSWEEP_SERVERS_PYTHON"),
        str(REPO / ".venv-servers" / "bin" / "python"),
        sys.executable,
    ):
        if cand and Path(cand).exists():
            r = subprocess.run([cand, "-c", "import llama_cpp.server"], capture_output=True)
            if r.returncode == 0:
                return cand
    pytest.skip("llama-cpp-python[server] is not installed (.ci/run builds it into .venv-servers)")


def _sdist() -> Path:
    env = os.environ.get("EVALSWEEP_LLAMA_SDIST")
    found = [Path(env)] if env else sorted((REPO / ".venv-servers" / "sdist").glob("llama_cpp_python-*.tar.gz"))
    if not found or not found[-1].exists():
        pytest.skip("the llama-cpp-python sdist (for its vocab-only GGUF) is not in .venv-servers/sdist")
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, timeout: float, headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {_tail(proc)}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"server at {url} not up after {timeout:.0f} s")


def _tail(proc: subprocess.Popen) -> str:
    log = getattr(proc, "log_path", None)
    return Path(log).read_text()[-2000:] if log else ""


def _start(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    f = log.open("w")
    proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=log.parent)
    proc.log_path = str(log)  # type: ignore[attr-defined]
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory):
    """(base_url, log path) of a llama-cpp-python server on the tiny model."""
    py = _servers_python()
    pytest.importorskip("gguf", reason="gguf is not installed (pip install -e '.[servers]'; .ci/run does)")
    from tests.tiny_gguf import vocab_from_sdist, write_tiny_model

    d = tmp_path_factory.mktemp("llama")
    model = write_tiny_model(vocab_from_sdist(_sdist(), d / "vocab.gguf"), d / "tiny.gguf")
    port = _free_port()
    proc = _start(
        [py, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", "tiny", "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "512", "--n_threads", "1"],
        d / "server.log",
    )
    try:
        _wait_http(f"http://127.0.0.1:{port}/v1/models", proc, 120)
        yield f"http://127.0.0.1:{port}/v1", d / "server.log"
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def proxy(llama, tmp_path_factory: pytest.TempPathFactory):
    """The litellm proxy (a second real gateway) in front of the same llama server."""
    py = _servers_python()
    litellm = Path(py).parent / "litellm"
    if not litellm.exists() and not shutil.which("litellm"):
        pytest.skip("litellm[proxy] is not installed beside llama-cpp-python (.ci/run installs both)")
    d = tmp_path_factory.mktemp("proxy")
    (d / "config.yaml").write_text(
        "model_list:\n  - model_name: tiny-proxy\n    litellm_params:\n      model: openai/tiny\n"
        f"      api_base: {llama[0]}\n      api_key: none\n      rpm: 600\n      tpm: 100000\n"
    )
    port = _free_port()
    env = {**os.environ, "LITELLM_MASTER_KEY": MASTER_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    exe = str(litellm) if litellm.exists() else "litellm"
    proc = _start([exe, "--config", str(d / "config.yaml"), "--host", "127.0.0.1", "--port", str(port)],
                  d / "proxy.log", env)
    try:
        _wait_http(f"http://127.0.0.1:{port}/health/liveliness", proc, 180)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        _stop(proc)


def _config(path: Path, base_url: str, model: str, *, key_env: str | None = None, extra_model: str = "") -> Path:
    key = f'api_key_env = "{key_env}"\n' if key_env else ""
    path.write_text(
        f'[[endpoints]]\nname = "real"\nkind = "openai"\nbase_url = "{base_url}"\n{key}max_concurrency = 4\n'
        "retry_initial_s = 0.05\nretry_max_s = 0.2\ntimeout_s = 120\n\n"
        f'[[models]]\nname = "{model}"\nendpoint = "real"\nprice_in = 0.0\nprice_out = 0.0\n{extra_model}\n'
    )
    return path


def _run(tmp: Path, base_url: str, model: str, n_items: int, *extra: str, out: str = "run",
         key: str | None = None, extra_model: str = "") -> tuple[subprocess.CompletedProcess, Path]:
    cfg = _config(tmp / f"{out}.toml", base_url, model, key_env="REAL_KEY" if key else None,
                  extra_model=extra_model)
    data = write_dataset(tmp / f"{out}.jsonl", n_items)
    env = {**os.environ, "EVALSWEEP_CACHE_DIR": str(tmp / f"{out}-cache"), "REAL_KEY": key or ""}
    r = cli(*run_args(data, model, cfg, tmp / out, *extra), env=env, timeout=600)
    return r, tmp / out


def test_llama_server_end_to_end(tmp_path: Path, llama):
    base_url, log = llama
    r, out = _run(tmp_path, base_url, "tiny", 8, extra_model="params = { max_tokens = 6 }\n")
    rs = rows(out)
    assert r.returncode == 0, r.stderr
    assert len(rs) == 8 and all(x["error"] is None and isinstance(x["text"], str) for x in rs)
    # usage is real token counts; a 6-token cap ends every answer with finish_reason "length"
    assert all(x["usage"]["output_tokens"] <= 6 and x["usage"]["input_tokens"] > 10 for x in rs)
    assert {x["finish_reason"] for x in rs} <= {"length", "stop"} and "length" in {x["finish_reason"] for x in rs}
    # the chat template in the model's metadata is what the server rendered the messages with
    assert "chat template" in log.read_text().lower() or "chat_template" in log.read_text()
    man = orjson.loads((out / "manifest.json").read_bytes())
    (lane,) = man["lanes"]["tiny"]
    assert lane["rpm"] is None and lane["rpm_source"] is None  # the server reports no limits
    score = cli("score", str(out))
    assert score.returncode == 0, score.stderr
    assert (out / "scores.json").exists()


def test_llama_server_ignores_n_and_no_retry_is_burned(tmp_path: Path, llama):
    r, out = _run(tmp_path, llama[0], "tiny", 3, "--samples", "3", "--temperature", "0.8",
                  extra_model="params = { max_tokens = 4 }\n")
    rs = rows(out)
    assert r.returncode == 0, r.stderr
    assert len(rs) == 9 and all(x["error"] is None and x["attempts"] == 1 for x in rs)
    assert (out / "log.txt").read_text().count("ignores `n`") == 1


def test_llama_server_errors_by_meaning(tmp_path: Path, llama):
    # A field of the wrong type: the server says so with HTTP 500 (a validation error), never retried.
    r, out = _run(tmp_path, llama[0], "tiny", 1, out="bad", extra_model='params = { max_tokens = "six" }\n')
    (row,) = rows(out)
    assert r.returncode == 3 and row["error_kind"] == "fatal" and row["attempts"] == 1 and "validation" in row["error"]
    # A prompt beyond the 512-token context: HTTP 400 naming the counts, never retried.
    data = tmp_path / "long.jsonl"
    data.write_bytes(orjson.dumps({"id": "x", "prompt": "word " * 2000, "answer": "A"}) + b"\n")
    cfg = _config(tmp_path / "long.toml", llama[0], "tiny")
    r = cli(*run_args(data, "tiny", cfg, tmp_path / "long"),
            env={**os.environ, "EVALSWEEP_CACHE_DIR": str(tmp_path / "c2")})
    (row,) = rows(tmp_path / "long")
    assert r.returncode == 3 and row["attempts"] == 1 and row["error_kind"] == "fatal", row
    assert "HTTP 400" in row["error"] and "context_length_exceeded" in row["error"]


def test_litellm_proxy_end_to_end(tmp_path: Path, proxy):
    r, out = _run(tmp_path, proxy, "tiny-proxy", 6, "--samples", "2", "--temperature", "0.8",
                  key=MASTER_KEY, extra_model="params = { max_tokens = 5 }\n")
    rs = rows(out)
    assert r.returncode == 0, r.stderr
    assert len(rs) == 12 and all(x["error"] is None and x["attempts"] == 1 for x in rs)
    assert all(x["usage"]["input_tokens"] and x["usage"]["output_tokens"] for x in rs)
    assert (out / "log.txt").read_text().count("ignores `n`") == 1
    # the proxy reports its limits: the lane (no rpm/tpm configured) adopts them
    (lane,) = orjson.loads((out / "manifest.json").read_bytes())["lanes"]["tiny-proxy"]
    assert (lane["rpm"], lane["rpm_source"], lane["tpm"], lane["tpm_source"]) == (600, "provider", 100000, "provider")
    assert MASTER_KEY not in (out / "results.jsonl").read_text() + (out / "log.txt").read_text()


def test_litellm_proxy_refuses_a_wrong_key_without_retrying(tmp_path: Path, proxy):
    # --keep-going: whatever the pre-flight's GET /models makes of the key, the calls themselves are tested
    r, out = _run(tmp_path, proxy, "tiny-proxy", 2, "--keep-going", key=fake_key("wrong-key"))
    rs = rows(out)
    assert r.returncode == 3 and all(x["error_kind"] == "fatal" and x["attempts"] == 1 for x in rs)
    assert all("HTTP 400" in x["error"] and "no_db_connection" in x["error"] for x in rs)
    assert fake_key("wrong-key") not in (out / "results.jsonl").read_text()
