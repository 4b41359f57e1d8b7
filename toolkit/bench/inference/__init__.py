"""``pctk bench inference``: the offline engine benchmark through Slurm."""
