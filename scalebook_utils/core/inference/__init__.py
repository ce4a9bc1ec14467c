"""Inference (book chs. 7–8): `costs` (the public `inference`, a front door re-exporting `memory`: precisions, the
served model, KV and weight bytes, max batch; `decode`: decode and prefill step times; `model_parallel`: TP limits,
2-D weight-stationary; `economics`: disaggregation, cost per token, speculative decoding), `comms` (tensor-parallel
collectives of a step), `serving` (the serving planner and frontier), `engine` (batching)."""
