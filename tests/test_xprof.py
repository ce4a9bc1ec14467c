"""xprof_server (book ch. 9): XProf started on 127.0.0.1 over a trace, what its trace viewer reports checked against
the project's own trace parser (profiling.load_trace / op_table), and the two failures a notebook must survive
(XProf not installed, port taken) reported in one sentence.

The tests that need a running XProf skip when the `xprof` package is not installed (`pip install -e ".[profile]"`;
the dev extra installs it, so they run in CI).
"""

from __future__ import annotations

import math
import os
import socket
import sys
import urllib.request

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from scalebook_utils import profiling as prof  # noqa: E402
from scalebook_utils import xprof_server  # noqa: E402

needs_xprof = pytest.mark.skipif(
    xprof_server.find_xprof_python() is None, reason='xprof is not installed (pip install -e ".[profile]")'
)


def _mlp(x, w_in, w_out):
    with jax.named_scope("ffw_up"):
        h = jax.nn.relu(x @ w_in)  # h: f32[64, 256]
    with jax.named_scope("ffw_down"):
        return h @ w_out  # f32[64, 128]


def _args():
    return jnp.ones((64, 128)), jnp.full((128, 256), 0.01), jnp.full((256, 128), 0.01)


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("xprof")
    trace = prof.capture_trace(_mlp, *_args(), repeats=3, log_dir=d)
    return d, trace


@pytest.fixture(scope="module")
def server(trace_dir):
    xp = xprof_server.start(trace_dir[0])
    yield xp
    xp.stop()


def _listen_addresses(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp{,6} print them) of sockets listening on `port`."""
    out = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(name):
            continue
        with open(name) as fh:
            table = fh.read().splitlines()[1:]
        for line in table:
            parts = line.split()
            addr, p = parts[1].rsplit(":", 1)
            if int(p, 16) == port and parts[3] == "0A":  # 0A = LISTEN
                out.add(addr)
    return out


@needs_xprof
def test_xprof_serves_the_trace_on_loopback_only(server, trace_dir):
    assert server.ok, server.message
    assert server.url.startswith("http://127.0.0.1:") and str(server.port) in server.message
    assert server.port != server.grpc_port and server.grpc_port != 50051
    assert len(server.runs()) == 1
    if os.path.exists("/proc/net/tcp"):
        assert _listen_addresses(server.port) == {"0100007F"}, _listen_addresses(server.port)
    with urllib.request.urlopen(server.url, timeout=30) as resp:  # the UI's page itself
        assert resp.status == 200 and b"<" in resp.read(200)


@needs_xprof
def test_xprof_trace_viewer_matches_our_op_table(server, trace_dir):
    trace = trace_dir[1]
    rows = prof.op_table(trace)
    ours = {r.name: r.total_s * 1e6 for r in rows}
    theirs = xprof_server.op_totals(server.trace_events(), ours)
    assert set(theirs) == set(ours), (sorted(ours), sorted(theirs))
    for name, t in ours.items():  # same ops, same summed durations (µs), same number of executions
        assert math.isclose(theirs[name], t, rel_tol=1e-3, abs_tol=0.01), (name, theirs[name], t)
    counts = {}
    for e in server.trace_events():
        if e.get("ph") == "X" and e.get("name") in ours:
            counts[e["name"]] = counts.get(e["name"], 0) + 1
    assert counts == {r.name: r.count for r in rows}
    # the two matmuls are there under their HLO names, and their named scopes are in the HLO metadata
    mm = [r.name for r in rows if r.category == "matmul"]
    assert len(mm) == 2 and set(mm) <= set(theirs)
    scopes = prof.scope_totals(rows, trace.ops, ["ffw_up", "ffw_down"])
    assert scopes["ffw_up"] > 0 and scopes["ffw_down"] > 0


@needs_xprof
def test_stop_ends_the_process_group_and_frees_the_port(trace_dir):
    xp = xprof_server.start(trace_dir[0])
    assert xp.ok, xp.message
    pid, port = xp.proc.pid, xp.port
    taken = xprof_server.start(trace_dir[0], port=port)  # the port asked for is taken: one sentence, no raise
    assert not taken.ok and f"port {port}" in taken.message and "taken" in taken.message
    xp.stop()
    assert not xp.ok and "stopped" in xp.message
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    with socket.socket() as s:  # nothing listens there any more (SO_REUSEADDR: TIME_WAIT does not count)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
    assert not xprof_server._port_taken(port)
    xp.stop()  # twice is fine


def test_not_installed_is_one_sentence_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(xprof_server, "find_xprof_python", lambda: None)
    xp = xprof_server.start(tmp_path)
    assert not xp.ok and xp.url == ""
    assert "pip install xprof" in xp.message and xp.message.count(".") <= 3
    with pytest.raises(RuntimeError, match="not running"):
        xp.runs()


def test_port_taken_is_reported_before_starting(tmp_path, monkeypatch):
    monkeypatch.setattr(xprof_server, "find_xprof_python", lambda: sys.executable)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        xp = xprof_server.start(tmp_path, port=port)
    assert not xp.ok and xp.proc is None and f"port {port}" in xp.message


def test_missing_folder_and_cli_usage(tmp_path, capsys):
    with pytest.raises(ValueError, match="does not exist"):
        xprof_server.start(tmp_path / "nope")
    assert xprof_server.main([]) == 2
    assert xprof_server.main([str(tmp_path / "nope")]) == 1
    assert "09_profiling" in capsys.readouterr().out
