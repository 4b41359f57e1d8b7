"""FSDP benchmark tests (CPU, gloo)."""
