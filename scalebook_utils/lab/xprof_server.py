"""xprof_server: start XProf, the profiler UI of book ch. 9, on 127.0.0.1 over a trace folder, and stop it again.

Book ch. 9 §"The JAX Profiler": a trace written by `jax.profiler.trace(DIR)` (DIR/plugins/profile/RUN/*.xplane.pb)
is read in XProf (`pip install xprof`; the same tools TensorBoard's profile plugin shows): the trace viewer, the op
profile, the graph viewer and the memory viewer. `start(DIR)` runs the XProf server

- in its own process group (so `stop()` ends it and everything it started, and nothing is left when Python exits),
- on 127.0.0.1 only, on a free HTTP port and a free gRPC port (XProf's own default gRPC port, 50051, is often taken),
- with its output in a log file; it waits until the server answers and returns an `XProf` whose `url` to open is
  printed. When XProf is missing, or the port asked for is taken, it returns an `XProf` with `ok == False` whose
  `message` is one sentence naming the command that fixes it: a notebook that calls `start` still runs on.

`XProf.trace_events()` asks the running server for its trace viewer's data (the events it draws, µs), which is how
the project's own trace parser (`profiling.load_trace`) is checked against XProf (tests/test_xprof.py).

`python -m scalebook_utils.lab.xprof_server DIR` (`make profile`) starts it from a shell and waits for Ctrl-C.

Pure standard library (no jax): it runs a program and speaks HTTP.
"""

from __future__ import annotations

import atexit
import gzip
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

__all__ = ["INSTALL_HINT", "XProf", "find_xprof_python", "free_port", "op_totals", "start", "main"]

INSTALL_HINT = "pip install xprof"

# Runs in XProf's own Python: binds the web server to 127.0.0.1 (xprof's `server.start_server` binds every
# interface) and its gRPC worker address to loopback. Falls back to the `xprof` command when the module's layout
# is not the one known here (xprof 2.24).
_LAUNCHER = r"""
import os, sys
logdir, port, grpc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    import xprof.server as s
    s._get_wildcard_address = lambda port: "127.0.0.1"
    start = s.start_server
except (ImportError, AttributeError):
    exe = os.path.join(os.path.dirname(sys.executable), "xprof")
    os.execv(exe, [exe, "--logdir=" + logdir, "--port=%d" % port, "--grpc_port=%d" % grpc])
start(logdir=logdir, port=port, grpc_port=grpc, worker_service_address="127.0.0.1:%d" % grpc)
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_taken(port: int) -> bool:
    """True when something listens on 127.0.0.1:`port` (a port in TIME_WAIT after a server stopped is free:
    SO_REUSEADDR, as servers set it, still refuses a port with a listener)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def find_xprof_python() -> str | None:
    """The Python interpreter that has the `xprof` package: this one, else the one named in the first line of the
    `xprof` command on PATH (a separate venv). None when XProf is not installed."""
    if importlib.util.find_spec("xprof") is not None:
        return sys.executable
    exe = shutil.which("xprof")
    if exe is None:
        return None
    try:
        with open(exe, "rb") as fh:
            first = fh.readline().decode("utf-8", "replace").strip()
    except OSError:
        return None
    if first.startswith("#!"):
        interp = first[2:].strip().split()[0]
        if os.path.isfile(interp):
            return interp
    return None


@dataclass
class XProf:
    """A started (or failed) XProf server. `ok`: it answers at `url`; otherwise `message` says why, in one sentence
    with the command that fixes it. `stop()` ends its process group (safe to call twice)."""

    logdir: str
    port: int = 0
    grpc_port: int = 0
    message: str = ""
    log_path: str = ""
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/" if self.port else ""

    def __str__(self) -> str:
        return self.message

    def _repr_pretty_(self, p, cycle) -> None:  # IPython shows the sentence, not the dataclass
        p.text(self.message)

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after 5 s if it is still there."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        except ProcessLookupError:
            pass
        self.message = f"XProf on port {self.port} stopped."

    # --- the HTTP API the XProf front end uses ---------------------------------------------------------

    def _get(self, route: str, **params) -> object:
        if not self.ok:
            raise RuntimeError(f"XProf is not running: {self.message}")
        q = urllib.parse.urlencode(params)
        req = urllib.request.Request(
            f"{self.url}data/plugin/profile/{route}" + (f"?{q}" if q else ""), headers={"Accept-Encoding": "gzip"}
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            body = resp.read()
            if resp.headers.get("Content-Encoding") == "gzip" or body[:2] == b"\x1f\x8b":
                body = gzip.decompress(body)
        return json.loads(body.decode("utf-8")) if body else None

    def runs(self) -> list[str]:
        """The profile runs XProf found under `logdir` (one per `jax.profiler.trace`, named by its start time)."""
        return list(self._get("runs") or [])

    def trace_events(self, run: str | None = None, host: str | None = None) -> list[dict]:
        """The events XProf's trace viewer draws for `run` (default: the newest) on `host` (default: the first):
        Chrome-trace dicts with `name`, `ts` and `dur` in µs, `pid`/`tid` (lanes)."""
        run = run or sorted(self.runs())[-1]
        if host is None:
            hosts = self._get("hosts", run=run, tag="trace_viewer@") or [{}]
            host = hosts[0].get("hostname", "")
        data = self._get("data", run=run, tag="trace_viewer@", host=host) or {}
        return [e for e in data.get("traceEvents", []) if isinstance(e, dict)]


def op_totals(events: list[dict], names=None) -> dict[str, float]:
    """µs per event name, summed over XProf's trace viewer events (complete events, "ph": "X"); only `names`
    when given (e.g. the HLO ops of an op table)."""
    keep = None if names is None else set(names)
    out: dict[str, float] = {}
    for e in events:
        if e.get("ph") == "X" and (keep is None or e.get("name") in keep):
            out[e["name"]] = out.get(e["name"], 0.0) + float(e.get("dur", 0.0))
    return out


_STARTED: list[XProf] = []


@atexit.register
def _stop_all() -> None:  # no server outlives the Python that started it
    for xp in _STARTED:
        xp.stop()


def start(
    logdir: str | os.PathLike, *, port: int | None = None, grpc_port: int | None = None, timeout_s: float = 90.0
) -> XProf:
    """Start XProf over `logdir` on 127.0.0.1 (`port`/`grpc_port`: free ones when None) and wait until it answers.

    Never raises for the two common problems; returns an `XProf` with `ok == False` and a one-sentence `message`:
    XProf not installed (→ `pip install xprof`), or the port asked for taken (→ another port, or stop the server
    holding it). A missing `logdir` is a ValueError (nothing to show)."""
    logdir = os.path.abspath(os.fspath(logdir))
    if not os.path.isdir(logdir):
        raise ValueError(f"trace folder {logdir!r} does not exist: write a trace there with jax.profiler.trace first")
    python = find_xprof_python()
    if python is None:
        return XProf(
            logdir,
            message=f"XProf is not installed in this environment: run `{INSTALL_HINT}` (in this "
            'repository: pip install -e ".[profile]") and re-run this cell; the rest of '
            "the notebook does not need it.",
        )
    if port is not None and _port_taken(int(port)):
        return XProf(
            logdir,
            int(port),
            message=f"port {port} on 127.0.0.1 is taken (an XProf started earlier?): "
            "stop that server (`xp.stop()`, or `kill` its pid) or call "
            "`start(dir)` without `port=` to get a free one.",
        )
    port = int(port) if port is not None else free_port()
    grpc_port = int(grpc_port) if grpc_port is not None else free_port()
    while grpc_port == port:
        grpc_port = free_port()
    log_fd, log_path = tempfile.mkstemp(prefix="scalebook-xprof-", suffix=".log")
    with os.fdopen(log_fd, "wb") as log:
        proc = subprocess.Popen(
            [python, "-c", _LAUNCHER, logdir, str(port), str(grpc_port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    xp = XProf(logdir, port, grpc_port, log_path=log_path, proc=proc)
    _STARTED.append(xp)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log_path, errors="replace") as fh:
                tail = fh.read()[-400:]
            xp.proc = None
            why = "its port was taken" if "in use" in tail.lower() else f"it exited (log {log_path})"
            xp.message = (
                f"XProf did not start: {why}; run `xprof --logdir={logdir} --port={free_port()}` by hand "
                "to see its error."
            )
            return xp
        try:
            urllib.request.urlopen(f"{xp.url}data/plugin/profile/runs", timeout=2).read()
            xp.message = (
                f"XProf is serving {logdir} at {xp.url} (trace viewer, op profile, graph and memory "
                f"viewer; gRPC port {grpc_port}); xp.stop() ends it."
            )
            return xp
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.3)
    xp.stop()
    xp.message = f"XProf did not answer within {timeout_s:.0f} s (log {log_path}); try again, or start it by hand."
    return xp


def main(argv: list[str] | None = None) -> int:
    """`python -m scalebook_utils.lab.xprof_server DIR [PORT]`: serve DIR until Ctrl-C (`make profile`)."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m scalebook_utils.lab.xprof_server TRACE_DIR [PORT]")
        return 2
    logdir = argv[0]
    if not os.path.isdir(logdir):
        print(f"no trace folder {logdir!r}: run notebooks/09_profiling.ipynb first (it writes its traces there)")
        return 1
    xp = start(logdir, port=int(argv[1]) if len(argv) > 1 else None)
    print(xp.message, flush=True)
    if not xp.ok:
        return 1
    try:
        while xp.ok:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        xp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
