"""Inference (book chs. 7–8): `costs` (the public `inference`: decode and prefill step times, memory, precision),
`comms` (tensor-parallel collectives of a step), `serving` (the serving planner and frontier), `engine` (batching)."""
