"""A training plan from a model, a token budget, hardware and measurements.

:func:`make_plan` turns :class:`Request` (what the user asked, None for "use the default")
into one dict: every input with its value and where it came from, then the figures
(``flops``, ``gpu_hours``, ``days``, ``gpus``, ``nodes``, ``cost_usd``, ``memory``,
``checkpoint``, ``failures``). The arithmetic lives in :mod:`toolkit.plan.model`.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from benchmarks.fsdp.config import PRESETS, preset
from toolkit import catalog
from toolkit.errors import PctkError
from toolkit.plan import cluster as cl
from toolkit.plan import model as m
from toolkit.plan.model import GIB, PlanError, Shape

DEFAULT_INSTANCE = "p5.48xlarge"
DEFAULT_NODES = 4
DEFAULT_MODEL = "8b"
DEFAULT_MFU = 0.40
DEFAULT_MFU_SOURCE = (
    "planning default: Llama 3 405B reached 38-43% BF16 MFU on 8,192-16,384 H100s (Llama "
    "Team, The Llama 3 Herd of Models, arXiv 2407.21783, Table 4); measure yours with "
    "`pctk bench fsdp` and pass --from-record")
# Llama 3 paper, section 3.3.4: 419 unexpected interruptions in a 54-day snapshot of 405B
# pre-training on 16,384 GPUs (2,048 servers of 8): 54 * 24 * 2048 / 419 server-hours each
DEFAULT_NODE_MTBF_H = 54 * 24 * 2048 / 419
DEFAULT_NODE_MTBF_SOURCE = (
    "derived: 419 unexpected interruptions in a 54-day snapshot on 2,048 8-GPU servers "
    "(The Llama 3 Herd of Models, arXiv 2407.21783, section 3.3.4)")
DEFAULT_RESTART_MIN = 15.0
DEFAULT_HEADROOM = 0.10  # of GPU memory kept for the CUDA context, NCCL buffers, allocator
DEFAULT_FSX_GIB = 4800
MAX_NODES = 20_000

# Capacity Block "effective instance hourly rate" (USD), AWS Capacity Blocks pricing page
# snapshot valid until 2025-01-01, as recorded in /work/shared/reference/instance_facts.md
# section 4 (source S6c of toolkit/data/instances.yaml). Capacity Block prices are dynamic:
# examples, not quotes.
CAPACITY_BLOCK_SOURCE = ("AWS Capacity Blocks pricing page snapshot, rates valid until "
                         "2025-01-01: https://aws.amazon.com/ec2/capacityblocks/pricing/ "
                         "(prices are dynamic; an example, not a quote)")
CAPACITY_BLOCK_USD_PER_HOUR: dict[str, tuple[float, str]] = {
    "p5.48xlarge": (39.33, "us-east-1 / us-east-2"),
    "p5e.48xlarge": (43.26, "us-east-2 (8 x H200 row)"),
    "p5en.48xlarge": (43.26, "us-east-2 (8 x H200 row)"),
    "p4d.24xlarge": (14.75, "us-east-2 / us-west-2"),
}


@dataclass(frozen=True)
class Request:
    """What the user asked for; None means the stated default."""

    model: str | None = None
    params: float | None = None
    layers: int | None = None
    dim: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    ffn_dim: int | None = None
    vocab: int | None = None
    seq_len: int | None = None
    tokens: float | None = None
    flops: float | None = None
    chinchilla: bool = False
    instance_type: str | None = None
    gpu: str | None = None
    gpus: int | None = None
    nodes: int | None = None
    days: float | None = None
    budget: float | None = None
    mfu: float | None = None
    records: tuple[dict[str, Any], ...] = ()
    node_mtbf_hours: float | None = None
    restart_minutes: float | None = None
    ckpt_gbps: float | None = None
    micro_batch: int = 1
    strategy: str = "fsdp"
    shard_size: int | None = None
    ac: bool | None = None
    headroom: float = DEFAULT_HEADROOM
    fsx_capacity_gib: int | None = None


@dataclass
class Inputs:
    """Every input as used, with where it came from (echoed in the output)."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def put(self, name: str, value: Any, source: str) -> Any:
        self.rows[name] = {"value": value, "source": source}
        return value


def billions(n: float) -> str:
    """``70.55B``, ``405B``, ``1,000,000B``: a parameter count for a message."""
    b = n / 1e9
    return f"{b:.4g}B" if b < 1e4 else f"{b:,.0f}B"


def _positive(name: str, value: float | None, allow_zero: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise PlanError(f"--{name} must be a finite number (got {value})")
    if value < 0 or (value == 0 and not allow_zero):
        raise PlanError(f"--{name} must be {'0 or more' if allow_zero else 'positive'} "
                        f"(got {value:g})")


def validate(req: Request) -> None:
    for name in ("params", "layers", "dim", "heads", "kv_heads", "ffn_dim", "vocab", "seq_len",
                 "tokens", "flops", "gpus", "nodes", "days", "budget", "node_mtbf_hours",
                 "ckpt_gbps", "micro_batch", "shard_size", "fsx_capacity_gib"):
        _positive(name.replace("_", "-"), getattr(req, name))
    _positive("restart-minutes", req.restart_minutes, allow_zero=True)
    if req.mfu is not None and not 0 < req.mfu <= 1:
        raise PlanError(f"--mfu must be a fraction in (0, 1] (got {req.mfu:g})",
                        "write 40% as 0.4")
    if not 0 <= req.headroom < 1:
        raise PlanError(f"--headroom must be in [0, 1) (got {req.headroom:g})")
    if sum(x is not None and x is not False for x in (req.tokens, req.flops,
                                                       req.chinchilla or None)) > 1:
        raise PlanError("give one of --tokens, --flops and --chinchilla")
    if req.model is not None and req.params is not None:
        raise PlanError("give --model or --params, not both")
    if req.gpus is not None and req.nodes is not None:
        raise PlanError("give --gpus or --nodes, not both")
    if (req.gpus is not None or req.nodes is not None) and (req.days or req.budget):
        raise PlanError("--days and --budget solve for the size: leave out --gpus and --nodes")
    if req.instance_type is not None and req.gpu is not None:
        raise PlanError("give --instance-type or --gpu, not both")
    if req.strategy not in ("fsdp", "hsdp"):
        raise PlanError(f"--strategy must be fsdp or hsdp (got {req.strategy!r})")


# --- the model ----------------------------------------------------------------------------

def _seq_len(req: Request, measured: Measured, default: int, default_source: str,
             inputs: Inputs) -> int:
    """--seq-len, else the one the measured MFU was measured at (its FLOPs per token depend
    on it), else the default."""
    uses_record = req.mfu is None and measured.mfu is not None
    if uses_record and measured.seq_len is not None:
        if req.seq_len is not None and req.seq_len != measured.seq_len:
            raise PlanError(
                f"--seq-len {req.seq_len:,} is not the sequence length the MFU of "
                f"{measured.mfu_record} was measured at ({measured.seq_len:,})",
                "leave out --seq-len, or give --mfu for another sequence length")
        return inputs.put("seq_len", measured.seq_len,
                          f"{measured.mfu_record}: the sequence length its MFU was measured at")
    if req.seq_len is not None:
        return inputs.put("seq_len", req.seq_len, "--seq-len")
    if uses_record:
        inputs.notes.append(f"{measured.mfu_record} does not say its sequence length "
                            "(params.seq_len): its MFU is assumed to hold at "
                            f"{default:,} tokens")
    return inputs.put("seq_len", default, default_source)


def resolve_shape(req: Request, inputs: Inputs,
                  measured: Measured | None = None) -> tuple[Shape, int]:
    """The model's shape and the sequence length."""
    measured = measured or Measured()
    if req.params is None:
        name = req.model or DEFAULT_MODEL
        try:
            args = preset(name)
        except ValueError as exc:
            raise PlanError(str(exc)) from None
        src = "--model" if req.model else "default"
        inputs.put("model", name.lower(), f"{src}: FSDP benchmark preset "
                   "(benchmarks/fsdp/config.py)")
        shape = m.shape_of(args)
        seq = _seq_len(req, measured, args.max_seq_len, "the preset's max_seq_len", inputs)
    else:
        n = int(req.params)
        shape_given = [req.layers, req.dim, req.heads]
        if any(x is not None for x in shape_given) and not all(x is not None for x in
                                                                shape_given):
            raise PlanError("the attention term needs all of --layers, --dim and --heads")
        if req.dim is not None and req.heads is not None and req.dim % req.heads:
            raise PlanError(f"--dim {req.dim} is not a multiple of --heads {req.heads}")
        embedding = (req.vocab or 0) * (req.dim or 0)
        if embedding >= n:
            raise PlanError(f"--params {n:,} is not more than the input embedding "
                            f"(--vocab x --dim = {embedding:,})")
        shape = Shape(n, n - embedding, req.layers, req.dim, req.heads, req.kv_heads,
                      req.ffn_dim, req.vocab)
        inputs.put("model", f"{billions(n)} parameters", "--params" + (
            " (the input embedding, --vocab x --dim, left out of 6N)" if embedding else
            " (all counted in 6N: no --vocab given)"))
        for name in ("layers", "dim", "heads", "kv_heads", "ffn_dim", "vocab"):
            if getattr(req, name) is not None:
                inputs.put(name, getattr(req, name), f"--{name.replace('_', '-')}")
        seq = _seq_len(req, measured, 8192, "default", inputs)
        if not shape.has_attention_shape:
            inputs.notes.append("no --layers/--dim/--heads: FLOPs are 6N without the "
                                "attention term, and activations are not estimated")
    return shape, seq


def resolve_work(req: Request, shape: Shape, fpt: float, inputs: Inputs) -> float:
    """Training tokens."""
    if req.flops is not None:
        inputs.put("flops", req.flops, "--flops")
        return inputs.put("tokens", req.flops / fpt, "derived: --flops / FLOPs per token")
    if req.chinchilla:
        return inputs.put("tokens", m.CHINCHILLA_TOKENS_PER_PARAM * shape.params,
                          f"--chinchilla: {m.CHINCHILLA_SOURCE}")
    if req.tokens is not None:
        return inputs.put("tokens", req.tokens, "--tokens")
    return inputs.put("tokens", m.CHINCHILLA_TOKENS_PER_PARAM * shape.params,
                      f"default: {m.CHINCHILLA_SOURCE}")


# --- hardware -----------------------------------------------------------------------------

def _gpu_models() -> dict[str, list[catalog.InstanceType]]:
    out: dict[str, list[catalog.InstanceType]] = {}
    for inst in catalog.all_instances():
        if inst.gpus:
            assert inst.accelerator is not None
            out.setdefault(inst.accelerator.model.lower(), []).append(inst)
    return out


def resolve_instance(req: Request, record_itype: str | None,
                     inputs: Inputs) -> catalog.InstanceType:
    if req.gpu is not None:
        models = _gpu_models()
        found = models.get(req.gpu.strip().lower())
        if not found:
            known = sorted({i.accelerator.model for group in models.values() for i in group
                            if i.accelerator is not None})
            raise PlanError(f"unknown GPU {req.gpu!r}", f"known GPUs: {', '.join(known)}")
        inst = max(found, key=lambda i: (i.gpus, i.price_usd_per_hour is not None, i.name))
        inputs.put("instance_type", inst.name,
                   f"--gpu {req.gpu}: the catalog's largest instance with that GPU")
        return inst
    name = req.instance_type or record_itype or DEFAULT_INSTANCE
    try:
        inst = catalog.get(name)
    except PctkError as exc:
        raise PlanError(exc.one_line()) from None
    if not inst.gpus:
        raise PlanError(f"{inst.name} has no NVIDIA GPU: pctk plan plans GPU training",
                        "pick a GPU instance type or --gpu")
    src = ("--instance-type" if req.instance_type else
           "the record's cluster" if record_itype else "default")
    inputs.put("instance_type", inst.name, f"{src} (toolkit/data/instances.yaml)")
    return inst


# --- measurements -------------------------------------------------------------------------

def _is_twin(rec: dict[str, Any]) -> bool:
    cluster = rec.get("cluster") or {}
    params = rec.get("params") or {}
    return bool(cluster.get("twin")) or params.get("device") == "cpu"


def _record_name(rec: dict[str, Any]) -> str:
    return f"record {str(rec.get('id', '?'))[:12]} ({rec.get('kind')}, {rec.get('created')})"


@dataclass
class Measured:
    mfu: float | None = None
    mfu_source: str = ""
    ckpt_gbps: float | None = None
    ckpt_source: str = ""
    instance_type: str | None = None
    mfu_model: str | None = None
    mfu_gpus: int | None = None
    mfu_record: str = ""
    seq_len: int | None = None  # the MFU's record's params.seq_len
    warnings: list[str] = field(default_factory=list)


def read_records(records: tuple[dict[str, Any], ...], gpu_model: str | None = None) -> Measured:
    """MFU and checkpoint throughput from FSDP and storage records; twin records are named
    and set aside: a CPU on the twin says nothing about a GPU or a file system."""
    out = Measured()
    for rec in records:
        kind = rec.get("kind")
        name = _record_name(rec)
        metrics = rec.get("metrics") or {}
        if kind not in ("fsdp", "storage"):
            raise PlanError(f"{name}: pctk plan reads fsdp and storage records, not {kind}")
        if _is_twin(rec):
            out.warnings.append(
                f"{name} was measured on the local twin (CPU processes, no GPU): twin figures "
                "are not GPU figures, so its MFU and checkpoint throughput are not used; the "
                "plan uses the stated defaults instead")
            continue
        itype = (rec.get("cluster") or {}).get("instance_type")
        if kind == "fsdp":
            mfu = metrics.get("mfu")
            if isinstance(mfu, (int, float)) and 0 < mfu <= 1:
                params = rec.get("params") or {}
                out.mfu = float(mfu)
                out.mfu_source = (f"{name}: measured on {params.get('world_size', '?')} GPUs "
                                  f"({params.get('device_name') or itype or 'GPU'}), model "
                                  f"{params.get('model', '?')}")
                out.mfu_model = params.get("model")
                out.mfu_gpus = params.get("world_size")
                out.mfu_record = name
                seq = params.get("seq_len")
                out.seq_len = seq if isinstance(seq, int) and not isinstance(seq, bool) \
                    and seq > 0 else None
                out.instance_type = out.instance_type or itype
            else:
                out.warnings.append(f"{name} has no MFU (no known GPU peak): not used")
            saves: list[float] = [
                float(s["gb_per_s"]) for s in metrics.get("checkpoint_saves") or []
                if isinstance(s, dict) and isinstance(s.get("gb_per_s"), (int, float))
                and s["gb_per_s"] > 0]
            if saves and out.ckpt_gbps is None:
                out.ckpt_gbps = statistics.median(saves)
                out.ckpt_source = f"{name}: median of {len(saves)} checkpoint save(s)"
        else:
            phase = metrics.get("ckpt_write") or {}
            rate = phase.get("mb_per_s") if isinstance(phase, dict) else None
            if isinstance(rate, (int, float)) and rate > 0:
                out.ckpt_gbps = rate / 1000
                out.ckpt_source = f"{name}: ckpt_write phase, all nodes together"
            else:
                out.warnings.append(f"{name} has no ckpt_write throughput: not used")
    return out


# --- the plan -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Sized:
    nodes: int
    gpus: int
    compute_h: float
    over: m.Overhead
    cost_on_demand: float | None


def _size(nodes: int, per_node: int, gpu_h: float, ckpt_h: float, mtbf_node_h: float,
          restart_h: float, price: float | None) -> Sized:
    gpus = nodes * per_node
    compute_h = gpu_h / gpus
    over = m.overhead(compute_h, ckpt_h, mtbf_node_h / nodes, restart_h)
    cost = nodes * price * over.wall_h if price is not None else None
    return Sized(nodes, gpus, compute_h, over, cost)


def _solve(req: Request, per_node: int, gpu_h: float, ckpt_h: float, mtbf_node_h: float,
           restart_h: float, price: float | None, min_nodes: int) -> int:
    """Nodes for a --days and/or --budget target."""
    def sized(n: int) -> Sized | None:
        try:
            return _size(n, per_node, gpu_h, ckpt_h, mtbf_node_h, restart_h, price)
        except PlanError:
            return None

    if req.budget is not None and price is None:
        raise PlanError("--budget needs an on-demand price, and the catalog has none for "
                        "this instance type", "pick another --instance-type")
    candidates = []
    for n in range(min_nodes, MAX_NODES + 1):
        s = sized(n)
        if s is None:
            break  # more nodes only fail more often
        if req.budget is not None and s.cost_on_demand is not None \
                and s.cost_on_demand > req.budget:
            break  # cost only grows with nodes (more failures)
        candidates.append(s)
        if req.days is not None and s.over.wall_h <= req.days * 24:
            return n
    if not candidates:
        cheapest = sized(min_nodes)
        what = (f"${cheapest.cost_on_demand:,.0f} on {min_nodes} node(s)"
                if cheapest and cheapest.cost_on_demand is not None else "any plan")
        raise PlanError(f"--budget ${req.budget:,.0f} is below the cheapest plan ({what})")
    if req.days is not None:
        best = min(candidates, key=lambda s: s.over.wall_h)
        why = "within --budget" if req.budget is not None else f"up to {MAX_NODES} nodes"
        raise PlanError(f"no size finishes in {req.days:g} days: the fastest {why} takes "
                        f"{best.over.wall_h / 24:,.1f} days on {best.nodes} node(s)")
    return min(candidates, key=lambda s: s.over.wall_h).nodes


def make_plan(req: Request) -> dict[str, Any]:
    validate(req)
    inputs = Inputs()
    measured = read_records(req.records)
    inputs.notes.extend(measured.warnings)
    shape, seq = resolve_shape(req, inputs, measured)
    fpt = m.flops_per_token(shape, seq)
    tokens = resolve_work(req, shape, fpt, inputs)
    flops = fpt * tokens
    inst = resolve_instance(req, measured.instance_type, inputs)
    assert inst.accelerator is not None
    acc = inst.accelerator
    per_node = inst.gpus
    peak = inputs.put("peak_tflops_per_gpu", acc.peak_bf16_tflops,
                      f"catalog: {acc.model} dense bf16")
    if req.mfu is not None:
        mfu = inputs.put("mfu", req.mfu, "--mfu")
    elif measured.mfu is not None:
        mfu = inputs.put("mfu", measured.mfu, measured.mfu_source)
        if measured.instance_type and measured.instance_type != inst.name:
            inputs.notes.append(f"the MFU was measured on {measured.instance_type}, the plan "
                                f"is for {inst.name}: the same MFU is assumed")
        if measured.mfu_model and req.model and measured.mfu_model.lower() != req.model.lower():
            inputs.notes.append(f"the MFU was measured with model {measured.mfu_model}, the "
                                f"plan is for {req.model}: the same MFU is assumed")
    else:
        mfu = inputs.put("mfu", DEFAULT_MFU, DEFAULT_MFU_SOURCE)
    total_gpu_h = m.gpu_hours(flops, peak, mfu)

    # reliability inputs
    mtbf_node = inputs.put("node_mtbf_hours", req.node_mtbf_hours or DEFAULT_NODE_MTBF_H,
                           "--node-mtbf-hours" if req.node_mtbf_hours
                           else DEFAULT_NODE_MTBF_SOURCE)
    restart_min = inputs.put(
        "restart_minutes", DEFAULT_RESTART_MIN if req.restart_minutes is None
        else req.restart_minutes, "--restart-minutes" if req.restart_minutes is not None else
        "assumption: requeue, start-up and checkpoint load after a failure")
    ckpt_bytes = m.checkpoint_bytes(shape)
    fsx_gib = req.fsx_capacity_gib or max(DEFAULT_FSX_GIB, fsx_size_for(2 * ckpt_bytes))
    fsx_src = ("--fsx-capacity-gib" if req.fsx_capacity_gib else
               f"default: {DEFAULT_FSX_GIB} GiB, or room for two checkpoints")
    inputs.put("fsx_capacity_gib", fsx_gib, fsx_src)
    fsx = cl.default_fsx(fsx_gib)
    if req.ckpt_gbps is not None:
        ckpt_gbps = inputs.put("checkpoint_write_gb_per_s", req.ckpt_gbps, "--ckpt-gbps")
    elif measured.ckpt_gbps is not None:
        ckpt_gbps = inputs.put("checkpoint_write_gb_per_s", measured.ckpt_gbps,
                               measured.ckpt_source)
    else:
        ckpt_gbps = inputs.put(
            "checkpoint_write_gb_per_s", fsx.mb_per_s / 1000,
            f"default: FSx for Lustre as `pctk config new` writes it, provisioned: "
            f"{fsx.formula} (measure yours with `pctk bench storage` and pass --from-record)")
    ckpt_h = ckpt_bytes / (ckpt_gbps * 1e9) / 3600
    restart_h = restart_min / 60
    price = inst.price_usd_per_hour

    # memory: the smallest node count at which the chosen strategy can fit
    usable = acc.memory_mib * 2**20 * (1 - req.headroom)
    inputs.put("gpu_memory_gib", round(acc.memory_mib / 1024, 2),
               f"catalog: {acc.model}, as AWS publishes it per instance")
    inputs.put("memory_headroom", req.headroom,
               "CUDA context, NCCL buffers and allocator slack kept free")
    inputs.put("micro_batch", req.micro_batch, "sequences per GPU per step")
    states = (m.PARAM_BYTES + m.GRAD_BYTES + m.OPTIM_BYTES) * shape.params

    if req.days is not None or req.budget is not None:
        if req.days is not None:
            inputs.put("days_target", req.days, "--days")
        if req.budget is not None:
            inputs.put("budget_usd", req.budget, "--budget (on-demand)")
        min_nodes = max(1, math.ceil(states / (usable * per_node)))
        nodes = _solve(req, per_node, total_gpu_h, ckpt_h, mtbf_node, restart_h, price,
                       min_nodes)
        size_src = ("solved: the fewest nodes that meet --days" if req.days is not None
                    else "solved: the fastest plan within --budget")
    elif req.gpus is not None:
        nodes = math.ceil(req.gpus / per_node)
        size_src = "--gpus"
        if nodes * per_node != req.gpus:
            inputs.notes.append(f"--gpus {req.gpus} rounded up to {nodes} whole node(s) "
                                f"of {per_node}")
    else:
        nodes = req.nodes or DEFAULT_NODES
        size_src = "--nodes" if req.nodes else "default"
    inputs.put("nodes", nodes, size_src)
    gpus = nodes * per_node
    if req.mfu is None and measured.mfu is not None and isinstance(measured.mfu_gpus, int) \
            and gpus > measured.mfu_gpus:
        inputs.notes.append(f"the MFU was measured on {measured.mfu_gpus} GPUs and is assumed "
                            f"to hold on {gpus}: scaling losses beyond the measured size are "
                            "not modelled (measure at a larger size to see them)")
    if states > usable * gpus:
        raise PlanError(
            f"the model does not fit the cluster: {billions(shape.params)} parameters need "
            f"{states / GIB:,.0f} GiB of parameters, gradients and optimizer state, and "
            f"{nodes} x {inst.name} have {usable * gpus / GIB:,.0f} GiB of usable GPU memory",
            f"at least {math.ceil(states / (usable * per_node))} nodes")
    sized = _size(nodes, per_node, total_gpu_h, ckpt_h, mtbf_node, restart_h, price)

    mem = _memory_section(req, shape, seq, gpus, per_node, usable, inputs)
    out: dict[str, Any] = {
        "inputs": inputs.rows,
        "notes": inputs.notes,
        "flops_per_token": fpt,
        "flops_per_token_6n": 6.0 * shape.params_non_embedding,
        "params": shape.params,
        "params_non_embedding": shape.params_non_embedding,
        "tokens": tokens,
        "flops": flops,
        "gpu_hours": total_gpu_h,
        "gpu_hours_with_overhead": sized.over.wall_h * gpus,
        "compute_days": sized.compute_h / 24,
        "days": sized.over.wall_h / 24,
        "gpus": gpus,
        "nodes": nodes,
        "instance_type": inst.name,
        "gpu_model": acc.model,
        "cost_usd": _cost(inst, nodes, sized.over.wall_h),
        "memory": mem,
        "checkpoint": {
            "bytes": ckpt_bytes,
            "gb": ckpt_bytes / 1e9,
            "what": "fp32 parameters and both AdamW moments (12 bytes per parameter)",
            "write_gb_per_s": ckpt_gbps,
            "write_seconds": ckpt_h * 3600,
            "interval_hours": sized.over.interval_h,
            "interval_rule": "Young/Daly: sqrt(2 x checkpoint write time x job MTBF)",
            "time_fraction": sized.over.checkpoint_fraction,
            "total_hours": sized.over.checkpoint_h_total,
        },
        "failures": {
            "node_mtbf_hours": mtbf_node,
            "job_mtbf_hours": mtbf_node / nodes,
            "expected_failures": sized.over.failures,
            "restart_minutes": restart_min,
            "lost_hours": sized.over.lost_to_failures_h,
            "time_fraction": sized.over.failure_fraction,
            "rule": "each failure costs the restart plus half a checkpoint interval of work",
        },
    }
    out["fits"] = mem["chosen"]["fits"]
    return out


def fsx_size_for(nbytes: float) -> int:
    """FSx for Lustre PERSISTENT_2 capacity (1,200 GiB, then multiples of 2,400) >= nbytes."""
    gib = nbytes / GIB
    if gib <= 1200:
        return 1200
    return int(math.ceil(gib / 2400) * 2400)


def _cost(inst: catalog.InstanceType, nodes: int, wall_h: float) -> dict[str, Any]:
    node_hours = nodes * wall_h
    out: dict[str, Any] = {"node_hours": node_hours}
    if inst.price_usd_per_hour is not None:
        srcs = inst.sources.get("price_usd_per_hour", [])
        cites = "; ".join(catalog.sources().get(s, s) for s in srcs)
        out["on_demand"] = {"usd": node_hours * inst.price_usd_per_hour,
                            "usd_per_node_hour": inst.price_usd_per_hour,
                            "region": inst.price_region, "date": inst.price_date,
                            "source": cites or "toolkit/data/instances.yaml"}
    else:
        out["on_demand"] = None
        out["on_demand_missing"] = f"the catalog has no on-demand price for {inst.name}"
    cb = CAPACITY_BLOCK_USD_PER_HOUR.get(inst.name)
    if cb is not None:
        rate, region = cb
        out["capacity_block"] = {"usd": node_hours * rate, "usd_per_node_hour": rate,
                                 "region": region, "date": "valid until 2025-01-01",
                                 "source": CAPACITY_BLOCK_SOURCE}
    else:
        out["capacity_block"] = None
    return out


def _memory_section(req: Request, shape: Shape, seq: int, gpus: int, per_node: int,
                    usable: float, inputs: Inputs) -> dict[str, Any]:
    mb = req.micro_batch
    fsdp = m.memory(shape, gpus, seq, mb)
    hsdp_shard = req.shard_size or per_node
    if gpus % hsdp_shard:
        raise PlanError(f"--shard-size {hsdp_shard} does not divide the {gpus} GPUs")
    inputs.put("hsdp_shard_size", hsdp_shard, "--shard-size" if req.shard_size else
               "default: the GPUs of one node")
    hsdp = m.memory(shape, hsdp_shard, seq, mb)
    chosen_mem = fsdp if req.strategy == "fsdp" else hsdp
    if req.ac is None:
        ac = chosen_mem.total(False) > usable
        ac_src = ("auto: on, since the plan does not fit without it" if ac
                  else "auto: off, since the plan fits without it")
    else:
        ac, ac_src = req.ac, "--ac" if req.ac else "--no-ac"
    inputs.put("strategy", req.strategy, "--strategy" if req.strategy != "fsdp" else "default")
    inputs.put("activation_checkpointing", ac, ac_src)
    if not shape.layers or not shape.ffn_dim:
        inputs.notes.append("activations not estimated (no --layers/--ffn-dim): memory covers "
                            "the training state only")
    fits = chosen_mem.total(ac) <= usable
    return {
        "usable_gib_per_gpu": round(usable / GIB, 2),
        "fsdp": fsdp.to_dict(usable),
        "hsdp": hsdp.to_dict(usable),
        "smallest_shard": {
            "no_ac": m.smallest_shard(shape, gpus, seq, mb, usable, False),
            "ac": m.smallest_shard(shape, gpus, seq, mb, usable, True),
        },
        "chosen": {"strategy": req.strategy, "shard_size": chosen_mem.shard,
                   "activation_checkpointing": ac,
                   "total_gib": round(chosen_mem.total(ac) / GIB, 2), "fits": fits},
    }


def with_records(req: Request, records: list[dict[str, Any]]) -> Request:
    return replace(req, records=tuple(records))


PRESET_NAMES = tuple(PRESETS)
