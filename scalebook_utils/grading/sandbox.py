"""The grader's sandbox: each submission runs under bubblewrap (`bwrap`), an existing, well-kept tool.

What a sandboxed run sees (`bwrap_command`):
- read only: the system (/usr, /etc, /lib…), the Python installation and its site-packages, and the
  scalebook package at a neutral path (/opt/scalebook) with its answer registry (`questions/`) replaced
  by a stub whose import says why it is missing — so a kernel can neither change the package nor read
  the expected answers;
- nothing else of the host: no home folder, no solutions, no reference exercise, no other submission;
- writable: only its own work folder (the copy of the submission) and the folder the answers go to,
  plus a private /tmp;
- no network, its own PID namespace (every process it starts dies with it: `--die-with-parent`,
  `--unshare-pid`), its own session (no terminal injection), a cleared environment.

`available()` says whether bwrap can run here (it needs user namespaces, or root). Where it cannot,
the grader says so in one line and runs with its older limits (time, memory, temporary folder).
Pure standard library.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

__all__ = ["SANDBOX_PACKAGE_ROOT", "available", "bwrap_command", "unavailable_reason"]

#: Where the package appears inside the sandbox (PYTHONPATH points here).
SANDBOX_PACKAGE_ROOT = "/opt/scalebook"
#: Where the work folder and the answers folder appear inside the sandbox.
SANDBOX_WORK = "/grade/work"
SANDBOX_PROBE = "/grade/probe"

_SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/conda")


def _bwrap() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """None when bubblewrap runs here; else one sentence saying why not and how to get it."""
    exe = _bwrap()
    if exe is None:
        return (
            "bubblewrap (bwrap) is not installed: install Debian's 'bubblewrap' package "
            "(apt-get install bubblewrap) to sandbox each submission"
        )
    try:
        proc = subprocess.run(
            [exe, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap cannot start here ({type(exc).__name__}: {exc})"
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        return f"bubblewrap cannot create a sandbox here (user namespaces disabled?): {why}"
    return None


def available() -> bool:
    return unavailable_reason() is None


def _python_dirs() -> list[str]:
    """Every folder the Python that runs the grader needs: prefixes, site-packages, the interpreter's folder."""
    dirs = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        str(Path(sys.executable).parent),
        str(Path(os.path.realpath(sys.executable)).parent.parent),
    }
    with contextlib.suppress(AttributeError):  # pragma: no cover - some virtualenv versions lack it
        dirs.update(site.getsitepackages())
    dirs.update(p for p in sys.path if p and os.path.isdir(p) and "site-packages" in p)
    return sorted(d for d in dirs if d and os.path.isdir(d) and d != "/")


#: What `import scalebook_utils.questions` says inside the sandbox (the registry holds the expected answers).
REGISTRY_STUB = (
    '"""Stand-in for the answer registry inside the grader\'s sandbox (scalebook_utils/sandbox.py)."""\n'
    'raise ImportError("scalebook_utils.questions (the answer registry) is not available while a submission is '
    'graded: the grader judges the answers outside this kernel; everything else in scalebook_utils works")\n'
)


def _registry_stub(probe_dir) -> Path:
    stub = Path(probe_dir) / "registry_stub"
    stub.mkdir(exist_ok=True)
    (stub / "__init__.py").write_text(REGISTRY_STUB)
    return stub


def bwrap_command(
    argv: list[str],
    *,
    package_dir: str | os.PathLike,
    work_dir: str | os.PathLike,
    probe_dir: str | os.PathLike,
    env: dict[str, str],
) -> list[str]:
    """The bwrap command line that runs `argv` in the sandbox described in the module docstring.

    `package_dir` is the host's `scalebook_utils` folder; `work_dir` (writable) appears at /grade/work
    and is the working directory; `probe_dir` (read only, its `out/` writable) at /grade/probe. `env` is
    the whole environment inside (paths in it must be sandbox paths).
    """
    exe = _bwrap()
    if exe is None:
        raise RuntimeError(unavailable_reason() or "bubblewrap is not installed")
    pkg = f"{SANDBOX_PACKAGE_ROOT}/scalebook_utils"
    cmd = [
        exe,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
    ]
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            cmd += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            cmd += ["--ro-bind", d, d]
    for d in _python_dirs():
        cmd += ["--ro-bind", d, d]
    cmd += [
        "--ro-bind",
        str(package_dir),
        pkg,
        "--ro-bind",
        str(_registry_stub(probe_dir)),
        f"{pkg}/questions",  # the answer registry: replaced
        "--ro-bind",
        str(probe_dir),
        SANDBOX_PROBE,
        "--bind",
        str(Path(probe_dir) / "out"),
        f"{SANDBOX_PROBE}/out",
        "--bind",
        str(work_dir),
        SANDBOX_WORK,
        "--chdir",
        SANDBOX_WORK,
    ]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    return cmd + ["--"] + list(argv)
