"""A training plan from a model, a token budget, hardware and measurements.

:func:`make_plan` turns :class:`Request` (what the user asked, None for "use the default")
into one dict: every input with its value and where it came from, then the figures
(``flops``, ``gpu_hours``, ``days``, ``gpus``, ``nodes``, ``cost_usd``, ``memory``,
``checkpoint``, ``failures``). The arithmetic lives in :mod:`toolkit.plan.model` and, for
what the node shares (parameters, FLOPs, memory per GPU), :mod:`benchmarks.modelmath`.
"""

from __future__ import annotations

import datetime
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from benchmarks import modelmath as mm
from benchmarks.fsdp.config import PRESETS, preset
from benchmarks.modelmath import GIB, Shape
from toolkit import catalog
from toolkit.config.model import ClusterTopology
from toolkit.errors import PctkError
from toolkit.plan import cluster as cl
from toolkit.plan import limits
from toolkit.plan import model as m
from toolkit.plan.model import PlanError

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
MAX_NODES = 20_000  # how far the --days and --budget solvers search

# Capacity Block "effective instance hourly rate" (USD): the AWS Capacity Blocks pricing page
# (source S6c of toolkit/data/instances.yaml), rates it gave as valid until 2025-01-01.
# Capacity Block prices are dynamic: after that date a plan names the old rate as expired and
# totals nothing with it.
CAPACITY_BLOCK_VALID_UNTIL = datetime.date(2025, 1, 1)
CAPACITY_BLOCK_SOURCE = ("AWS Capacity Blocks pricing page, rates valid until 2025-01-01: "
                         "https://aws.amazon.com/ec2/capacityblocks/pricing/ "
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
    max_batch_tokens: float | None = None
    cluster: ClusterTopology | None = None  # --config
    queue: str | None = None


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
                 "ckpt_gbps", "micro_batch", "shard_size", "fsx_capacity_gib",
                 "max_batch_tokens"):
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
    if req.queue is not None and req.cluster is None:
        raise PlanError("--queue names a queue of --config: give --config too")
    if req.cluster is not None:
        for flag, value in (("--instance-type", req.instance_type), ("--gpu", req.gpu),
                            ("--fsx-capacity-gib", req.fsx_capacity_gib)):
            if value is not None:
                raise PlanError(f"--config gives the cluster: leave out {flag}",
                                "edit the config, or plan without --config")
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
        shape = mm.shape_of(args)
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


def resolve_instance(req: Request, record_itype: str | None, inputs: Inputs,
                     facts: cl.ClusterFacts | None = None) -> catalog.InstanceType:
    if facts is not None:
        inst = catalog.get(facts.instance_type)
        inputs.put("instance_type", inst.name,
                   f"--config: queue {facts.queue}, compute resource {facts.compute_resource}")
        return inst
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


STORAGE_RATE = "ckpt_write phase, all nodes together"


def read_records(records: tuple[dict[str, Any], ...], gpu_model: str | None = None) -> Measured:
    """MFU and checkpoint throughput from FSDP and storage records; twin records are named
    and set aside: a CPU on the twin says nothing about a GPU or a file system. One record
    gives each figure: two FSDP records with an MFU, or two storage records, are refused (the
    MFU of one would be planned on the instance type of the other). A storage record's rate
    wins over an FSDP record's checkpoint saves."""
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
                if out.mfu_record:
                    raise PlanError(
                        f"{out.mfu_record} and {name} both give an MFU: pass one FSDP record "
                        "(with a storage record for the checkpoint rate, if you like)")
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
                out.instance_type = itype
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
                if out.ckpt_source.endswith(STORAGE_RATE):
                    raise PlanError(f"{out.ckpt_source.split(':')[0]} and {name} both give a "
                                    "checkpoint rate: pass one storage record")
                out.ckpt_gbps = rate / 1000
                out.ckpt_source = f"{name}: {STORAGE_RATE}"
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


@dataclass(frozen=True)
class Limit:
    """The most nodes a plan may use: the global batch bound, the queue, the search."""

    bound: float  # tokens per step
    batch_nodes: int  # the most nodes within the bound (0: not even one)
    queue: cl.ClusterFacts | None

    @property
    def queue_nodes(self) -> int:
        return self.queue.max_nodes if self.queue is not None else MAX_NODES

    @property
    def nodes(self) -> int:
        return min(self.batch_nodes, self.queue_nodes, MAX_NODES)

    def _batch(self) -> str:
        return f"global batch stays <= {limits.tokens_text(self.bound)} tokens/step"

    def binding(self) -> str:
        """What holds the node count at :attr:`nodes`."""
        if self.batch_nodes <= min(self.queue_nodes, MAX_NODES):
            return f"the {limits.tokens_text(self.bound)} tokens/step bound on the global batch"
        if self.queue is not None and self.queue_nodes <= MAX_NODES:
            return f"queue {self.queue.queue} ({self.queue.max_nodes_how})"
        return f"the planner's search limit of {MAX_NODES:,} nodes"

    def largest(self) -> str:
        """Why :attr:`nodes` is the most, as the recommendation says it."""
        if self.batch_nodes <= min(self.queue_nodes, MAX_NODES):
            fits = (f" and that fits queue {self.queue.queue} ({self.queue.max_nodes_how})"
                    if self.queue is not None else "")
            return f"the largest count whose {self._batch()}{fits}"
        if self.queue is not None and self.queue_nodes <= MAX_NODES:
            return (f"all of queue {self.queue.queue} ({self.queue.max_nodes_how}); its "
                    f"{self._batch()}")
        return f"the planner's search limit of {MAX_NODES:,} nodes; its {self._batch()}"


def _solve(req: Request, sized: Callable[[int], Sized | None], min_nodes: int,
           lim: Limit) -> tuple[int, str]:
    """Nodes for a --days and/or --budget target within ``lim``, and why."""
    if min_nodes > lim.nodes:
        raise PlanError(f"the model's training state needs at least {min_nodes:,} nodes, and "
                        f"{lim.binding()} allows at most {lim.nodes:,}",
                        "a larger queue, more GPU memory per node, or tensor/pipeline "
                        "parallelism (not modelled)")
    candidates = []
    for n in range(min_nodes, lim.nodes + 1):
        s = sized(n)
        if s is None:
            break  # more nodes only fail more often
        if req.budget is not None and s.cost_on_demand is not None \
                and s.cost_on_demand > req.budget:
            break  # cost only grows with nodes (more failures)
        candidates.append(s)
        if req.days is not None and s.over.wall_h <= req.days * 24:
            return n, f"the fewest nodes that finish within --days {req.days:g}"
    if not candidates:
        cheapest = sized(min_nodes)
        what = (f"${cheapest.cost_on_demand:,.0f} on {min_nodes} node(s)"
                if cheapest and cheapest.cost_on_demand is not None else "any plan")
        raise PlanError(f"--budget ${req.budget:,.0f} is below the cheapest plan ({what})")
    if req.days is not None:
        best = min(candidates, key=lambda s: s.over.wall_h)
        why = lim.binding() + (" and --budget" if req.budget is not None else "")
        raise PlanError(f"no size finishes in {req.days:g} days: the fastest within {why} takes "
                        f"{best.over.wall_h / 24:,.1f} days on {best.nodes:,} node(s)")
    assert req.budget is not None
    best = min(candidates, key=lambda s: s.over.wall_h)
    within = f"--budget ${req.budget:,.0f}"
    if best.nodes < lim.nodes:
        return best.nodes, f"the fastest plan within {within}"
    more = sized(lim.nodes + 1)
    if more is not None and more.cost_on_demand is not None \
            and more.cost_on_demand <= req.budget:
        return best.nodes, f"{lim.largest()}; {within} would pay for more"
    return best.nodes, f"the fastest plan within {within}, and {lim.largest()}"


def make_plan(req: Request) -> dict[str, Any]:
    validate(req)
    inputs = Inputs()
    measured = read_records(req.records)
    inputs.notes.extend(measured.warnings)
    facts = cl.facts(req.cluster, req.queue) if req.cluster is not None else None
    if facts is not None:
        inputs.put("cluster_config", facts.source, "--config")
        inputs.put("queue", facts.queue, "--queue" if req.queue else
                   "the first GPU queue of --config")
        inputs.put("queue_max_nodes", facts.max_nodes, f"--config: {facts.max_nodes_how}")
        inputs.notes.extend(facts.notes)
    shape, seq = resolve_shape(req, inputs, measured)
    fpt = float(mm.training_flops_per_token(shape, seq))
    tokens = resolve_work(req, shape, fpt, inputs)
    flops = fpt * tokens
    inst = resolve_instance(req, measured.instance_type, inputs, facts)
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
    if facts is not None and facts.fsx is not None:
        assert facts.fsx_capacity_gib is not None
        fsx_gib = inputs.put("fsx_capacity_gib", facts.fsx_capacity_gib,
                             f"--config: SharedStorage {facts.fsx.mount_dir}")
        fsx, fsx_src = facts.fsx, f"--config: FSx for Lustre at {facts.fsx.mount_dir}"
    else:
        fsx_gib = req.fsx_capacity_gib or max(DEFAULT_FSX_GIB, fsx_size_for(2 * ckpt_bytes))
        inputs.put("fsx_capacity_gib", fsx_gib, "--fsx-capacity-gib" if req.fsx_capacity_gib
                   else f"default: {DEFAULT_FSX_GIB} GiB, or room for two checkpoints")
        fsx, fsx_src = cl.default_fsx(fsx_gib), "default: FSx for Lustre as `pctk config new` " \
            "writes it"
    if req.ckpt_gbps is not None:
        ckpt_gbps = inputs.put("checkpoint_write_gb_per_s", req.ckpt_gbps, "--ckpt-gbps")
    elif measured.ckpt_gbps is not None:
        ckpt_gbps = inputs.put("checkpoint_write_gb_per_s", measured.ckpt_gbps,
                               measured.ckpt_source)
    else:
        ckpt_gbps = inputs.put(
            "checkpoint_write_gb_per_s", fsx.mb_per_s / 1000,
            f"{fsx_src}, provisioned: {fsx.formula} (measure yours with `pctk bench "
            "storage` and pass --from-record)")
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
    states = (mm.PARAM_BYTES + mm.GRAD_BYTES + mm.OPTIM_BYTES) * shape.params

    min_nodes = max(1, math.ceil(states / (usable * per_node)))

    def sized(n: int) -> Sized | None:
        try:
            return _size(n, per_node, total_gpu_h, ckpt_h, mtbf_node, restart_h, price)
        except PlanError:
            return None

    # the most nodes: the global batch bound, the queue
    bound = inputs.put("max_tokens_per_step", req.max_batch_tokens or
                       limits.MAX_TOKENS_PER_STEP, "--max-batch-tokens" if req.max_batch_tokens
                       else limits.BATCH_SOURCE)
    lim = Limit(bound, limits.max_nodes_for_batch(bound, per_node, req.micro_batch, seq), facts)
    warnings: list[dict[str, str]] = []
    given = req.gpus is not None or req.nodes is not None
    if not given and lim.nodes < 1:
        one = limits.tokens_per_step(per_node, req.micro_batch, seq)
        raise PlanError(
            f"one node's global batch, {per_node} GPUs x {req.micro_batch} x {seq:,} = "
            f"{one:,} tokens/step, is above the {limits.tokens_text(bound)} tokens/step bound",
            "a smaller --micro-batch or --seq-len, or --max-batch-tokens")
    if req.days is not None or req.budget is not None:
        if req.days is not None:
            inputs.put("days_target", req.days, "--days")
        if req.budget is not None:
            inputs.put("budget_usd", req.budget, "--budget (on-demand)")
            if price is None:
                raise PlanError("--budget needs an on-demand price, and the catalog has none "
                                "for this instance type", "pick another --instance-type")
        nodes, why = _solve(req, sized, min_nodes, lim)
        size_src = ("solved: the fewest nodes that meet --days" if req.days is not None
                    else "solved: the fastest plan within --budget")
    elif given:
        flag = "--gpus" if req.gpus is not None else "--nodes"
        if req.gpus is not None:
            nodes = math.ceil(req.gpus / per_node)
            if nodes * per_node != req.gpus:
                inputs.notes.append(f"--gpus {req.gpus} rounded up to {nodes} whole node(s) "
                                    f"of {per_node}")
        else:
            nodes = req.nodes or DEFAULT_NODES
        size_src = flag
        if facts is not None and nodes > facts.max_nodes:
            asked = f"--nodes {nodes}" if req.gpus is None else \
                f"--gpus {req.gpus} ({nodes:,} nodes)"
            raise PlanError(f"{asked} is more than queue {facts.queue} of {facts.source} holds "
                            f"({facts.max_nodes_how})",
                            f"at most {facts.max_nodes} nodes, or another --queue")
        why = f"as given by {flag}"
        if nodes <= lim.nodes:
            why += f"; the limits allow up to {lim.nodes:,} ({lim.largest()})"
        else:
            tps = limits.tokens_per_step(nodes * per_node, req.micro_batch, seq)
            warnings.append({"code": "batch-above-bound", "message": (
                f"{nodes:,} nodes make a global batch of at least {tps:,} tokens/step "
                f"({nodes * per_node:,} GPUs x {req.micro_batch} x {seq:,}), above the "
                f"{limits.tokens_text(bound)} tokens/step that comparable runs used: with "
                "FSDP or HSDP alone every GPU takes a sequence per step, so this size needs "
                "tensor or pipeline parallelism, which the plan does not model; at most "
                f"{lim.nodes:,} nodes stay within the bound")})
    elif facts is not None:
        nodes, size_src, why = lim.nodes, "--config: as many as the limits allow", lim.largest()
    else:
        nodes = min(DEFAULT_NODES, lim.nodes)
        size_src = "default"
        why = f"the default, {DEFAULT_NODES} nodes" if nodes == DEFAULT_NODES else \
            f"{lim.largest()} (the default is {DEFAULT_NODES})"
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
    plan_size = _size(nodes, per_node, total_gpu_h, ckpt_h, mtbf_node, restart_h, price)
    days = plan_size.over.wall_h / 24
    if days > limits.LONG_PLAN_DAYS:
        msg = (f"the plan takes {days:,.0f} days ({days / 365:.1f} years) on {nodes:,} nodes: "
               "longer than a year")
        at_most = sized(lim.nodes) if nodes < lim.nodes else None
        if at_most is not None:
            msg += (f"; {lim.nodes:,} nodes ({lim.largest()}) would take "
                    f"{at_most.over.wall_h / 24:,.0f} days")
        elif nodes < lim.nodes:
            msg += f"; up to {lim.nodes:,} nodes stay within {lim.binding()}"
        else:
            msg += f"; more nodes would go past {lim.binding()}"
        if at_most is None or at_most.over.wall_h / 24 > limits.LONG_PLAN_DAYS:
            msg += "; fewer tokens, a smaller model or faster GPUs shorten it"
        warnings.append({"code": "longer-than-a-year", "message": msg})

    mem = _memory_section(req, shape, seq, gpus, per_node, usable, inputs)
    if facts is not None and facts.region and inst.price_region \
            and facts.region not in inst.price_region:
        inputs.notes.append(f"the on-demand price is the catalog's for {inst.price_region}; "
                            f"--config runs in {facts.region}, where it may differ")
    out: dict[str, Any] = {
        "inputs": inputs.rows,
        "notes": inputs.notes,
        "flops_per_token": fpt,
        "flops_per_token_6n": float(mm.training_flops_per_token(shape, seq, attention=False)),
        "params": shape.params,
        "params_non_embedding": shape.params_non_embedding,
        "tokens": tokens,
        "flops": flops,
        "gpu_hours": total_gpu_h,
        "gpu_hours_with_overhead": plan_size.over.wall_h * gpus,
        "compute_days": plan_size.compute_h / 24,
        "days": plan_size.over.wall_h / 24,
        "gpus": gpus,
        "nodes": nodes,
        "recommendation": {"nodes": nodes, "why": why},
        "global_batch": {
            "tokens_per_step": limits.tokens_per_step(gpus, req.micro_batch, seq),
            "sequences_per_step": gpus * req.micro_batch,
            "what": "one micro-batch on every GPU (FSDP/HSDP, no gradient accumulation)",
            "max_tokens_per_step": bound,
            "max_nodes": lim.batch_nodes,
        },
        "cluster": None if facts is None else {
            "config": facts.source, "queue": facts.queue, "instance_type": facts.instance_type,
            "max_nodes": facts.max_nodes, "max_nodes_how": facts.max_nodes_how,
            "fsx_mb_per_s": facts.fsx.mb_per_s if facts.fsx else None},
        "max_nodes": lim.nodes,
        "max_nodes_why": lim.binding(),
        "warnings": warnings,
        "instance_type": inst.name,
        "gpu_model": acc.model,
        "cost_usd": _cost(inst, nodes, plan_size.over.wall_h),
        "memory": mem,
        "checkpoint": {
            "bytes": ckpt_bytes,
            "gb": ckpt_bytes / 1e9,
            "what": "fp32 parameters and both AdamW moments (12 bytes per parameter)",
            "write_gb_per_s": ckpt_gbps,
            "write_seconds": ckpt_h * 3600,
            "interval_hours": plan_size.over.interval_h,
            "interval_rule": "Young/Daly: sqrt(2 x checkpoint write time x job MTBF)",
            "time_fraction": plan_size.over.checkpoint_fraction,
            "total_hours": plan_size.over.checkpoint_h_total,
        },
        "failures": {
            "node_mtbf_hours": mtbf_node,
            "job_mtbf_hours": mtbf_node / nodes,
            "expected_failures": plan_size.over.failures,
            "restart_minutes": restart_min,
            "lost_hours": plan_size.over.lost_to_failures_h,
            "time_fraction": plan_size.over.failure_fraction,
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
        expired = datetime.date.today() >= CAPACITY_BLOCK_VALID_UNTIL
        out["capacity_block"] = {
            "usd": None if expired else node_hours * rate, "usd_per_node_hour": rate,
            "region": region, "valid_until": CAPACITY_BLOCK_VALID_UNTIL.isoformat(),
            "expired": expired, "source": CAPACITY_BLOCK_SOURCE}
    else:
        out["capacity_block"] = None
    return out


def _memory_section(req: Request, shape: Shape, seq: int, gpus: int, per_node: int,
                    usable: float, inputs: Inputs) -> dict[str, Any]:
    mb = req.micro_batch
    fsdp = mm.memory(shape, gpus, seq, mb)
    hsdp_shard = req.shard_size or per_node
    if gpus % hsdp_shard:
        raise PlanError(f"--shard-size {hsdp_shard} does not divide the {gpus} GPUs")
    if not m.node_aligned(hsdp_shard, per_node):
        raise PlanError(f"--shard-size {hsdp_shard} splits a node of {per_node} GPUs between "
                        f"shard groups: give a divisor of {per_node} or a multiple of it")
    inputs.put("hsdp_shard_size", hsdp_shard, "--shard-size" if req.shard_size else
               "default: the GPUs of one node")
    hsdp = mm.memory(shape, hsdp_shard, seq, mb)
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
            "no_ac": m.smallest_shard(shape, gpus, seq, mb, usable, False, per_node),
            "ac": m.smallest_shard(shape, gpus, seq, mb, usable, True, per_node),
        },
        "chosen": {"strategy": req.strategy, "shard_size": chosen_mem.shard,
                   "activation_checkpointing": ac,
                   "total_gib": round(chosen_mem.total(ac) / GIB, 2), "fits": fits},
    }


def with_records(req: Request, records: list[dict[str, Any]]) -> Request:
    return replace(req, records=tuple(records))


PRESET_NAMES = tuple(PRESETS)
