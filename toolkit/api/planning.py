"""``pctk plan`` from Python: the same options by the same names, amounts as numbers or as
people write them (``tokens="15T"``, ``budget="$500,000"``), records by id or file; the plan
as the dictionary ``pctk plan --json`` prints. What cannot be planned raises
:class:`toolkit.errors.PctkError`, one line with its fix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolkit.config.model import load_topology
from toolkit.errors import PctkError
from toolkit.fsutil import atomic_write_text
from toolkit.paths import resolve_config
from toolkit.plan import emit
from toolkit.plan.amounts import amount, parse_usd
from toolkit.plan.model import PlanError
from toolkit.plan.planner import Request, make_plan


def _records(refs: Sequence[str | Path], db: Path | None) -> list[dict[str, Any]]:
    if not refs:
        return []
    from toolkit.results.ingest import record_from
    from toolkit.results.store import ResultStore

    with ResultStore(db, writer=False) as store:
        return [record_from(str(ref), store) for ref in refs]


def plan(*, model: str | None = None, params: str | float | None = None,
         layers: int | None = None, dim: int | None = None, heads: int | None = None,
         kv_heads: int | None = None, ffn_dim: int | None = None, vocab: int | None = None,
         seq_len: int | None = None, tokens: str | float | None = None,
         flops: str | float | None = None, chinchilla: bool = False,
         instance_type: str | None = None, gpu: str | None = None, gpus: int | None = None,
         nodes: int | None = None, days: float | None = None,
         budget: str | float | None = None, mfu: float | None = None,
         from_record: Sequence[str | Path] = (), node_mtbf_hours: float | None = None,
         restart_minutes: float | None = None, ckpt_gbps: float | None = None,
         micro_batch: int = 1, strategy: str = "fsdp", shard_size: int | None = None,
         ac: bool | None = None, fsx_capacity_gib: int | None = None,
         config: str | Path | None = None, queue: str | None = None,
         max_batch_tokens: str | float | None = None, emit_config: str | Path | None = None,
         name: str = "plan", capacity_reservation_id: str | None = None,
         db: str | Path | None = None) -> dict[str, Any]:
    """The plan ``pctk plan`` prints (see its ``--help`` for each option). With
    ``emit_config`` the plan's cluster config is rendered, checked and written only if it
    passes; ``plan["emit_config"]`` says which."""
    try:
        req = Request(
            model=model, params=amount(params, "--params"), layers=layers, dim=dim,
            heads=heads, kv_heads=kv_heads, ffn_dim=ffn_dim, vocab=vocab, seq_len=seq_len,
            tokens=amount(tokens, "--tokens"), flops=amount(flops, "--flops"),
            chinchilla=chinchilla, instance_type=instance_type, gpu=gpu, gpus=gpus,
            nodes=nodes, days=days, mfu=mfu,
            budget=None if budget is None else (
                parse_usd(budget) if isinstance(budget, str) else amount(budget, "--budget")),
            records=tuple(_records(from_record, None if db is None else Path(db))),
            node_mtbf_hours=node_mtbf_hours, restart_minutes=restart_minutes,
            ckpt_gbps=ckpt_gbps, micro_batch=micro_batch, strategy=strategy.lower(),
            shard_size=shard_size, ac=ac, fsx_capacity_gib=fsx_capacity_gib,
            max_batch_tokens=amount(max_batch_tokens, "--max-batch-tokens"),
            cluster=None if config is None else load_topology(resolve_config(str(config))),
            queue=queue)
        result = make_plan(req)
        if emit_config is not None:
            target = Path(emit_config)
            spec = emit.plan_spec(result, name=name,
                                  capacity_reservation_id=capacity_reservation_id)
            text, report = emit.render_and_check(spec, str(target))
            written = report.exit_code == 0
            if written:
                atomic_write_text(target, text)
            result["emit_config"] = {"file": str(target), "written": written,
                                     "check": report.to_json()}
    except PlanError as exc:
        raise PctkError(*exc.args) from None
    return result
