"""Experiments: a plan of arms × seeds of one task (`plan`), run as a whole, one state directory
per run, resuming the unfinished ones (`runs`), and the experiment directory's index
`experiment.json` (`index`). Below `cli` (which parses the command and renders its output),
above `preflight` and `rehearsal`, whose stand-ins an experiment with `stand_ins` shares."""
