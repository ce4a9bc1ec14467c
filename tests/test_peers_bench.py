"""benchmarks/peers.py without the peers (no network, nothing installed): the same inputs for every tool, the
causes stated only when the numbers show them, and a skip with the reason when the peers are missing."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def peers():
    spec = importlib.util.spec_from_file_location("peers_bench", ROOT / "benchmarks" / "peers.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def sb(peers):
    return peers.scalebook_side()


def test_every_peer_job_has_a_scalebook_row(peers, sb):
    for job in peers.jobs():
        kind, *rest = job["id"].split("/")
        if kind == "params":
            assert f"params/{rest[0]}" in sb
        elif kind == "infer":
            assert f"prefill/{'/'.join(rest[:4])}" in sb
        elif kind in ("prefill", "decode"):
            assert f"{kind}/{'/'.join(rest[:-1])}" in sb
    # the llm-analysis model is the scalebook config's own dimensions
    la = next(j for j in peers.jobs() if j["id"] == "params/llama3-8b/la")["model"]
    assert (la["L"], la["D"], la["F"], la["N"], la["K"], la["V"]) == (32, 4096, 14_336, 32, 8, 128_256)


def test_causes_are_stated_only_when_the_numbers_show_them(peers, sb):
    cfg = peers._cfg("llama3-8b")
    total = sb["params/llama3-8b"][0]
    exact = {"params/llama3-8b/la": {"params": float(total - cfg.V * cfg.D)}}
    rows, causes = peers.rows_and_causes(sb, exact)
    row = next(r for r in rows if r[:2] == ["parameters", "llama3-8b"])
    assert row[5] == "-6.5%" and row[8] == "1" and "shared embedding" in causes[0]
    off = {"params/llama3-8b/la": {"params": float(total - cfg.V * cfg.D + 1000)}}
    rows, causes = peers.rows_and_causes(sb, off)
    row = next(r for r in rows if r[:2] == ["parameters", "llama3-8b"])
    assert row[8] == "" and not any("shared embedding" in c for c in causes[:1])


def test_a_refusal_by_a_peer_is_shown_not_raised(peers, sb):
    res = {"params/llama3-8b/genz": {"error": "ValueError: All params would not fit on chip"}}
    rows, _ = peers.rows_and_causes(sb, res)
    row = next(r for r in rows if r[:2] == ["parameters", "llama3-8b"])
    assert row[6].startswith("error: ValueError") and row[7] == ""


def test_missing_peers_skip_with_the_reason(peers, monkeypatch):
    monkeypatch.setenv("SCALEBOOK_PEERS_PYTHON", sys.executable)  # scalebook's venv: neither peer is in it
    env = peers.ensure_peers(install=True)  # a named interpreter is never installed into
    assert env.available == {"llm-analysis": False, "genz": False}
    assert any("llm_analysis is not importable" in n for n in env.notes)
    body, notes = peers.report()
    assert body == "skipped: neither peer could be installed" and any("GenZ is not importable" in n for n in notes)
