"""Training (book chs. 5–6, 12): `planner` (the public `training`: plan / evaluate_layout for TPUs and GPUs),
`estimate` (`Config`, `Estimate`, the book's TPU estimate), `practitioner` (the practitioner's estimate of one
layout), `plan_report` (its `Plan`), `layouts` (the network-free pieces both planners share), `memory` (remat
policies, memory per chip), `costs` (ch. 5 thresholds), `zero_memory` (ch. 5 memory), `schedules` (pipeline
bubbles), `pictures` (the ch. 5 picture's pure numbers), `applied` (ch. 6's: parameters, days to train, memory,
the decision path), `published_runs` (the Rosetta). Each module's flat name, and what `training` re-exports:
`core/training/README.md`."""
