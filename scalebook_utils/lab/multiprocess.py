"""jaxmulti: one JAX program over several processes (book ch. 10; multi-host TPU slices in ch. 2 and 10).

On a TPU pod every host runs the same Python program; `jax.distributed.initialize` connects them, and
`jax.devices()` then lists the devices of *all* hosts while `jax.local_devices()` lists this host's.
Arrays are global: each process supplies only the shards that live on its own devices, and a jitted
collective moves data between processes as it would between chips.

This module does that on one machine: `run_processes()` starts 2 Python processes with 4 simulated CPU
devices each, a coordinator on a free localhost port, and in each process

- builds a global x[8, n] = arange over a 1-D mesh of all 8 devices (row i on device i), each process
  writing only its own 4 rows;
- runs a `psum` over the 8 devices in shard_map (every row becomes the column sums: an AllReduce that
  crosses the process boundary), and
- gathers the whole array back into every process (`out_shardings` replicated: an AllGather).

Cross-process CPU collectives use gloo (`jax_cpu_collectives_implementation = "gloo"`, JAX ≥ 0.4.27).
Each worker has a deadline; on timeout the parent kills the workers' process groups and reports why.

Usage (a notebook cell or a test)::

    from scalebook_utils import jaxmulti
    r = jaxmulti.run_processes(timeout=120)
    print(r.ok, r.summary())

Command line (what the parent runs, once per process)::

    python -m scalebook_utils.lab.multiprocess worker --port 12345 --process-id 0 --num-processes 2 --local-devices 4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

MARK = "JAXMULTI "
_FORCE_FLAG = "--xla_force_host_platform_device_count"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def expected_results(num_processes: int = 2, local_devices: int = 4, n: int = 4) -> dict:
    """What every worker must report (numpy only): x = arange(D·n).reshape(D, n) over D devices,
    psum → the column sums, gathered → x itself."""
    import numpy as np

    D = num_processes * local_devices
    x = np.arange(D * n, dtype=np.float32).reshape(D, n)
    return {"global_devices": D, "local_devices": local_devices, "psum": x.sum(0).tolist(), "gathered": x.tolist()}


# --- the worker (runs in a child process) ----------------------------------------------------------------


def worker(
    port: int, process_id: int, num_processes: int, local_devices: int, n: int = 4, init_timeout: int = 60
) -> dict:
    """One process of the group: connect, run the cross-process collectives, return what it saw."""
    import jax

    from scalebook_utils.lab import _compat

    _compat.set_cpu_device_count(local_devices)  # config option (new JAX) or XLA_FLAGS (old, set by the parent)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        f"127.0.0.1:{port}", num_processes=num_processes, process_id=process_id, initialization_timeout=init_timeout
    )
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = jax.devices()  # every process's devices, in a global order
    D = len(devices)
    mesh = jax.sharding.Mesh(np.array(devices), ("i",))
    x_np = np.arange(D * n, dtype=np.float32).reshape(D, n)
    sharding = NamedSharding(mesh, P("i"))
    # each process fills only the rows of its own devices (the callback is asked for local shards only)
    x = jax.make_array_from_callback((D, n), sharding, lambda idx: x_np[idx])
    f = jax.jit(_compat.shard_map(lambda b: jax.lax.psum(b, "i"), mesh=mesh, in_specs=P("i"), out_specs=P("i")))
    summed = f(x)
    gathered = jax.jit(lambda v: v, out_shardings=NamedSharding(mesh, P()))(x)
    hlo = f.lower(x).compile().as_text()
    return {
        "process_id": jax.process_index(),
        "process_count": jax.process_count(),
        "global_devices": D,
        "local_devices": len(jax.local_devices()),
        "local_device_ids": [d.id for d in jax.local_devices()],
        "psum_rows": [np.asarray(s.data)[0].tolist() for s in summed.addressable_shards],
        "gathered": np.asarray(gathered.addressable_shards[0].data).tolist(),
        "hlo_all_reduce": "all-reduce" in hlo,
        "jax": jax.__version__,
    }


# --- the parent -------------------------------------------------------------------------------------------


@dataclass
class MultiResult:
    """Outcome of `run_processes`: ok (every worker reported the expected psum and gather), results (one
    dict per worker, by process id), seconds (wall time), reason (why not ok), logs (stderr tails)."""

    ok: bool
    results: list = field(default_factory=list)
    seconds: float = 0.0
    reason: str = ""
    logs: list = field(default_factory=list)
    skipped: bool = False
    pids: list = field(default_factory=list)

    def summary(self) -> str:
        if self.skipped:
            return f"skipped: {self.reason}"
        if not self.ok:
            return f"failed: {self.reason}"
        r = self.results[0]
        return (
            f"{len(self.results)} processes × {r['local_devices']} CPU devices = {r['global_devices']} "
            f"global devices; cross-process psum and all-gather correct in every process ({self.seconds:.1f} s)"
        )


def unavailable() -> str | None:
    """None when this JAX can run CPU collectives across processes; else the reason."""
    try:
        import jax
    except ImportError:  # pragma: no cover
        return "JAX is not installed"
    from scalebook_utils.lab import _compat

    if not _compat.has_cpu_collectives_option():
        return (
            f"JAX {jax.__version__} has no gloo CPU collectives (jax_cpu_collectives_implementation); need JAX ≥ 0.4.27"
        )
    return None


def _child_env(local_devices: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES", "JAX_PLATFORMS", "XLA_FLAGS")}
    flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(_FORCE_FLAG))
    env["XLA_FLAGS"] = f"{flags} {_FORCE_FLAG}={local_devices}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    root = str(Path(__file__).resolve().parents[1])  # run from a checkout without installing
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _kill(procs) -> None:
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)  # each worker leads its own process group
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):  # pragma: no cover
            p.wait(timeout=5)


def run_processes(
    num_processes: int = 2, local_devices: int = 4, n: int = 4, timeout: float = 120.0, python: str | None = None
) -> MultiResult:
    """Start `num_processes` workers with `local_devices` CPU devices each; wait at most `timeout` s.

    Returns a `MultiResult`; never raises for a failed or hung run (the workers are killed, and
    `reason` says what happened). `python`: the interpreter for the workers (default: this one).
    """
    why = unavailable()
    if why:
        return MultiResult(ok=False, skipped=True, reason=why)
    port = free_port()
    env = _child_env(local_devices)
    t0 = time.monotonic()
    procs = []
    outs = [None] * num_processes
    timed_out = False
    try:
        for i in range(num_processes):
            cmd = [
                python or sys.executable,
                "-m",
                "scalebook_utils.lab.multiprocess",
                "worker",
                "--port",
                str(port),
                "--process-id",
                str(i),
                "--num-processes",
                str(num_processes),
                "--local-devices",
                str(local_devices),
                "--n",
                str(n),
                "--init-timeout",
                str(max(10, int(timeout))),
            ]
            procs.append(
                subprocess.Popen(
                    cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
                )
            )  # own process group: killpg on timeout
        for i, p in enumerate(procs):
            try:
                outs[i] = p.communicate(timeout=max(timeout - (time.monotonic() - t0), 0.1))
            except subprocess.TimeoutExpired:
                timed_out = True
                break
    finally:
        _kill(procs)
    for i, p in enumerate(procs):
        if outs[i] is None:
            outs[i] = p.communicate()
    seconds = time.monotonic() - t0
    pids = [p.pid for p in procs]
    results, logs = [], [(o[1] or "")[-2000:] for o in outs]
    for i, (p, (stdout, err)) in enumerate(zip(procs, outs)):
        line = next((ln for ln in (stdout or "").splitlines() if ln.startswith(MARK)), None)
        if line is None:
            why = (
                f"timed out after {timeout:.0f} s (workers killed)"
                if timed_out
                else f"worker {i} exited with {p.returncode}: {(err or '').strip()[-300:]}"
            )
            return MultiResult(ok=False, seconds=seconds, logs=logs, reason=why, pids=pids)
        results.append(json.loads(line[len(MARK) :]))
    results.sort(key=lambda r: r["process_id"])
    want = expected_results(num_processes, local_devices, n)
    bad = [
        r["process_id"]
        for r in results
        if r["global_devices"] != want["global_devices"]
        or r["local_devices"] != local_devices
        or any(row != want["psum"] for row in r["psum_rows"])
        or r["gathered"] != want["gathered"]
    ]
    reason = f"wrong results in process(es) {bad}" if bad else ""
    return MultiResult(ok=not bad, results=results, seconds=seconds, reason=reason, logs=logs, pids=pids)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m scalebook_utils.lab.multiprocess", description="multi-process JAX demo"
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="one process of the group (started by run_processes)")
    w.add_argument("--port", type=int, required=True)
    w.add_argument("--process-id", type=int, required=True)
    w.add_argument("--num-processes", type=int, default=2)
    w.add_argument("--local-devices", type=int, default=4)
    w.add_argument("--n", type=int, default=4)
    w.add_argument("--init-timeout", type=int, default=60)
    r = sub.add_parser("run", help="start the whole group here and print the summary")
    r.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    if args.cmd == "worker":
        out = worker(args.port, args.process_id, args.num_processes, args.local_devices, args.n, args.init_timeout)
        sys.stdout.write(MARK + json.dumps(out) + "\n")
        sys.stdout.flush()  # report first: a slow shutdown cannot lose the results
        import jax

        jax.distributed.shutdown()  # waits for the other processes (a barrier)
        return 0
    res = run_processes(timeout=args.timeout)
    print(res.summary())
    return 0 if res.ok or res.skipped else 1


if __name__ == "__main__":
    sys.exit(main())
