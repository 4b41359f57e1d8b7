"""``pctk bench scaling``: the FSDP benchmark at a ladder of node counts."""
