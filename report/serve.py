"""`evalsweep view DIR... [--out DIR] [--port N]`: write the report and serve it on 127.0.0.1 until
Ctrl-C. DIR may be a run or a sweep's folder (every run under it, as `evalsweep demo` lays them out).
The report is written beside the runs (a sweep's `DIR/report`, a run's `RUN_DIR/report`, several
runs' common parent `report`) or in --out: a file kept, never a temporary folder left behind. The page
needs no server (it works from file://); this is for a remote machine reached through an SSH tunnel,
or a browser that blocks file://.
"""

from __future__ import annotations

import argparse
import functools
import os
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # one line per file would drown the URL
        return None


def default_out(given: list[Path]) -> Path:
    """Beside the runs: inside the one folder given (a sweep's or a run's), else in the given
    folders' common parent."""
    if len(given) == 1:
        return given[0] / "report"
    return Path(os.path.commonpath([p.resolve() for p in given])) / "report"


def cli_main(argv: list[str]) -> int:
    from report import add_arguments, main
    from report.load import run_dirs_of

    p = argparse.ArgumentParser(prog="evalsweep view", description="Serve the report and sample viewer.")
    add_arguments(p, out_required=False)
    p.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (0: any free port)")
    a = p.parse_args(argv)
    out = a.out or default_out(a.run_dirs)
    main(run_dirs_of(a.run_dirs), out, a.models_table)
    handler = functools.partial(_Quiet, directory=str(out))
    with ThreadingHTTPServer(("127.0.0.1", a.port), handler) as httpd:
        print(f"viewer: http://127.0.0.1:{httpd.server_address[1]}/index.html  (Ctrl-C to stop)", flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0
