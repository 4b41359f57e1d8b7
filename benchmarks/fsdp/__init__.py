"""FSDP2 training benchmark: a Llama-style decoder sharded with ``fully_shard``.

Node-side package: standard library and torch only. Layout follows torchtitan: the model
(``model.py``), where sharding is applied (``parallelize.py``), the metrics (``metrics.py``),
data, checkpoints and one short training loop (``train.py``).
"""
