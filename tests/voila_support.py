"""A hermetic Voilà server for the browser tests: one notebook rendered as an app (outputs only, no code).

``VoilaServer`` is ``browser_support.LabServer`` with Voilà's command line: the same temporary Jupyter
config/data/runtime dirs and IPython dir, a random token, 127.0.0.1 on a free port with
``--Voila.port_retries=0``, its own process group, killed with its kernel by ``stop()``. Voilà serves the
notebook at ``/`` and starts one kernel per page load, so the readiness check must not load ``/``: it
asks for ``/api/status``, which Voilà answers with a redirect — any HTTP answer means it is up.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import browser_support as bs


@dataclass
class VoilaServer(bs.LabServer):
    notebook: Path | None = None
    kind = "voila"

    def _command(self) -> list[str]:
        assert self.notebook is not None, "VoilaServer needs the notebook to serve"
        return [
            sys.executable, "-m", "voila", str(self.notebook),
            "--no-browser",
            "--Voila.ip=127.0.0.1",
            f"--Voila.port={self.port}",
            "--Voila.port_retries=0",
            f"--Voila.token={self.token}",
            f"--Voila.root_dir={self.root_dir}",
            "--VoilaConfiguration.show_tracebacks=True",
        ]  # fmt: skip

    def _answers(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            conn.request("GET", "/api/status")
            return conn.getresponse().status in (200, 302, 404)
        except OSError:
            return False
        finally:
            conn.close()

    def app_url(self) -> str:
        """The rendered notebook, with the token."""
        return f"{self.base_url}/?token={self.token}"


@contextlib.contextmanager
def voila_server(notebook: str | os.PathLike, root_dir: str | os.PathLike | None = None) -> Iterator[VoilaServer]:
    nb = Path(notebook).resolve()
    server = VoilaServer(Path(root_dir or nb.parent).resolve(), notebook=nb)
    try:
        yield server.start()
    finally:
        server.stop()
