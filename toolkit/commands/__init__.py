"""What the command modules share and nothing below them may use: the end of a benchmark
command that ran one Slurm job (:mod:`toolkit.commands.jobend`). The top layer, with
``toolkit/cli.py`` and each package's ``cli.py``."""
