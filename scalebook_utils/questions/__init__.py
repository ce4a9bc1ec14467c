"""The answer registry (the public name `questions`): `registry` holds `Question`, `add`, `expected`,
`get_question`; one module per chapter (`ch01` … `ch12`) registers that chapter's questions.

Importing the package registers every chapter, in order. Inside the grader's sandbox this folder is
replaced by a stub (grading/sandbox.py): the expected answers never reach a student's kernel.
"""

from scalebook_utils.questions import ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11, ch12  # noqa: E402,F401,I001  (register, in order)  # noqa: E402,F401,I001
from scalebook_utils.questions.registry import *  # noqa: F403  (the registry's public names, __all__)
from scalebook_utils.questions.registry import __all__  # noqa: F401 - the package exports the registry's names
