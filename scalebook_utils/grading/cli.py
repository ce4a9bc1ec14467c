"""The `scalebook` command. `scalebook grade SUB.ipynb... --against exercises/NN_slug.ipynb`.

Thin: argument parsing and printing; the work is in `scalebook_utils.grading`.
Exit status: 0 when grading ran (students who fail are results, not errors); 2 for misuse (a missing
or corrupt file, a submission for another exercise, an --against that is not an exercise).
"""

from __future__ import annotations

import argparse
import math
import sys

from scalebook_utils.grading import exercises, report, runner, sandbox

_GRADE_EPILOG = """\
Each submission runs in a fresh kernel in its own bubblewrap sandbox (read-only system and package,
the answer registry hidden, no network, a private work folder and /tmp, its own PID namespace); its
answers are recorded there and judged outside it. The submission file is never written. Where
bubblewrap cannot run, a warning says so and grading falls back to time and memory limits only.

output: a table per submission and a line "alice.ipynb: 21/24" (default); --json: a list of
{"submission", "passed", "total", "questions": [{"qid", "passed", "detail"}]}; --csv: columns
submission,qid,passed,detail with passed = 1 or 0.

exit status: 0 when grading ran, 2 for misuse (missing or corrupt file, wrong exercise)."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scalebook", description="Tools for the scalebook notebooks (companion to 'How to Scale Your Model')."
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    g = sub.add_parser(
        "grade",
        help="grade submitted exercise notebooks with nbval",
        description="Grade submitted exercise notebooks against the exercise they answer.",
        epilog=_GRADE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g.add_argument("submissions", nargs="+", metavar="SUBMISSION", help="a student's .ipynb file")
    g.add_argument(
        "--against",
        required=True,
        metavar="EXERCISE.ipynb",
        help="the exercise notebook, e.g. exercises/01_rooflines.ipynb",
    )
    fmt = g.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON instead of a table")
    fmt.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    g.add_argument(
        "--timeout",
        type=_positive("--timeout", "seconds"),
        default=runner.DEFAULT_TIMEOUT_PER_CELL,
        metavar="SECONDS",
        help="time limit per cell, a finite number > 0 (default %(default)g)",
    )
    g.add_argument(
        "--memory-limit",
        type=_positive("--memory-limit", "GiB", allow_none=True),
        default=runner.DEFAULT_MEMORY_LIMIT_BYTES / 2**30,
        metavar="GiB",
        help="memory limit of the kernel (RLIMIT_DATA), a finite number > 0, or 'none' (default %(default)g)",
    )
    g.add_argument("--jobs", type=int, default=1, metavar="N", help="grade N submissions at once (default 1)")
    g.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run without bubblewrap even where it works (trusted submissions only)",
    )
    return p


def _positive(flag: str, unit: str, allow_none: bool = False):
    """argparse type: a finite number > 0 (NaN, inf, 0 and negatives are usage errors), or 'none'."""

    def parse(text: str):
        if allow_none and text.strip().lower() == "none":
            return None
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not math.isfinite(value) or value <= 0:
            allowed = "a finite number > 0" + (" or 'none'" if allow_none else "")
            raise argparse.ArgumentTypeError(f"{flag} must be {allowed} ({unit}), got {text!r}")
        return value

    return parse


def _progress(result: report.SubmissionResult) -> None:
    print(f"graded {report.summary_line(result)} ({result.seconds:.0f} s)", file=sys.stderr, flush=True)


def _grade(args, parser) -> int:
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    sandboxed = False if args.no_sandbox else None
    if not args.no_sandbox and not sandbox.available():
        print(
            f"scalebook grade: warning: {sandbox.unavailable_reason()}; grading WITHOUT a sandbox, with time "
            "and memory limits only: a submission can read and change your files and other grades",
            file=sys.stderr,
        )
    try:
        results = runner.grade(
            args.submissions,
            args.against,
            timeout_per_cell=args.timeout,
            memory_limit_bytes=None if args.memory_limit is None else int(args.memory_limit * 2**30),
            jobs=args.jobs,
            progress=_progress if sys.stderr.isatty() else None,
            sandboxed=sandboxed,
        )
    except exercises.GradingError as exc:
        print(f"scalebook grade: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(report.results_to_json(results))
    elif args.csv:
        sys.stdout.write(report.results_to_csv(results))
    else:
        print(report.format_results_table(results))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "grade":
        return _grade(args, parser)
    parser.print_help()
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
