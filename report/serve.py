"""`evalsweep view RUN_DIR... [--out DIR] [--port N]`: write the report (into a temporary folder unless
--out is given) and serve it on 127.0.0.1 until Ctrl-C. The page needs no server (it works from
file://); this is for a remote machine reached through an SSH tunnel, or a browser that blocks file://.
"""

from __future__ import annotations

import argparse
import functools
import tempfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # one line per file would drown the URL
        return None


def cli_main(argv: list[str]) -> int:
    from report import add_arguments, main

    p = argparse.ArgumentParser(prog="evalsweep view", description="Serve the report and sample viewer.")
    add_arguments(p, out_required=False)
    p.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (0: any free port)")
    a = p.parse_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="evalsweep-view-"))
    main(a.run_dirs, out, a.models_table)
    handler = functools.partial(_Quiet, directory=str(out))
    with ThreadingHTTPServer(("127.0.0.1", a.port), handler) as httpd:
        print(f"viewer: http://127.0.0.1:{httpd.server_address[1]}/index.html  (Ctrl-C to stop)", flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0
