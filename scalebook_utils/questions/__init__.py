"""The answer registry (the public name `questions`): `registry` holds `Question`, `add`, `expected`,
`get_question`; one module per chapter (`ch01` … `ch12`) registers that chapter's questions.

Importing the package registers every chapter, in order; a long chapter's parts come right after it
(`ch08_worked`; `ch12_collectives`, `ch12_rooflines`). Inside the grader's sandbox this folder is
replaced by a stub (grading/sandbox.py): the expected answers never reach a student's kernel.
"""

from scalebook_utils.questions import ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch08_worked  # noqa: F401, I001  (register, in order)
from scalebook_utils.questions import ch09, ch10, ch11, ch12, ch12_collectives, ch12_rooflines  # noqa: F401  (register, in order)
from scalebook_utils.questions.registry import *  # noqa: F403  (the registry's public names, __all__)
from scalebook_utils.questions.registry import __all__  # noqa: F401 - the package exports the registry's names
