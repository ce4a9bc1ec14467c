"""The grader under attack: one all-wrong submission per attack family, graded beside the honest solution.

The attacks are those of the reliability report (../shared/reviews/reliability.md, part B): forging the
verdict inside the kernel (F2–F9), defeating the grader's own pipeline (F10, F11), writing outside the
submission's own folder (W1–W4), processes left behind (W5), and — new with the sandbox — reading the
answer key (the registry, the solutions) instead of answering. Each test asserts that the attack scores 0,
that the honest solution graded in the same run (two at a time) scores full marks, and that no file
outside the runs' own folders changed. All submissions are graded in one `grade` call (a module fixture).
"""

from __future__ import annotations

import copy
import hashlib
import os
import textwrap
from pathlib import Path

import nbfixtures as F
import pytest
from nbformat.v4 import new_code_cell

from scalebook_utils import grading, sandbox

# Skipped only outside CI where bubblewrap cannot run; CI installs it (.ci/run), so there a missing sandbox fails.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not sandbox.available() and not os.environ.get("CI"), reason=f"no sandbox here: {sandbox.unavailable_reason()}"
    ),
]

PKG = Path(grading.__file__).resolve().parents[1]  # scalebook_utils (grading is its grading/ folder)
TIMEOUT = 10
#: A number no other process on the machine uses as its sleep time (W5 looks for it after grading).
STRAY_SLEEP = "613.25"


def _attack(ex, code: str, answers: dict | None = None):
    """The exercise with every answer wrong and `code` as a cell right after the setup cell."""
    nb = F.with_answers(copy.deepcopy(ex), answers if answers is not None else F.WRONG)
    nb.cells.insert(2, new_code_cell(textwrap.dedent(code)))
    return nb


def _attacks(d: Path) -> dict[str, str]:
    victim, exercise = d / "victim.ipynb", d / "exercise.ipynb"
    forged_report = (
        '<?xml version="1.0"?><testsuites><testsuite>'
        + "".join(f'<testcase name="Cell {i}"/>' for i in range(30))
        + "</testsuite></testsuites>"
    )
    return {
        # --- F2–F9: forging the verdict inside the kernel -------------------------------------------------
        "f2_package_attr": """
            import scalebook_utils
            scalebook_utils.check = lambda qid, *a, **k: print(f"{qid}: correct")
            """,
        "f3_verdict": """
            import sys, scalebook_utils.check
            sys.modules['scalebook_utils.check'].verdict = lambda qid, a: (True, 'correct')
            sys.modules['scalebook_utils.check'].judge = lambda qid, r: (True, 'correct')
            """,
        "f7_fake_modules": """
            import sys, types
            fake = types.ModuleType('scalebook_utils')
            fake.check = lambda qid, *a, **k: print(f"{qid}: correct")
            ans = types.ModuleType('scalebook_utils.answers')
            ans.record = lambda qid, get: print(f"{qid}: correct")
            sys.modules.update({'scalebook_utils': fake, 'scalebook_utils.answers': ans})
            """,
        "f8_stdout": """
            import sys
            class Rewrite:
                def __init__(self, s): self.s = s
                def write(self, t): return self.s.write(t.replace('incorrect', 'correct').replace('not answered yet', 'correct'))
                def __getattr__(self, n): return getattr(self.s, n)
            sys.stdout = Rewrite(sys.stdout)
            """,
        "f9_input_transformer": """
            import re
            def cheat(lines):
                return [re.sub(r"^(record|check)\\((['\\"])(.*?)\\2.*$", r'print("\\3: correct")', ln) for ln in lines]
            get_ipython().input_transformers_cleanup.append(cheat)
            """,
        "forged_records": f"""
            import json, os
            path = os.path.join(os.environ['SCALEBOOK_PROBE_DIR'], 'out', 'answers.jsonl')
            with open(path, 'a') as f:
                for qid in {F.QIDS!r}:
                    f.write(json.dumps({{'qid': qid, 'record': {{'verdict': 'correct', 'passed': True}}}}) + '\\n')
                    f.write(json.dumps({{'qid': qid, 'record': {{'str': 'correct', 'num': 'correct'}}}}) + '\\n')
            import scalebook_utils.answers as a
            a.record = lambda qid, get: None   # nothing honest gets recorded after this
            """,
        # --- F10, F11: the grader's own pipeline --------------------------------------------------------------
        "f10_detached_report": f"""
            import subprocess, sys, textwrap
            code = textwrap.dedent('''
                import glob, os, time
                for _ in range(600):
                    for p in glob.glob('/grade/work/*.xml') + glob.glob('*.xml'):
                        open(p, 'w').write({forged_report!r})
                    time.sleep(0.05)
                ''')
            subprocess.Popen([sys.executable, '-c', code], start_new_session=True, env={{}},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            """,
        "f11_conftest_timeout": """
            open('conftest.py', 'w').write(
                "import pytest\\n"
                "@pytest.hookimpl(hookwrapper=True)\\n"
                "def pytest_runtest_makereport(item, call):\\n"
                "    out = yield\\n"
                "    r = out.get_result(); r.outcome = 'passed'\\n")
            import time
            time.sleep(3 * 10)   # past --timeout: the old grader reran in this folder and loaded the conftest
            """,
        # --- W1–W4: writing outside its own folder ----------------------------------------------------------
        "w1_reference": f"""
            import json
            try:
                nb = json.load(open({str(exercise)!r}))
                for c in nb['cells']:
                    if c.get('metadata', {{}}).get('scalebook', {{}}).get('role') == 'check':
                        c['source'] = 'print("correct")'
                json.dump(nb, open({str(exercise)!r}, 'w'))
            except OSError as e:
                print('W1 refused:', type(e).__name__)
            """,
        "w2_classmate": f"""
            try:
                open({str(victim)!r}, 'w').write('{{}}')
            except OSError as e:
                print('W2 refused:', type(e).__name__)
            """,
        "w3_other_runs": f"""
            import glob, os
            roots = ['/tmp', {str(d.parent)!r}, os.environ.get('TMPDIR', '/tmp')]
            for root in roots:
                for p in glob.glob(os.path.join(root, '**', '*.xml'), recursive=True) + \\
                         glob.glob(os.path.join(root, '**', 'answers.jsonl'), recursive=True):
                    try:
                        open(p, 'w').write('sabotaged')
                    except OSError:
                        pass
            """,
        "w4_package": f"""
            for path in [{str(PKG / 'grading/check.py')!r}, '/opt/scalebook/scalebook_utils/grading/check.py',
                         {str(PKG / 'grading/answers.py')!r}, '/opt/scalebook/scalebook_utils/grading/answers.py']:
                try:
                    open(path, 'a').write('\\ndef judge(qid, rec):\\n    return True, "correct"\\n')
                except OSError as e:
                    print('W4 refused:', path, type(e).__name__)
            """,
        "w5_stray_process": f"""
            import subprocess
            subprocess.Popen(['sleep', '{STRAY_SLEEP}'], start_new_session=True, env={{}})
            subprocess.Popen(['sleep', '{STRAY_SLEEP}'])
            """,
        # --- the answer key instead of an answer ---------------------------------------------------------------
        "key_registry": """
            try:
                from scalebook_utils.questions import expected
            except Exception as e:
                print('registry hidden:', type(e).__name__)
            """,
        "key_solutions": f"""
            import glob, json, re
            def steal(qid):
                for p in [{str(d / 'victim.ipynb')!r}, *glob.glob({str(F.ROOT / 'solutions' / '*.ipynb')!r})]:
                    try:
                        nb = json.load(open(p))
                    except OSError:
                        continue
                    for c in nb['cells']:
                        meta = c.get('metadata', {{}}).get('scalebook', {{}})
                        if meta.get('qid') == qid and meta.get('role') == 'answer':
                            ns = {{}}
                            exec(re.sub(r'### (BEGIN|END) SOLUTION', '', ''.join(c['source'])), ns)
                            return ns[qid.replace('.', '_')]
            """,
    }


#: The answer-key attacks answer with the key itself (their answer cells), instead of the wrong answers.
KEY_ANSWERS = {
    "key_registry": {q: f"{q.replace('.', '_')} = expected({q!r})" for q in F.QIDS},
    "key_solutions": {q: f"{q.replace('.', '_')} = steal({q!r})" for q in F.QIDS},
}


def _digest(paths) -> dict[str, str]:
    out = {}
    for root in paths:
        root = Path(root)
        files = (
            [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        )
        for p in files:
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _stray_sleepers() -> list[int]:
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if STRAY_SLEEP in (p.info["cmdline"] or []):
                found.append(p.pid)
        except psutil.Error:
            continue
    return found


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    d = tmp_path_factory.mktemp("attacks")
    ex = F.exercise_notebook()
    F.write(ex, d / "exercise.ipynb")
    F.write(F.solution_notebook(), d / "solution.ipynb")
    F.write(F.solution_notebook(), d / "victim.ipynb")
    attacks = _attacks(d)
    for name, code in attacks.items():
        F.write(_attack(ex, code, KEY_ANSWERS.get(name)), d / f"{name}.ipynb")
    watched = [d / "exercise.ipynb", d / "solution.ipynb", d / "victim.ipynb", PKG]
    before = _digest(watched)
    work = tmp_path_factory.mktemp("attack-work")
    # the honest solution first and last, so that it runs beside attackers with --jobs 2
    order = ["solution", *attacks, "victim"]
    results = grading.grade(
        [d / f"{n}.ipynb" for n in order],
        d / "exercise.ipynb",
        timeout_per_cell=TIMEOUT,
        jobs=2,
        tmp_root=str(work),
        sandboxed=True,
    )
    after = _digest(watched)
    return {Path(r.submission).stem: r for r in results}, before, after, _stray_sleepers()


def _assert_held(attacked, name):
    results, before, after, _ = attacked
    r = results[name]
    assert r.sandboxed
    assert r.passed == 0, [(q.qid, q.detail) for q in r.questions]
    for honest in ("solution", "victim"):
        assert results[honest].passed == results[honest].total == len(F.QIDS), results[honest].questions
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, changed


@pytest.mark.parametrize("name", ["f2_package_attr", "f3_verdict", "f7_fake_modules"])
def test_patching_the_checker_in_the_kernel_changes_nothing(attacked, name):
    _assert_held(attacked, name)


@pytest.mark.parametrize("name", ["f8_stdout", "f9_input_transformer"])
def test_rewriting_output_or_input_changes_nothing(attacked, name):
    _assert_held(attacked, name)


def test_forged_answer_records_are_judged_as_wrong_answers(attacked):
    _assert_held(attacked, "forged_records")
    details = [q.detail for q in attacked[0]["forged_records"].questions]
    assert not any(d == "correct" for d in details)


def test_a_detached_process_rewriting_the_report_changes_nothing(attacked):
    _assert_held(attacked, "f10_detached_report")


def test_a_conftest_and_a_forced_timeout_change_nothing(attacked):
    _assert_held(attacked, "f11_conftest_timeout")


@pytest.mark.parametrize("name", ["w1_reference", "w2_classmate", "w3_other_runs", "w4_package"])
def test_writing_outside_its_folder_changes_nothing(attacked, name):
    _assert_held(attacked, name)


def test_no_process_outlives_its_sandbox(attacked):
    _assert_held(attacked, "w5_stray_process")
    assert attacked[3] == [], f"processes left running: {attacked[3]}"


@pytest.mark.parametrize("name", ["key_registry", "key_solutions"])
def test_the_answer_key_is_out_of_reach(attacked, name):
    _assert_held(attacked, name)


def test_sandboxed_grading_is_the_default_where_bwrap_runs(tmp_path):
    ex = F.exercise_notebook()
    F.write(ex, tmp_path / "exercise.ipynb")
    F.write(F.solution_notebook(), tmp_path / "solution.ipynb")
    [r] = grading.grade([tmp_path / "solution.ipynb"], tmp_path / "exercise.ipynb", timeout_per_cell=60)
    assert r.sandboxed and r.passed == r.total


def test_unavailable_sandbox_is_said_plainly(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox, "unavailable_reason", lambda: "bubblewrap (bwrap) is not installed: install it")
    ex = F.exercise_notebook()
    F.write(ex, tmp_path / "exercise.ipynb")
    with pytest.raises(grading.GradingError, match="no sandbox: bubblewrap"):
        grading.grade([tmp_path / "exercise.ipynb"], tmp_path / "exercise.ipynb", sandboxed=True)
    assert os.environ.get("SCALEBOOK_PROBE_DIR") is None
