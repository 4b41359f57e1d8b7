"""``pctk plan``: nodes, days, dollars, memory and checkpoints for a training run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from toolkit.api.planning import plan as api_plan
from toolkit.cliopts import DbOption
from toolkit.cliout import FAILED, JsonOption, emit_json, exit_with
from toolkit.plan.limits import tokens_text


def _gib(x: float) -> str:
    return f"{x:,.1f}"


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        if value >= 1e6:
            return f"{value:.4g}"
        return f"{value:,.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render_text(plan: dict[str, Any]) -> str:
    """The human form: the inputs with their sources, then the figures."""
    lines = ["Inputs (value  <- where it came from)"]
    width = max(len(k) for k in plan["inputs"])
    for name, row in plan["inputs"].items():
        lines.append(f"  {name:<{width}}  {_fmt(row['value'])}  <- {row['source']}")
    mem = plan["memory"]
    ckpt = plan["checkpoint"]
    fail = plan["failures"]
    cost = plan["cost_usd"]
    batch = plan["global_batch"]
    lines += [
        "",
        "Work",
        f"  FLOPs per token      {plan['flops_per_token']:.4g} "
        f"(6N alone: {plan['flops_per_token_6n']:.4g})",
        f"  tokens               {plan['tokens']:.4g}",
        f"  flops                {plan['flops']:.4g}",
        f"  gpu_hours            {plan['gpu_hours']:,.0f} (compute at the MFU above)",
        "",
        "Size and time",
        f"  nodes x type         {plan['nodes']:,} x {plan['instance_type']} = "
        f"{plan['gpus']:,} {plan['gpu_model']} GPUs",
        f"  compute days         {plan['compute_days']:,.2f}",
        f"  days                 {plan['days']:,.2f} (with checkpoints and failures; "
        f"{plan['gpu_hours_with_overhead']:,.0f} GPU-hours held)",
        f"  global batch         {batch['tokens_per_step']:,} tokens/step "
        f"({batch['sequences_per_step']:,} sequences; bound "
        f"{tokens_text(batch['max_tokens_per_step'])}, up to {batch['max_nodes']:,} nodes)",
        f"  most nodes           {plan['max_nodes']:,} ({plan['max_nodes_why']})",
        "",
        "Cost (node-hours x hourly rate)",
    ]
    od = cost.get("on_demand")
    if od:
        lines.append(f"  on-demand            ${od['usd']:,.0f} at ${od['usd_per_node_hour']:,.2f}"
                     f"/h ({od['region']}, {od['date']}; {od['source']})")
    else:
        lines.append(f"  on-demand            n/a: {cost.get('on_demand_missing')}")
    cb = cost.get("capacity_block")
    if cb and cb["expired"]:
        lines.append(f"  capacity block       n/a: the rate on record "
                     f"(${cb['usd_per_node_hour']:,.2f}/h, {cb['region']}) expired on "
                     f"{cb['valid_until']}; today's rates: {cb['source']}")
    elif cb:
        lines.append(f"  capacity block       ${cb['usd']:,.0f} at ${cb['usd_per_node_hour']:,.2f}"
                     f"/h ({cb['region']}, valid until {cb['valid_until']}; {cb['source']})")
    else:
        lines.append("  capacity block       n/a: no Capacity Block rate on record for this type")
    lines += ["", f"Memory per GPU, GiB (usable {_gib(mem['usable_gib_per_gpu'])})",
              f"  {'':22}{'FSDP':>10}{'HSDP':>10}",
              f"  {'shard size':22}{mem['fsdp']['shard_size']:>10}{mem['hsdp']['shard_size']:>10}"]
    labels = [("parameters", "parameters (fp32)"), ("gradients", "gradients (fp32)"),
              ("optimizer_state", "optimizer (AdamW)"), ("gathered_blocks", "gathered blocks"),
              ("root_group", "root group (bf16)"),
              ("activations_no_ac", "activations, no AC"), ("activations_ac", "activations, AC")]
    for key, label in labels:
        lines.append(f"  {label:22}{mem['fsdp']['gib'][key]:>10,.1f}"
                     f"{mem['hsdp']['gib'][key]:>10,.1f}")
    for ac, label in ((False, "no AC"), (True, "AC")):
        key = "ac" if ac else "no_ac"
        f, h = mem["fsdp"], mem["hsdp"]
        lines.append(f"  {'total, ' + label:22}{f['total_gib_' + key]:>10,.1f}"
                     f"{h['total_gib_' + key]:>10,.1f}   fits: FSDP "
                     f"{'yes' if f['fits_' + key] else 'NO'}, HSDP "
                     f"{'yes' if h['fits_' + key] else 'NO'}")
    small = mem["smallest_shard"]
    lines.append(f"  smallest shard that fits: {small['no_ac'] or 'none'} without AC, "
                 f"{small['ac'] or 'none'} with AC")
    chosen = mem["chosen"]
    lines.append(f"  chosen: {chosen['strategy'].upper()} over {chosen['shard_size']} GPUs, "
                 f"AC {'on' if chosen['activation_checkpointing'] else 'off'}: "
                 f"{chosen['total_gib']:,.1f} GiB -> "
                 f"{'fits' if chosen['fits'] else 'DOES NOT FIT'}")
    lines += [
        "",
        "Checkpoints and failures",
        f"  checkpoint size      {ckpt['gb']:,.1f} GB ({ckpt['what']})",
        f"  write time           {ckpt['write_seconds']:,.0f} s at "
        f"{ckpt['write_gb_per_s']:.3g} GB/s",
        f"  job MTBF             {fail['job_mtbf_hours']:,.1f} h (node MTBF "
        f"{fail['node_mtbf_hours']:,.0f} h / {plan['nodes']:,} nodes)",
        f"  checkpoint interval  {ckpt['interval_hours'] * 60:,.0f} min ({ckpt['interval_rule']})",
        f"  time checkpointing   {ckpt['total_hours']:,.1f} h ({ckpt['time_fraction']:.1%})",
        f"  expected failures    {fail['expected_failures']:,.1f}, losing "
        f"{fail['lost_hours']:,.1f} h ({fail['time_fraction']:.1%}; {fail['rule']})",
    ]
    if plan["notes"]:
        lines += ["", "Notes"] + [f"  - {n}" for n in plan["notes"]]
    rec = plan["recommendation"]
    lines += ["", f"recommend {rec['nodes']:,} nodes: {rec['why']}"]
    lines += [f"WARN: {w['message']}" for w in plan["warnings"]]
    return "\n".join(lines) + "\n"


def plan_command(
    model: Annotated[str | None, typer.Option(
        "--model", help="FSDP benchmark preset (tiny, small, 1b, 8b, 70b). Default 8b.")] = None,
    params: Annotated[str | None, typer.Option(
        "--params", help="Parameter count instead of a preset (8B, 7e10).")] = None,
    layers: Annotated[int | None, typer.Option("--layers", help="With --params: layers.")] = None,
    dim: Annotated[int | None, typer.Option("--dim", help="With --params: model width.")] = None,
    heads: Annotated[int | None, typer.Option("--heads", help="With --params: query heads.")
                     ] = None,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", help="With --params: KV heads.")
                        ] = None,
    ffn_dim: Annotated[int | None, typer.Option(
        "--ffn-dim", help="With --params: SwiGLU hidden width (for activations).")] = None,
    vocab: Annotated[int | None, typer.Option(
        "--vocab", help="With --params: vocabulary (embedding left out of 6N).")] = None,
    seq_len: Annotated[int | None, typer.Option("--seq-len", help="Tokens per sequence.")
                       ] = None,
    tokens: Annotated[str | None, typer.Option(
        "--tokens", help="Training tokens (15T, 1.4e12). Default: --chinchilla.")] = None,
    flops: Annotated[str | None, typer.Option("--flops", help="Training FLOPs instead.")
                     ] = None,
    chinchilla: Annotated[bool, typer.Option(
        "--chinchilla", help="About 20 tokens per parameter (Hoffmann et al. 2022).")] = False,
    instance_type: Annotated[str | None, typer.Option(
        "--instance-type", help="Catalog instance type. Default p5.48xlarge.")] = None,
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="GPU model (H100, A100-80GB, ...): its largest catalog instance.")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs (whole nodes).")] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", help="Nodes. Default 4.")] = None,
    days: Annotated[float | None, typer.Option(
        "--days", help="Solve for the fewest nodes that finish within this many days.")] = None,
    budget: Annotated[str | None, typer.Option(
        "--budget", help="Solve for the fastest plan within this many USD (on-demand).")] = None,
    mfu: Annotated[float | None, typer.Option("--mfu", help="Model FLOPs utilisation, 0-1.")
                   ] = None,
    from_record: Annotated[list[str] | None, typer.Option(
        "--from-record", help="fsdp record (MFU, checkpoint rate) or storage record "
        "(checkpoint rate): a stored result id or a record file; repeatable.")] = None,
    node_mtbf_hours: Annotated[float | None, typer.Option(
        "--node-mtbf-hours", help="Mean time between failures of one node.")] = None,
    restart_minutes: Annotated[float | None, typer.Option(
        "--restart-minutes", help="Time to get going again after a failure.")] = None,
    ckpt_gbps: Annotated[float | None, typer.Option(
        "--ckpt-gbps", help="Checkpoint write throughput, GB/s.")] = None,
    micro_batch: Annotated[int, typer.Option(
        "--micro-batch", help="Sequences per GPU per step (activations).")] = 1,
    strategy: Annotated[str, typer.Option("--strategy", help="fsdp or hsdp.")] = "fsdp",
    shard_size: Annotated[int | None, typer.Option(
        "--shard-size", help="HSDP shard group size. Default: GPUs per node.")] = None,
    ac: Annotated[bool | None, typer.Option(
        "--ac/--no-ac", help="Activation checkpointing. Default: on only if needed to fit.",
        show_default=False)] = None,
    fsx_capacity_gib: Annotated[int | None, typer.Option(
        "--fsx-capacity-gib", help="FSx for Lustre size (checkpoint rate default).")] = None,
    config: Annotated[str | None, typer.Option(
        "--config", "-c", help="Cluster config (a file or a preset name): instance type, the "
        "queue's MaxCount and the FSx for Lustre throughput.")] = None,
    queue: Annotated[str | None, typer.Option(
        "--queue", "-q", help="With --config: the queue to plan for. Default: the first GPU "
        "queue.")] = None,
    max_batch_tokens: Annotated[str | None, typer.Option(
        "--max-batch-tokens", help="Bound on the global batch, tokens per step. Default: "
        "16M (Llama 3 405B's largest).")] = None,
    emit_config: Annotated[Path | None, typer.Option(
        "--emit-config", help="Write a ParallelCluster config for the plan (checked).")] = None,
    name: Annotated[str, typer.Option("--name", help="Cluster name for --emit-config.")
                    ] = "plan",
    capacity_reservation_id: Annotated[str | None, typer.Option(
        "--capacity-reservation-id", help="Capacity Block reservation for --emit-config.")
    ] = None,
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Plan a training run: FLOPs, GPU-hours, nodes, days, dollars, memory per GPU,
    checkpoint interval; optionally write its ParallelCluster config.

    Every input is echoed with its source; the last lines say which node count it
    recommends and why, and WARN of a plan longer than a year or a global batch above the
    bound. Exit 0 when the plan fits in memory, 1 when it does not (or the emitted config
    fails `pctk config check`), 2 for impossible input.
    """
    plan = api_plan(
        model=model, params=params, layers=layers, dim=dim, heads=heads, kv_heads=kv_heads,
        ffn_dim=ffn_dim, vocab=vocab, seq_len=seq_len, tokens=tokens, flops=flops,
        chinchilla=chinchilla, instance_type=instance_type, gpu=gpu, gpus=gpus,
        nodes=nodes, days=days, budget=budget, mfu=mfu, from_record=from_record or [],
        node_mtbf_hours=node_mtbf_hours, restart_minutes=restart_minutes,
        ckpt_gbps=ckpt_gbps, micro_batch=micro_batch, strategy=strategy,
        shard_size=shard_size, ac=ac, fsx_capacity_gib=fsx_capacity_gib, config=config,
        queue=queue, max_batch_tokens=max_batch_tokens, emit_config=emit_config,
        name=name, capacity_reservation_id=capacity_reservation_id, db=db)
    emitted: dict[str, Any] | None = plan.get("emit_config")
    if as_json:
        emit_json(plan)
    else:
        typer.echo(render_text(plan), nl=False)
        if emitted is not None:
            if emitted["written"]:
                typer.echo(f"\nwrote {emit_config} (passes `pctk config check`)")
            else:
                errors = [f for f in emitted["check"]["findings"] if f["level"] == "ERROR"]
                for f in errors:
                    typer.echo(f"ERROR {f}", err=True)
                typer.echo(f"pctk: {emit_config}: not written: the rendered config fails "
                           "`pctk config check`", err=True)
    failed = not plan["fits"] or (emitted is not None and not emitted["written"])
    exit_with(FAILED if failed else 0)
