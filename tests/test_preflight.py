"""Pre-flight against real local servers: a closed port, a server refusing the key (401), a name that
does not resolve. Each is named with host:port and its cause and exits 2 before anything is spent
(the run and the dry run alike); `--keep-going` runs anyway and its error rows name host and cause."""

from __future__ import annotations

import http.server
import shutil
import ssl
import subprocess
import threading
from pathlib import Path

import orjson
import pytest

from cli.main import main
from tests.helpers import closed_port, fake_key, rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


@pytest.fixture
def picky(monkeypatch: pytest.MonkeyPatch):
    """A server that accepts only the key fake_key("good-1234")."""
    srv = MockServer(keys={fake_key("good-1234")}).start()
    monkeypatch.setenv("PF_GOOD", fake_key("good-1234"))
    monkeypatch.setenv("PF_BAD", fake_key("wrong-5678"))
    yield srv
    srv.stop()


@pytest.mark.parametrize("dry", [False, True])
def test_closed_port_is_named_and_exits_2_before_anything(tmp_path: Path, capfd, dry: bool):
    port = closed_port()
    cfg = write_config(tmp_path / "c.toml", f"http://127.0.0.1:{port}/v1", ["m"])
    data = write_dataset(tmp_path / "d.jsonl", 3)
    args = run_args(data, "m", cfg, tmp_path / "run") + (["--dry-run"] if dry else [])
    assert main(args) == 2
    err = capfd.readouterr().err
    assert f"endpoint 'mock' (127.0.0.1:{port}): connection refused" in err, err
    assert "--keep-going" in err and not (tmp_path / "run").exists()  # nothing made, nothing sent


def test_bad_key_is_named_by_its_env_var_never_its_value(tmp_path: Path, capfd, picky: MockServer):
    cfg = write_config(tmp_path / "c.toml", picky.base_url, ["m"], key_env="PF_BAD")
    data = write_dataset(tmp_path / "d.jsonl", 3)
    assert main(run_args(data, "m", cfg, tmp_path / "run")) == 2
    err = capfd.readouterr().err
    assert f"(127.0.0.1:{picky.port}): HTTP 401: the key was refused (key from PF_BAD)" in err, err
    assert "sk-wrong" not in err and picky.total == 0 and picky.models_requests == 1
    # the good key passes the pre-flight (one GET /models) and the run goes on
    cfg = write_config(tmp_path / "c.toml", picky.base_url, ["m"], key_env="PF_GOOD")
    assert main(run_args(data, "m", cfg, tmp_path / "run")) == 0
    assert picky.models_requests == 2 and picky.total == 3


def test_dns_failure_is_named(tmp_path: Path, capfd):
    cfg = write_config(tmp_path / "c.toml", "http://no-such-host.invalid:8080/v1", ["m"])
    data = write_dataset(tmp_path / "d.jsonl", 2)
    assert main(run_args(data, "m", cfg, tmp_path / "run", "--dry-run")) == 2
    assert "(no-such-host.invalid:8080): DNS lookup failed" in capfd.readouterr().err


def test_tcp_connect_for_endpoints_without_a_models_route(tmp_path: Path, capfd):
    port = closed_port()
    (tmp_path / "c.toml").write_text(
        f'[[endpoints]]\nname = "claude"\nkind = "anthropic"\nbase_url = "http://127.0.0.1:{port}"\n'
        '[[models]]\nname = "c"\nendpoint = "claude"\nprice_in = 1\nprice_out = 1\n'
    )
    data = write_dataset(tmp_path / "d.jsonl", 2)
    assert main(run_args(data, "c", tmp_path / "c.toml", tmp_path / "run")) == 2
    assert f"endpoint 'claude' (127.0.0.1:{port}): connection refused" in capfd.readouterr().err


def test_keep_going_runs_and_error_rows_name_host_and_cause(tmp_path: Path, capfd):
    port = closed_port()
    cfg = write_config(
        tmp_path / "c.toml",
        f"http://127.0.0.1:{port}/v1",
        ["m"],
        extra_endpoint="max_attempts = 4\nretry_initial_s = 0.01\n",
    )
    data = write_dataset(tmp_path / "d.jsonl", 2)
    assert main(run_args(data, "m", cfg, tmp_path / "run", "--keep-going")) == 3
    err = capfd.readouterr().err
    assert f"warning: endpoint 'mock' (127.0.0.1:{port}): connection refused" in err
    got = rows(tmp_path / "run")
    assert len(got) == 2
    assert all(r["error"] == f"connection error: 127.0.0.1:{port}: connection refused" for r in got), got
    lanes = orjson.loads((tmp_path / "run" / "manifest.json").read_bytes())["lanes"]["m"]
    assert lanes[0]["state"] == "down" and "connection refused" in lanes[0]["error"]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a self-signed certificate")
def test_tls_failure_is_named(tmp_path: Path, capfd):
    """A real TLS server whose self-signed certificate the client cannot verify."""
    key, crt = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(crt),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.handle_error = lambda *a: None  # the failed handshake, on the server's side
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        port = srv.server_address[1]
        cfg = write_config(tmp_path / "c.toml", f"https://127.0.0.1:{port}/v1", ["m"])
        data = write_dataset(tmp_path / "d.jsonl", 2)
        assert main(run_args(data, "m", cfg, tmp_path / "run")) == 2
        err = capfd.readouterr().err
        assert f"endpoint 'mock' (127.0.0.1:{port}): TLS: certificate verify failed" in err, err
    finally:
        srv.shutdown()
