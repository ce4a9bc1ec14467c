"""GPUs (book ch. 12): `chips` (the public `gpus`: SMs, rooflines, re-exports), `network` (NVLink nodes, fat trees),
`collectives` (in and across nodes, NCCL latency) and `training` (the GPU side of the training planner)."""
