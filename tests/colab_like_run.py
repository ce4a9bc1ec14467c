"""Run one notebook top to bottom with nbclient, in the Python that runs this script (the Colab-like venv).

Used by tests/test_colab_like.py; needs only nbclient/nbformat (Colab has both), never scalebook.
    python colab_like_run.py NOTEBOOK.ipynb OUT.ipynb
    → prints one JSON line {ok, error, setup_s, total_s, cells_s, max_reply_wait_s}

Why `_Client` re-arms the shell socket (found with a timestamped trace of every message; nbclient issue #312):
an ipywidgets `Output` widget (each `interactive_output` view) makes nbclient act as its front end — it copies the
captured outputs into the widget's state and sends them to the kernel as `comm_msg`s on the shell channel while it
is awaiting that cell's `execute_reply` there (`shell_channel.get_msg(timeout)` → `zmq.asyncio` `poll`).
jupyter_client's `Session.send` sends through a plain blocking shadow of the asyncio socket, so pyzmq's asyncio
layer never learns of that send; libzmq processes the socket's pending commands during the send — the reply that
has just arrived is among them — and the socket's edge-triggered FD stops being readable, so the event loop is
never woken: the reply sits in the socket (ZMQ_EVENTS has POLLIN, the FD is not readable) until the poll's timeout
(`timeout=600`) fires and `poll(0)` finds it. Traced under Colab's stack (ipywidgets 7.7.1, ipykernel 6.17.1,
jupyter_client 7.4.9, nbclient 0.10.4, pyzmq 27.3): the chapter-1 roofline explorer's reply, sent by the kernel
0.8 s into the cell, was received 29.2 s after it was sent with timeout=30, 600 s with timeout=600 — the ~600 s
idle per widget cell. A real front end (Colab) does not wait like this; it is an artefact of driving the notebook
with nbclient. The fix: after each message nbclient sends on the shell channel, read ZMQ_EVENTS through the asyncio
socket, which makes pyzmq re-check the socket and wake the waiting poll (zmq.asyncio `Socket.get(EVENTS)`).
"""

import json
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import zmq
from jupyter_client import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def _seconds(cell) -> float | None:
    t = cell.metadata.get("execution", {})
    try:
        start = datetime.fromisoformat(t["iopub.execute_input"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(t["shell.execute_reply"].replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None
    return (end - start).total_seconds()


class _Client(NotebookClient):
    """nbclient whose shell socket is re-armed after every send (module docstring), timing each cell as seen here."""

    cells_s: dict[int, float]
    reply_waits_s: list[float]

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        channel, self.cells_s, self.reply_waits_s = kc.shell_channel, {}, []
        send, get_msg = channel.send, channel.get_msg

        def send_and_rearm(msg):
            send(msg)
            channel.socket.get(zmq.EVENTS)  # zmq.asyncio: reading EVENTS re-schedules the waiting recv/poll

        async def get_msg_timed(*args, **kwargs):  # how long each reply sat between the kernel and this client
            msg = await get_msg(*args, **kwargs)
            sent = msg.get("header", {}).get("date")
            if msg.get("msg_type") == "execute_reply" and isinstance(sent, datetime) and sent.tzinfo:
                self.reply_waits_s.append((datetime.now(timezone.utc) - sent).total_seconds())
            return msg

        channel.send, channel.get_msg = send_and_rearm, get_msg_timed
        return kc

    async def async_execute_cell(self, cell, cell_index, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return await super().async_execute_cell(cell, cell_index, *args, **kwargs)
        finally:
            if cell.cell_type == "code":
                self.cells_s[cell_index] = round(time.perf_counter() - t0, 2)


def main(src: str, out: str) -> None:
    nb = nbformat.read(src, as_version=4)
    # IPC sockets in a private folder, not TCP ports: notebooks run side by side (pytest -n 3) and can never collide
    # on a port (as tools/execute_notebooks.py does). The widget-cell stall was not the transport: see `_Client`.
    t0, error = time.perf_counter(), None
    with tempfile.TemporaryDirectory(prefix="sb-colab-kernel-") as sockets:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "k"))
        client = _Client(
            nb,
            km=km,
            timeout=600,
            kernel_name="python3",
            record_timing=True,
            resources={"metadata": {"path": str(Path(src).parent)}},
        )
        try:
            client.execute()
        except CellExecutionError as e:
            error = str(e)[-3000:]
    total = time.perf_counter() - t0
    nbformat.write(nb, out)
    setup = next(c for c in nb.cells if c.cell_type == "code")
    print(
        json.dumps(
            {
                "ok": error is None,
                "error": error,
                "setup_s": _seconds(setup),
                "total_s": total,
                "cells_s": getattr(client, "cells_s", {}),
                "max_reply_wait_s": max(getattr(client, "reply_waits_s", []), default=0.0),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
