"""Helpers for the real-browser tests: a hermetic JupyterLab server and a locked-down Chromium.

Used by ``tests/test_browser.py``; later chapters reuse ``run_notebook_and_drive_slider`` and
``run_notebook_and_edit_text``.

* ``LabServer`` starts ``python -m jupyterlab`` from the interpreter running the tests (the project's
  venv) on 127.0.0.1 with a free port and ``--ServerApp.port_retries=0``, a random token, no browser,
  in its own process group, with temporary Jupyter config/data/runtime/settings/workspaces dirs and
  IPython dir, so nothing in ``~/.jupyter`` or ``~/.ipython`` matters. Announcements, update checks
  and the PyPI extension manager are off (nothing tries the network), autosave is off and
  checkpoints go to the temp dir (running a notebook writes nothing under the served root), and
  ``window.jupyterapp`` is exposed so the test can read notebook state. ``stop()`` kills the
  server's process group (SIGTERM, then SIGKILL), then any kernel left (kernels get sessions of
  their own), and removes the temporary dirs. The server also gets SIGTERM if the test process
  dies (PR_SET_PDEATHSIG), so a killed pytest leaves no server behind.
* ``chromium_page`` launches Debian's ``/usr/bin/chromium`` through Playwright (no downloaded
  browser) headless with a fresh profile dir (and HOME) in a temp dir, and aborts every request
  that is not for 127.0.0.1/localhost; the aborted URLs are kept on ``page.scalebook_blocked``,
  and any save/rename/delete request to the contents API on ``page.scalebook_writes``.
* ``run_notebook_and_drive_slider`` opens a notebook, waits for its kernel, clears outputs, runs
  all cells through the menu Run → Run All Cells, waits for a widget's one-line text marker, moves
  the IntSlider with the given description from the keyboard, and waits for the marker to change.
* ``run_notebook_and_edit_text`` does the same up to the marker, then selects the text of the
  ``Text`` box with the given description, types a new value, presses Enter, and waits for a
  marker line that names the new value. Both share ``run_notebook_and_interact`` (open, Run All,
  marker, screenshots, failure report).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # also keep crash reports out of ~/.config/chromium (HOME is the temp profile's parent too)
    "--disable-breakpad",
    "--disable-crash-reporter",
]
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
SCREENSHOT_DIR = Path("/tmp")

# JupyterLab user settings written into the temporary settings dir.
LAB_USER_SETTINGS = {
    # No news feed, no update check: nothing asks the network, and no "receive news?" toast.
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    # Never write the notebook under test back to disk.
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    # Attach every cell to the DOM (the default "contentVisibility" lets off-screen cells change
    # size when scrolled to, so a scrolled-to output can move away before a screenshot).
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}


def log(msg: str) -> None:
    print(f"[browser {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------------------------------
# JupyterLab server
# --------------------------------------------------------------------------------------------------


@dataclass
class LabServer:
    root_dir: Path
    startup_timeout: float = 120.0
    port: int = 0
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    proc: subprocess.Popen | None = None
    tmp: Path | None = None
    log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        """URL of ``path`` (e.g. ``lab/tree/notebooks/x.ipynb``) with the token."""
        quoted = urllib.parse.quote(path.lstrip("/"))
        return f"{self.base_url}/{quoted}?token={self.token}"

    def _write_config(self) -> dict[str, str]:
        assert self.tmp is not None
        cfg, data, runtime = self.tmp / "config", self.tmp / "data", self.tmp / "runtime"
        settings, workspaces = cfg / "lab" / "user-settings", cfg / "lab" / "workspaces"
        ipython = self.tmp / "ipython"
        for d in (cfg, data, runtime, settings, workspaces, ipython):
            d.mkdir(parents=True, exist_ok=True)
        server_config = {
            "ServerApp": {"open_browser": False, "allow_remote_access": False},
            # JupyterLab checkpoints a notebook when it opens it: keep that out of the repo
            # (an absolute checkpoint_dir replaces NOTEBOOK_DIR/.ipynb_checkpoints).
            "FileCheckpoints": {"checkpoint_dir": str(self.tmp / "checkpoints")},
            "LabApp": {
                "news_url": None,
                "check_for_updates_class": "jupyterlab.handlers.announcements.NeverCheckForUpdate",
                "extension_manager": "readonly",
                "expose_app_in_browser": True,
                "user_settings_dir": str(settings),
                "workspaces_dir": str(workspaces),
            },
        }
        (cfg / "jupyter_server_config.json").write_text(json.dumps(server_config, indent=1))
        for plugin, values in LAB_USER_SETTINGS.items():
            f = settings / f"{plugin}.jupyterlab-settings"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(values))
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("JUPYTER", "JPY_")) and k not in ("IPYTHONDIR", "BROWSER")
        }
        env.update(
            JUPYTER_CONFIG_DIR=str(cfg),
            JUPYTER_DATA_DIR=str(data),
            JUPYTER_RUNTIME_DIR=str(runtime),
            JUPYTERLAB_SETTINGS_DIR=str(settings),
            JUPYTERLAB_WORKSPACES_DIR=str(workspaces),
            IPYTHONDIR=str(ipython),
            JUPYTER_PLATFORM_DIRS="1",
            PYDEVD_DISABLE_FILE_VALIDATION="1",
            PYTHONUNBUFFERED="1",
        )
        return env

    def start(self) -> LabServer:
        """Start the server and wait until it answers; on any failure (or interrupt) stop it."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> LabServer:
        self.tmp = Path(tempfile.mkdtemp(prefix="scalebook-lab-"))
        env = self._write_config()
        for _attempt in range(3):  # retried only when the chosen port was taken meanwhile
            self.port = free_port()
            self.log_path = self.tmp / f"server-{self.port}.log"
            cmd = self._command()
            with open(self.log_path, "wb") as logf:
                self.proc = subprocess.Popen(
                    cmd,
                    cwd=self.tmp,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
            log(f"{self.kind} pid={self.proc.pid} port={self.port} root={self.root_dir}")
            t0 = time.monotonic()
            while self.proc.poll() is None:
                if self._answers():
                    log(f"{self.kind} answers after {time.monotonic() - t0:.1f}s")
                    return self
                if time.monotonic() - t0 > self.startup_timeout:
                    raise RuntimeError(
                        f"{self.kind} did not answer in {self.startup_timeout:.0f}s:\n" + self.log_tail()
                    )
                time.sleep(0.25)
            tail = self.log_tail()
            if "already in use" not in tail:
                break
        raise RuntimeError(f"{self.kind} exited early:\n{tail}")

    #: what the server is called in log lines and errors
    kind = "jupyter lab"
    #: a page that answers 200 once the server is up
    status_path = "api/status"

    def _command(self) -> list[str]:
        cmd = [
            sys.executable, "-m", "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={self.root_dir}",
            f"--IdentityProvider.token={self.token}",
            "--ServerApp.terminals_enabled=False",
        ]  # fmt: skip
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # CI runs as root
        return cmd

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/{self.status_path}?token={self.token}", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, n: int = 60) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no server log)"
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def stop(self) -> None:
        """Kill the server's process group, then any kernel it left; remove the temporary dirs.

        Kernels run in sessions of their own (jupyter_client starts them so), so they are not in
        the server's group: SIGTERM lets the server shut them down; whatever survives is killed.
        """
        proc, self.proc = self.proc, None
        if proc is not None:
            kernels = _descendants(proc.pid)
            pgid = proc.pid  # start_new_session=True: the server leads its own group
            for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, sig)
                try:
                    proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)  # stragglers of the server's own group
            for p in kernels:
                _kill_tree(p)
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the test process dies, however it dies.

    So a killed pytest (CI timeout, SIGKILL) leaves no JupyterLab server behind; the server then
    shuts its kernels down (and ipykernel also exits when its parent goes).
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except Exception:
            pass


def _proc_stat(pid: int | str) -> tuple[int, int] | None:
    """(parent pid, start time) of a process from /proc, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19])


def _descendants(pid: int) -> list[tuple[int, int]]:
    """(pid, start time) of every descendant of ``pid`` (kernels and what they started)."""
    if not Path("/proc").is_dir():
        return []
    kids: dict[int, list[tuple[int, int]]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (st := _proc_stat(d.name)) is not None:
            kids.setdefault(st[0], []).append((int(d.name), st[1]))
    out, todo = [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def _kill_tree(proc: tuple[int, int]) -> None:
    """SIGKILL a leftover process (and its group when it leads one) if it is still the same one."""
    pid, started = proc
    st = _proc_stat(pid)
    if st is None or st[1] != started:
        return  # gone, or the pid now belongs to someone else
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@contextlib.contextmanager
def lab_server(root_dir: str | os.PathLike) -> Iterator[LabServer]:
    server = LabServer(Path(root_dir).resolve())
    try:
        yield server.start()
    finally:
        server.stop()


# --------------------------------------------------------------------------------------------------
# Chromium
# --------------------------------------------------------------------------------------------------


def _is_loopback(url: str) -> bool:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in ("data", "blob", "about"):
        return True
    return (parsed.hostname or "") in LOOPBACK_HOSTS


@contextlib.contextmanager
def chromium_page(viewport=(1400, 1000)):
    """Yield a Playwright page in headless Debian Chromium; non-loopback requests are aborted."""
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="scalebook-chromium-"))
    profile = tmp / "profile"
    # Chromium (and Debian's launcher) write under $HOME/.config and $HOME/.cache: keep it in tmp.
    env = dict(os.environ, HOME=str(tmp), XDG_CONFIG_HOME=str(tmp / "config"),
               XDG_CACHE_HOME=str(tmp / "cache"))  # fmt: skip
    blocked: list[str] = []
    problems: list[str] = []
    writes: list[str] = []  # requests that would change a file under the server root

    def on_request(req):
        if req.method in ("PUT", "PATCH", "DELETE") and "/api/contents" in req.url:
            writes.append(f"{req.method} {req.url.split('?')[0]}")

    def route(r):
        if _is_loopback(r.request.url):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(
                str(profile),
                executable_path=CHROMIUM,
                env=env,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": viewport[0], "height": viewport[1]},
                service_workers="block",  # so that every request goes through the route below
                timeout=60_000,
            )
            try:
                ctx.route("**/*", route)
                page = ctx.pages[0] if ctx.pages else ctx.new_page()
                page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
                page.on(
                    "console",
                    lambda m: problems.append(f"console.{m.type}: {m.text}")
                    if m.type == "error" else None,
                )  # fmt: skip
                page.on("request", on_request)
                page.scalebook_blocked = blocked  # type: ignore[attr-defined]
                page.scalebook_writes = writes  # type: ignore[attr-defined]
                page.scalebook_problems = problems  # type: ignore[attr-defined]
                yield page
            finally:
                ctx.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if blocked:
            log(f"aborted {len(blocked)} non-loopback request(s): {blocked[:10]}")


def screenshot(page, name: str) -> Path | None:
    path = SCREENSHOT_DIR / f"browser-{name}.png"
    try:
        page.screenshot(path=str(path), timeout=15_000)
    except Exception as e:  # a screenshot must never hide the real failure
        log(f"screenshot {path} failed: {e}")
        return None
    log(f"screenshot {path}")
    return path


# --------------------------------------------------------------------------------------------------
# Driving a notebook
# --------------------------------------------------------------------------------------------------

# State of the current notebook, read from the JupyterLab app (exposed by expose_app_in_browser).
_NOTEBOOK_STATE_JS = """
() => {
  const app = window.jupyterapp;
  if (!app) return {app: false};
  const w = app.shell.currentWidget;
  if (!w || !w.content || !w.sessionContext || !w.content.model) return {app: true, notebook: false};
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  const cells = Array.from(w.content.model.cells);
  // JupyterLab does not send empty code cells to the kernel: they never get a count.
  const code = cells.filter(c => c.type === 'code' && c.sharedModel.getSource().trim() !== '');
  const tags = c => (c.getMetadata && c.getMetadata('tags')) || [];
  const errors = [];
  for (const c of code) {
    if (tags(c).includes('raises-exception')) continue;  // Run All goes on past these too
    for (const o of c.outputs.toJSON()) {
      if (o.output_type === 'error') errors.push(`${o.ename}: ${o.evalue}`);
    }
  }
  return {
    app: true, notebook: true, path: w.context.path,
    ready: w.context.isReady && w.sessionContext.isReady,
    kernel: kernel ? kernel.status : null,
    kernelName: kernel ? kernel.name : null,
    nCode: code.length,
    nExecuted: code.filter(c => c.executionCount !== null).length,
    nRunning: code.filter(c => c.executionState === 'running').length,
    nPromptStar: document.querySelectorAll('.jp-InputArea-prompt').length === 0 ? 0 :
      Array.from(document.querySelectorAll('.jp-InputArea-prompt'))
        .filter(e => e.textContent.includes('*')).length,
    errors,
    dialog: document.querySelector('.jp-Dialog') ? document.querySelector('.jp-Dialog').textContent : null,
  };
}
"""

# Where a widget's text marker can be: printed text in an output area (the usual case: the view
# prints it into an interactive_output), or an HTML/Label widget. Markdown and code are excluded.
MARKER_SELECTOR = ".jp-OutputArea-output.jp-RenderedText, .widget-html-content, .widget-label"

# Lines inside MARKER_SELECTOR elements that start with a prefix.
_MARKER_LINES_JS = """
([prefix, selector]) => {
  const found = [];
  for (const el of document.querySelectorAll(selector)) {
    for (const line of el.textContent.split('\\n')) {
      const t = line.trim();
      if (t.startsWith(prefix)) found.push(t);
    }
  }
  return found;
}
"""


def notebook_state(page) -> dict:
    return page.evaluate(_NOTEBOOK_STATE_JS)


def marker_lines(page, prefix: str) -> list[str]:
    return page.evaluate(_MARKER_LINES_JS, [prefix, MARKER_SELECTOR])


def wait_until(predicate, timeout: float, what: str, interval: float = 0.25, describe=None):
    """Poll ``predicate()`` until it returns a truthy value; raise with ``describe()`` on timeout."""
    t0 = time.monotonic()
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() - t0 > timeout:
            detail = describe() if describe else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}. {detail}")
        time.sleep(interval)


def open_notebook(page, server: LabServer, path: str, timeout: float = 120.0) -> dict:
    """Open ``path`` (relative to the server root) in JupyterLab; wait for an idle kernel."""
    page.goto(server.url(f"lab/tree/{path}"), wait_until="domcontentloaded", timeout=90_000)
    state: dict = {}

    def kernel_idle():
        nonlocal state
        state = notebook_state(page)
        if state.get("dialog"):
            raise AssertionError(f"unexpected JupyterLab dialog: {state['dialog']!r}")
        return (
            state.get("notebook") and state.get("path") == path and state.get("ready") and state.get("kernel") == "idle"
        )

    wait_until(kernel_idle, timeout, f"notebook {path} with an idle kernel", describe=lambda: state)
    page.locator(".jp-Notebook").first.wait_for(state="visible", timeout=30_000)
    return state


def run_all_cells(page) -> None:
    """Edit → Clear Outputs of All Cells (command), then Run → Run All Cells through the menu bar.

    Clearing first means every output seen afterwards comes from this run, not from outputs (or
    saved widget state) stored in the file.
    """
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    # Focus the notebook so that the menu command applies to it.
    page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    item = page.locator(".lm-Menu-item", has_text=re.compile(r"^Run All Cells"))
    item.first.wait_for(state="visible", timeout=10_000)
    item.first.click()


def wait_run_all_done(page, marker_prefix: str, timeout: float) -> str:
    """Wait until the kernel is idle with every code cell executed; return the marker line."""
    state: dict = {}

    def done():
        nonlocal state
        state = notebook_state(page)
        if state.get("dialog"):
            raise AssertionError(f"unexpected JupyterLab dialog: {state['dialog']!r}")
        if state.get("errors"):
            raise AssertionError(f"a cell raised: {state['errors']}")
        finished = (
            state.get("kernel") == "idle"
            and state.get("nRunning") == 0
            and state.get("nPromptStar") == 0
            and state.get("nExecuted") == state.get("nCode")
        )
        lines = marker_lines(page, marker_prefix)
        if finished and not lines:
            raise AssertionError(f"all cells ran but no output line starts with {marker_prefix!r}")
        return finished and lines[0]

    return wait_until(done, timeout, "Run All Cells to finish", interval=0.5, describe=lambda: state)


def _label_re(description: str) -> re.Pattern:
    return re.compile(rf"^\s*{re.escape(description)}\s*$")


def _widget_scope(page, marker_prefix: str | None):
    """The whole page, or only the code cell(s) whose output shows a line with ``marker_prefix``."""
    if marker_prefix is None:
        return page
    return page.locator(".jp-CodeCell").filter(has=page.locator(MARKER_SELECTOR, has_text=marker_prefix))


def _where(description: str, marker_prefix: str | None) -> str:
    return f"{description!r}" + (f" in the cell printing {marker_prefix!r}" if marker_prefix else "")


def slider_handle(page, description: str, marker_prefix: str | None = None):
    """The noUiSlider handle of the ipywidgets slider whose description label is ``description``.

    With ``marker_prefix``, only sliders in the code cell whose output shows the marker count,
    so a notebook may have other sliders with the same label in other cells.
    """
    label = page.locator(".widget-label", has_text=_label_re(description))
    scope = _widget_scope(page, marker_prefix)
    return scope.locator(".widget-slider").filter(has=label).locator(".noUi-handle")


def text_input(page, description: str, marker_prefix: str | None = None):
    """The ``<input>`` of the ipywidgets ``Text`` whose description label is ``description``.

    With ``marker_prefix``, only Text boxes in the code cell whose output shows the marker count
    (chapter 2 has two widgets with a "shape" box: the slice calculator and the torus explorer).
    """
    label = page.locator(".widget-label", has_text=_label_re(description))
    scope = _widget_scope(page, marker_prefix)
    return scope.locator(".widget-text").filter(has=label).locator("input")


def move_slider(page, description: str, marker_prefix: str | None = None, timeout: float = 30.0) -> tuple[str, str]:
    """Focus the slider's handle and press End (Home when it already sits at its maximum)."""
    handle = slider_handle(page, description, marker_prefix)
    count = handle.count()
    where = _where(description, marker_prefix)
    assert count == 1, f"expected one slider described {where}, found {count}"
    handle.scroll_into_view_if_needed(timeout=10_000)
    before = handle.get_attribute("aria-valuenow")
    at_max = before is not None and before == handle.get_attribute("aria-valuemax")
    handle.focus()
    handle.press("Home" if at_max else "End")
    wait_until(
        lambda: handle.get_attribute("aria-valuenow") != before,
        timeout,
        f"slider {description!r} to move from {before}",
    )
    return before or "", handle.get_attribute("aria-valuenow") or ""


def edit_text(
    page, description: str, new_text: str, marker_prefix: str | None = None, timeout: float = 10.0
) -> tuple[str, str]:
    """Replace the text of a ``Text`` widget the way a reader does: click, select all, type, Enter.

    Enter commits the value also for ``continuous_update=False`` boxes (which otherwise send it on
    blur). The box must already hold something other than ``new_text``; returns (old, new) value.
    """
    box = text_input(page, description, marker_prefix)
    count = box.count()
    where = _where(description, marker_prefix)
    assert count == 1, f"expected one text box described {where}, found {count}"
    box.scroll_into_view_if_needed(timeout=10_000)
    before = box.input_value()
    assert before != new_text, f"text box {description!r} already holds {new_text!r}"
    box.click()
    box.press("ControlOrMeta+a")  # select all (inside an <input>; not JupyterLab's select-all-cells)
    box.press_sequentially(new_text, delay=30)
    # Typed characters must land in the box, not reach notebook shortcuts (x = cut cell, ...).
    wait_until(
        lambda: box.input_value() == new_text,
        timeout,
        f"text box {description!r} to hold {new_text!r}",
        describe=lambda: f"it holds {box.input_value()!r}",
    )
    box.press("Enter")
    return before, box.input_value()


# What the code cell showing a marker displays: per output, its MIME type, text length and number of
# loaded images. Used to let rendering settle (images appear a little after the kernel is idle).
_MARKER_CELL_SIGNATURE_JS = """
([prefix, selector]) => {
  const cell = Array.from(document.querySelectorAll('.jp-CodeCell')).find(c =>
    Array.from(c.querySelectorAll(selector)).some(e => e.textContent.includes(prefix)));
  if (!cell) return null;
  return Array.from(cell.querySelectorAll('.jp-OutputArea-output')).map(o => [
    o.getAttribute('data-mime-type'), o.textContent.length,
    Array.from(o.querySelectorAll('img')).filter(i => i.complete && i.naturalWidth > 0).length,
  ]);
}
"""


def wait_rendered(page, prefix: str, quiet: float = 1.0, timeout: float = 15.0) -> bool:
    """Wait for an idle kernel and for the marker's cell to stop changing for ``quiet`` seconds.

    Only for screenshots that show the finished picture: returns False (and logs) on timeout.
    """
    t0 = time.monotonic()
    last, since = None, time.monotonic()
    while time.monotonic() - t0 < timeout:
        sig = (
            notebook_state(page).get("kernel"),
            page.evaluate(_MARKER_CELL_SIGNATURE_JS, [prefix, MARKER_SELECTOR]),
        )
        if sig != last:
            last, since = sig, time.monotonic()
        elif sig[0] == "idle" and time.monotonic() - since >= quiet:
            return True
        time.sleep(0.1)
    log(f"outputs of the cell printing {prefix!r} still changing after {timeout:.0f}s")
    return False


def show_marker(page, prefix: str) -> None:
    """Scroll the notebook so that the marker line is in the middle of the screen."""
    page.locator(MARKER_SELECTOR, has_text=prefix).first.evaluate("el => el.scrollIntoView({block: 'center'})")


def marker_value(line: str, key: str = "B") -> str | None:
    m = re.search(rf"\b{re.escape(key)}=([^\s|→,]+)", line)
    return m.group(1) if m else None


def run_notebook_and_interact(
    page,
    server: LabServer,
    path: str,
    marker_prefix: str,
    interact,
    *,
    name: str = "notebook",
    step: str = "interact",
    open_timeout: float = 60.0,
    run_timeout: float = 150.0,
) -> tuple[str, str]:
    """Open ``path``, Run All, wait for the marker; then ``interact(before)`` returns the new marker.

    The common part of the ``run_notebook_and_*`` helpers: ``interact`` gets the marker line after
    Run All, works a control and waits for the changed marker line, which it returns. Returns the
    marker line before and after. Screenshots go to ``/tmp/browser-{name}-1-opened.png``,
    ``-2-ran.png``, ``-3-{step}.png`` (``-failure.png`` when something goes wrong).
    """
    stage = "open"
    try:
        t0 = time.monotonic()
        open_notebook(page, server, path, timeout=open_timeout)
        log(f"{path}: kernel idle after {time.monotonic() - t0:.1f}s")
        screenshot(page, f"{name}-1-opened")

        stage = "run-all"
        t1 = time.monotonic()
        run_all_cells(page)
        before = wait_run_all_done(page, marker_prefix, run_timeout)
        log(f"{path}: Run All done after {time.monotonic() - t1:.1f}s; marker {before!r}")
        wait_rendered(page, marker_prefix)
        show_marker(page, marker_prefix)
        screenshot(page, f"{name}-2-ran")

        stage = step
        t2 = time.monotonic()
        after = interact(before)
        log(f"{path}: marker changed after {time.monotonic() - t2:.1f}s: {after!r}")
        wait_rendered(page, marker_prefix)  # the view's figure comes after the marker line
        show_marker(page, marker_prefix)
        screenshot(page, f"{name}-3-{step}")
        problems = getattr(page, "scalebook_problems", [])
        log(f"{path}: {len(problems)} browser console error(s)" + "".join(f"\n  {p}" for p in problems[:10]))
        return before, after
    except BaseException:
        screenshot(page, f"{name}-failure")
        log(f"failed at stage {stage!r}; server log tail:\n{server.log_tail(30)}")
        problems = getattr(page, "scalebook_problems", [])
        if problems:
            log("browser console errors:\n  " + "\n  ".join(problems[-20:]))
        raise


def wait_marker(page, marker_prefix: str, accept, timeout: float, what: str) -> str:
    """Wait for a marker line for which ``accept(line)`` is true; return it."""
    return wait_until(
        lambda: next((ln for ln in marker_lines(page, marker_prefix) if accept(ln)), None),
        timeout,
        what,
        describe=lambda: f"markers now: {marker_lines(page, marker_prefix)}",
    )


def run_notebook_and_drive_slider(
    page,
    server: LabServer,
    path: str,
    marker_prefix: str,
    slider_description: str,
    *,
    name: str = "notebook",
    open_timeout: float = 60.0,
    run_timeout: float = 150.0,
    change_timeout: float = 30.0,
) -> tuple[str, str]:
    """Open ``path``, Run All, wait for the marker, move the slider, wait for a new marker.

    Returns the marker line before and after the slider moved. Screenshots go to
    ``/tmp/browser-{name}-*.png`` (``-3-slider-moved.png`` after the move).
    """

    def drive(before: str) -> str:
        old_value = marker_value(before, slider_description)
        s_before, s_after = move_slider(page, slider_description, marker_prefix)
        log(f"{path}: slider {slider_description} {s_before} -> {s_after}")
        return wait_marker(
            page,
            marker_prefix,
            lambda ln: marker_value(ln, slider_description) not in (None, old_value),
            change_timeout,
            f"the marker to show a {slider_description} other than {old_value}",
        )

    return run_notebook_and_interact(
        page, server, path, marker_prefix, drive, name=name, step="slider-moved",
        open_timeout=open_timeout, run_timeout=run_timeout,
    )  # fmt: skip


def run_notebook_and_edit_text(
    page,
    server: LabServer,
    path: str,
    marker_prefix: str,
    text_description: str,
    new_text: str,
    *,
    name: str = "notebook",
    open_timeout: float = 60.0,
    run_timeout: float = 150.0,
    change_timeout: float = 30.0,
) -> tuple[str, str]:
    """Open ``path``, Run All, wait for the marker, type ``new_text`` into a Text box, wait.

    The box is the ``Text`` widget described ``text_description`` in the cell printing the marker;
    its content is selected and replaced by typing ``new_text``, then Enter commits it. Waits for a
    marker line that differs from the one after Run All and contains ``new_text``. Returns the
    marker line before and after. Screenshots go to ``/tmp/browser-{name}-*.png``
    (``-3-text-edited.png`` after the edit).
    """

    def edit(before: str) -> str:
        assert new_text not in before, f"the marker already names {new_text!r}: {before!r}"
        old, new = edit_text(page, text_description, new_text, marker_prefix)
        log(f"{path}: text box {text_description} {old!r} -> {new!r}")
        return wait_marker(
            page,
            marker_prefix,
            lambda ln: ln != before and new_text in ln,
            change_timeout,
            f"the marker to name {new_text!r}",
        )

    return run_notebook_and_interact(
        page, server, path, marker_prefix, edit, name=name, step="text-edited",
        open_timeout=open_timeout, run_timeout=run_timeout,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------------
# The self-contained harness notebook
# --------------------------------------------------------------------------------------------------

HARNESS_CELL = '''\
import ipywidgets as widgets
from IPython.display import display

def view(B):
    regime = "compute-bound" if B >= 240 else "memory-bound"
    print(f"roofline explorer: B={B} → {regime} | T_math={B * 2.0:.1f} T_comms={480.0:.1f} | crossover B≈240")

b = widgets.IntSlider(value=128, min=16, max=1024, step=16, description="B")
display(widgets.VBox([b, widgets.interactive_output(view, {"B": b})]))
'''


def write_harness_notebook(directory: str | os.PathLike, name: str = "harness.ipynb") -> Path:
    """A one-widget notebook that prints a roofline-explorer-style marker."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Browser harness\nA slider `B` and its marker line."),
        nbformat.v4.new_code_cell("print('setup done')"),
        nbformat.v4.new_code_cell(HARNESS_CELL),
    ]
    path = Path(directory) / name
    nbformat.write(nb, path)
    return path


def browser_marks():
    """`pytestmark` for a browser test module: marked `browser`, skipped with the reason when chromium is missing."""
    import pytest

    return [
        pytest.mark.browser,
        pytest.mark.skipif(
            not os.access(CHROMIUM, os.X_OK),
            reason=f"{CHROMIUM} is missing (install Debian's 'chromium' package; .ci/run does)",
        ),
    ]
