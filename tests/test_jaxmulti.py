"""jaxmulti: 2 processes × 4 CPU devices joined by jax.distributed on localhost run a psum and an all-gather
across the process boundary. Hard timeouts: the workers are killed after 120 s, pytest gives up at 180 s."""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("jax")

from scalebook_utils import jaxmulti  # noqa: E402


def test_expected_results_are_plain_numbers():
    want = jaxmulti.expected_results(2, 4, n=2)
    assert want["global_devices"] == 8
    assert want["psum"] == [sum(2 * i for i in range(8)), sum(2 * i + 1 for i in range(8))]
    assert want["gathered"][3] == [6.0, 7.0]


def test_free_port_is_bindable():
    import socket

    port = jaxmulti.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


@pytest.mark.timeout(180)
def test_two_processes_four_devices_each():
    why = jaxmulti.unavailable()
    if why:
        pytest.skip(why)
    r = jaxmulti.run_processes(2, 4, timeout=120)
    assert r.ok, (r.reason, r.logs)
    assert [x["process_id"] for x in r.results] == [0, 1]
    for x in r.results:
        assert x["process_count"] == 2 and x["global_devices"] == 8 and x["local_devices"] == 4
        assert x["hlo_all_reduce"]
    ids = [set(x["local_device_ids"]) for x in r.results]
    assert not (ids[0] & ids[1])  # each process owns different devices
    assert "2 processes × 4 CPU devices = 8 global devices" in r.summary()


@pytest.mark.timeout(60)
def test_timeout_kills_workers_and_reports():
    """With a timeout far too short to start JAX, the run returns a reason instead of hanging, and the
    workers it started are gone (killed and reaped)."""
    why = jaxmulti.unavailable()
    if why:
        pytest.skip(why)
    t0 = time.monotonic()
    r = jaxmulti.run_processes(2, 4, timeout=0.5)
    assert not r.ok and "timed out" in r.reason
    assert time.monotonic() - t0 < 30
    assert len(r.pids) == 2
    for pid in r.pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
