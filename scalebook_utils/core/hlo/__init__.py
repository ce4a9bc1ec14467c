"""core.hlo — reading compiled HLO text (pure: no jax; it reads text pasted from anywhere).

    text         the one reader: element types and their sizes, the opcode vocabulary (`COLLECTIVE_OPS`,
                 `HLO_NAME`), array types, instructions and computations (`parse_module`, `parse_hlo_ops`)
    collectives  the collectives XLA emitted: counts, arrays, bytes, mesh axes (chs. 3, 5; `compiled_collectives`)
    ops          what kind of work each op is (`categorize`) and a program's memory (`memory_report`) (ch. 9)
    schedule     the order of collectives and matmuls, and what each matmul waits for (ch. 10)

The readers sit on `text` and parse no HLO lines of their own. Nothing is imported here.
"""
