"""Inference benchmark that runs on the nodes: a KV-cache decoder and its roofline."""
