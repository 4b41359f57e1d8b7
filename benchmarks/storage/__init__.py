"""Node-side storage benchmark: fio phases and a metadata rate script (stdlib only)."""
