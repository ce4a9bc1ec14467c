"""The install source is data (issue 15): every notebook's setup cell holds the stamped source and the verbatim
installer, its metadata and its Colab link agree with it, no placeholder is left, and the installer's messages
for bad input are one sentence naming the fix."""

import shutil
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import stamp_colab as S  # noqa: E402
from scalebook_utils.colab_install import function_source, install_scalebook  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PLACEHOLDERS = ("YOUR-ORG", "PLACEHOLDER")


def _stamp(nb) -> dict:
    meta = nb.metadata.get("scalebook")
    assert meta is not None, "no metadata.scalebook: run tools/stamp_colab.py"
    return meta


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_no_placeholder(path):
    text = path.read_text()
    for word in PLACEHOLDERS:
        assert word not in text, f"{path.name} still holds {word!r}: run tools/stamp_colab.py"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_setup_cell_holds_the_stamped_source_and_the_installer(path):
    nb = nbformat.read(str(path), as_version=4)
    meta = _stamp(nb)
    lines = S.setup_cell(nb).source.split("\n")
    start, end = S._block_span(lines)
    assert lines[start:end] == S.install_block(meta, S.runtime_requirements()), (
        f"{path.name}: the setup cell's install block is stale (source, requirements or installer): run tools/stamp_colab.py"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_link_and_source_agree(path):
    nb = nbformat.read(str(path), as_version=4)
    meta = _stamp(nb)
    links = [c for c in nb.cells if c.get("id") == S.LINK_CELL_ID]
    if meta["source"] is None:
        assert links == [] and meta["colab"] is None
        return
    parsed = S.parse_source(meta["source"])
    assert (parsed["repo"], parsed["ref"]) == (meta["repo"], meta["ref"])
    assert meta["colab"] == S.colab_url(meta["repo"], meta["ref"], path.name)
    assert nb.cells[0].get("id") == S.LINK_CELL_ID and meta["colab"] in nb.cells[0].source


def test_every_notebook_has_the_same_stamp_and_the_readme_matches_it():
    stamps = {tuple(sorted(_stamp(nbformat.read(str(p), as_version=4)).items())) for p in NOTEBOOKS}
    assert len(stamps) == 1, stamps
    stamp = dict(next(iter(stamps)))
    readme = (ROOT / "README.md").read_text()
    block = readme.split(S.README_BEGIN, 1)[1].split(S.README_END, 1)[0]
    assert block.strip() == S.readme_table(stamp, [p.name for p in NOTEBOOKS]).strip()
    for word in PLACEHOLDERS:
        assert word not in block


def test_stamping_is_idempotent_and_reversible(tmp_path):
    """Stamp a GitHub source into a copy, check links and cells agree, stamp again (no change), unstamp (original)."""
    (tmp_path / "notebooks").mkdir()
    for p in NOTEBOOKS[:3]:
        shutil.copy(p, tmp_path / "notebooks" / p.name)
    for name in ("README.md", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    original = {p.name: p.read_text() for p in (tmp_path / "notebooks").iterdir()}
    src = "git+https://github.com/someone/scalebook@v0.1.0"
    assert S.main([src, "--root", str(tmp_path)]) == 0
    stamped = {p.name: p.read_text() for p in (tmp_path / "notebooks").iterdir()}
    for name, text in stamped.items():
        nb = nbformat.reads(text, as_version=4)
        assert nb.metadata.scalebook["source"] == src and repr(src) in S.setup_cell(nb).source
        url = f"https://colab.research.google.com/github/someone/scalebook/blob/v0.1.0/notebooks/{name}"
        assert nb.cells[0].id == S.LINK_CELL_ID and url in nb.cells[0].source
        # everything but the link cell, the install block and the metadata is untouched
        old = nbformat.reads(original[name], as_version=4)
        setup_new, setup_old = S.setup_cell(nb), S.setup_cell(old)
        assert [c.source for c in nb.cells[1:] if c is not setup_new] == [
            c.source for c in old.cells if c is not setup_old
        ]
        (a, b), (c, d) = (
            S._block_span(new := setup_new.source.split("\n")),
            S._block_span(was := setup_old.source.split("\n")),
        )
        assert new[:a] + new[b:] == was[:c] + was[d:]
    assert "someone/scalebook/blob/v0.1.0/notebooks/" in (tmp_path / "README.md").read_text()
    assert S.main([src, "--root", str(tmp_path)]) == 0
    assert {p.name: p.read_text() for p in (tmp_path / "notebooks").iterdir()} == stamped
    current = (
        S.parse_source("none")
        if _stamp(nbformat.read(str(NOTEBOOKS[0]), 4))["source"] is None
        else _stamp(nbformat.read(str(NOTEBOOKS[0]), 4))
    )
    assert S.main([current["source"] or "none", "--root", str(tmp_path)]) == 0
    assert {p.name: p.read_text() for p in (tmp_path / "notebooks").iterdir()} == original


@pytest.mark.parametrize(
    "bad",
    [
        "git+https://github.com/YOUR-ORG/scalebook",
        "git+https://github.com/YOUR-ORG/scalebook@main",
        "git+https://github.com/ORG/REPO@TAG",
        "https://github.com/a/b@v1",
        "git+https://gitlab.com/a/b@v1",
        "scalebook",
    ],
)
def test_stamp_refuses_sources_it_cannot_link(bad):
    with pytest.raises(S.StampError, match="SOURCE=git\\+https://github.com/ORG/REPO@TAG"):
        S.parse_source(bad)


def test_default_source_without_a_github_remote_says_what_to_pass(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with pytest.raises(S.StampError, match="is not a GitHub repository: pass the source"):
        S.source_from_git(tmp_path)
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", "git@github.com:org/repo.git"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    sha = subprocess.run(
        ["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert S.source_from_git(tmp_path) == f"git+https://github.com/org/repo@{sha}"


# --- the installer itself (fake pip) --------------------------------------------------------------------------


class FakePip:
    def __init__(self, returncode=0, stdout="", stderr=""):
        self.calls, self.result = [], types.SimpleNamespace(returncode=returncode, stdout=stdout, stderr=stderr)

    def __call__(self, cmd, **kw):
        self.calls.append(cmd)
        return self.result


def test_installer_without_source_says_what_to_set(monkeypatch):
    monkeypatch.delenv("SCALEBOOK_SOURCE", raising=False)
    pip = FakePip()
    msg = install_scalebook(None, ("numpy>=1.0",), run=pip)
    assert (
        pip.calls == []
        and "set the SCALEBOOK_SOURCE environment variable" in msg
        and msg.replace("e.g. ", "").count(". ") == 0
    )


def test_installer_uses_no_deps_when_requirements_are_met_and_env_overrides(monkeypatch):
    monkeypatch.setenv("SCALEBOOK_SOURCE", "git+file:///x@abc")
    pip = FakePip()
    assert install_scalebook("git+https://github.com/a/b@v1", ("numpy>=1.0", "pytest>=1.0"), run=pip) is None
    assert pip.calls[0][-2:] == ["--no-deps", "scalebook @ git+file:///x@abc"]


def test_installer_lets_pip_resolve_when_a_requirement_is_missing_or_too_old(monkeypatch):
    monkeypatch.delenv("SCALEBOOK_SOURCE", raising=False)
    for reqs in [("numpy>=999.0",), ("surely-not-installed-pkg>=1.0",)]:
        pip = FakePip()
        install_scalebook("git+https://github.com/a/b@v1", reqs, run=pip)
        assert "--no-deps" not in pip.calls[0]


def test_installer_names_the_fix_for_an_offline_runtime(monkeypatch):
    monkeypatch.delenv("SCALEBOOK_SOURCE", raising=False)
    pip = FakePip(
        1,
        stderr="fatal: unable to access 'https://github.com/a/b/': Could not resolve host: github.com\n"
        "error: subprocess-exited-with-error\n",
    )
    msg = install_scalebook("git+https://github.com/a/b@v1", (), run=pip)
    assert "could not reach the network" in msg and "internet" in msg and "Traceback" not in msg


def test_installer_names_the_fix_for_a_source_that_does_not_exist(monkeypatch):
    monkeypatch.delenv("SCALEBOOK_SOURCE", raising=False)
    pip = FakePip(
        1,
        stderr="  fatal: repository 'https://github.com/a/nope/' not found\n"
        "error: subprocess-exited-with-error\n\n× git clone did not run successfully.\n",
    )
    msg = install_scalebook("git+https://github.com/a/nope@v1", (), run=pip)
    assert msg.startswith("pip could not install scalebook from git+https://github.com/a/nope@v1")
    assert "check that this repository and tag exist" in msg and "\n" not in msg


def test_the_installer_is_standard_library_only():
    import ast
    import sys

    tree = ast.parse(function_source())
    modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert modules == {"importlib", "os", "re", "subprocess", "sys"}
    assert modules <= set(sys.stdlib_module_names)


def test_a_setup_cell_without_an_install_block_is_named(tmp_path, capsys):
    (tmp_path / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import scalebook_utils")])
    nbformat.write(nb, str(tmp_path / "notebooks" / "99_x.ipynb"))
    for name in ("README.md", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    assert S.main(["none", "--root", str(tmp_path)]) == 2
    assert "99_x.ipynb: its first code cell has no install block" in capsys.readouterr().err
