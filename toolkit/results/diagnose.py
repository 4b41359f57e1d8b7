"""Which layer bounds an FSDP run: the reasoning ``pctk diagnose`` and ``pctk bench scaling``
share, on any stored FSDP record.

Input: the record's step-time breakdown (``metrics.breakdown``, see
:mod:`benchmarks.fsdp.breakdown`), its straggler judgement (``metrics.stragglers``), its
per-rank link probe, MFU and checkpoint figures. Output: one ``bottleneck`` from
:data:`BOTTLENECKS`, the node when one is to blame, the evidence (figures with what they are
compared to) and what to try. The rules, first match wins:

1. ``straggler``: the record's straggler verdict is WARN or FAIL (one rank's local update
   is slow *and* the others lose time waiting for it): that rank's node.
2. ``interconnect`` with a node: one node's incoming link (link probe) is below
   :data:`LINK_OUTLIER` x the median of the other nodes' (:data:`LINK_OUTLIER_TWIN` on the
   twin) and the exposed communication is at least :data:`LINK_MIN_COMM_SHARE` of the step.
   A slow link delays every rank's collectives alike, so only the probe names the node.
3. ``storage`` or ``straggler``, whichever costs each step more, when both are seen:
   - ``storage``: checkpoint saves plus data loading take at least :data:`STORAGE_SHARE` of
     the step; it costs their seconds per step.
   - ``straggler``: one node's compute stands out and the others waited for it
     (:func:`benchmarks.fsdp.stragglers.compute_straggler`; each rank's compute is measured
     in the same phase, so the twin's shared CPUs slow all alike and a throttled node still
     stands out): that node. It costs the others' wait, its compute's gap to the median.
   A disk slow enough to stall the node's page faults stretches its measured compute too, and
   a slow node saves slowly; comparing the costs names the one that holds the step back
   most, and the evidence names the other as well. After the link rule, as a slow link
   stretches a rank's measured compute as well.
4. ``twin-shared-cpu``: a record from pctk's twin with more than one node. Its nodes share
   this machine's CPUs, so compute per rank grows with the node count; that is not a
   performance result, and neither the network nor a node is to blame.
5. ``interconnect``: exposed communication at least :data:`COMM_SHARE` of the step (with
   more than one rank: a single rank moves no data).
6. ``overhead``: the loss/grad-norm synchronisation plus what no part accounts for (plus, for
   a single rank, its "exposed communication": FSDP's own copies and hooks) at least
   :data:`OVERHEAD_SHARE` of the step (launch latency, jitter, logging).
7. ``compute``: otherwise; the MFU says whether that compute runs well.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from typing import Any

from benchmarks.fsdp.config import ModelArgs
from benchmarks.fsdp.stragglers import compute_straggler
from benchmarks.modelmath import INTRA_NODE, Transfer, fsdp_step, shape_of, step_seconds

BOTTLENECKS = ("compute", "interconnect", "straggler", "storage", "overhead",
               "twin-shared-cpu")
LINK_OUTLIER = 0.2
# The twin's links are loopback copies by CPUs the nodes share: a busy host alone made one
# node's probe 0.18 x the other's (best of three tries, 2 nodes); a shaped link (`pctk local
# fault slow-net`, 50 Mbit/s) is below 0.01 x. So on the twin only a 20 x gap names a node.
LINK_OUTLIER_TWIN = 0.05
LINK_MIN_COMM_SHARE = 0.15
STORAGE_SHARE = 0.25
COMM_SHARE = 0.40
OVERHEAD_SHARE = 0.30
MFU_LOW = 0.25  # below this a compute-bound run still has compute to gain


class NotDiagnosable(ValueError):
    """A record this reasoning cannot use (another kind, no breakdown)."""


@dataclass(frozen=True)
class Busbw:
    """The bus bandwidth to predict communication time with, and where it came from:
    ``gb_per_s`` for every transfer, unless ``per_collective`` has the transfer's collective
    (each collective at its own busbw), or the transfer stays in a node and ``intra_node``
    has its collective (one node's figures, NVLink: HSDP's shard groups)."""

    gb_per_s: float
    source: str
    per_collective: dict[str, float] = field(default_factory=dict, hash=False, compare=False)
    intra_node: dict[str, float] = field(default_factory=dict, hash=False, compare=False)

    def of(self, t: Transfer) -> float:
        if t.link == INTRA_NODE and self.intra_node.get(t.collective):
            return self.intra_node[t.collective]
        return self.per_collective.get(t.collective) or self.gb_per_s


def breakdown_of(rec: dict[str, Any]) -> dict[str, Any]:
    if rec.get("kind") != "fsdp":
        raise NotDiagnosable(f"a {rec.get('kind')!r} record: only FSDP records are diagnosed")
    b = (rec.get("metrics") or {}).get("breakdown")
    if not isinstance(b, dict) or not b.get("mean_over_ranks") or not b.get("timed_steps"):
        raise NotDiagnosable("the record has no step-time breakdown (made before pctk measured "
                             "one, or no step ran after the timing warm-up)")
    return b


def shares(rec: dict[str, Any]) -> dict[str, float]:
    """Each part's share of the step (mean over ranks), plus ``unaccounted``."""
    b = breakdown_of(rec)
    mean = b["mean_over_ranks"]
    step = mean.get("step") or 0.0
    if step <= 0:
        return {}
    out = {part: mean.get(part, 0.0) / step for part in b["parts"]}
    out["unaccounted"] = max(0.0, 1.0 - sum(out.values()))
    return out


def link_outlier(rec: dict[str, Any]) -> tuple[str, float, float] | None:
    """(node, its incoming GB/s, median of the other nodes') when one node's link is an
    outlier (below :func:`link_threshold` x the others'); each node's figure is its slowest
    rank's."""
    per_node: dict[str, float] = {}
    for r in breakdown_of(rec).get("per_rank") or []:
        gbps = r.get("link_recv_gb_per_s")
        if isinstance(gbps, int | float):
            per_node[r["node"]] = min(gbps, per_node.get(r["node"], gbps))
    if len(per_node) < 2:
        return None
    node = min(per_node, key=lambda n: per_node[n])
    others = statistics.median(v for n, v in per_node.items() if n != node)
    if others > 0 and per_node[node] < link_threshold(rec) * others:
        return node, per_node[node], others
    return None


def link_threshold(rec: dict[str, Any]) -> float:
    return LINK_OUTLIER_TWIN if (rec.get("cluster") or {}).get("twin") else LINK_OUTLIER


def transfers_of(rec: dict[str, Any]) -> list[Transfer]:
    p = rec["params"]
    args = ModelArgs(**{k: v for k, v in p["model_args"].items()
                        if k in ModelArgs.__dataclass_fields__})
    return fsdp_step(shape_of(args), world=p["world_size"], ranks_per_node=p["ranks_per_node"],
                     hsdp=bool(p.get("hsdp")),
                     param_bytes=2 if p.get("param_dtype") == "bfloat16" else 4)


def _rates(transfers: list[Transfer], busbw: Busbw) -> str:
    """The busbw each collective was charged at: "50 GB/s busbw", or per collective."""
    rates = {(t.collective, t.link): busbw.of(t) for t in transfers if t.bus_bytes}
    if len(set(rates.values())) <= 1:
        return f"{busbw.gb_per_s if not rates else next(iter(rates.values())):.3g} GB/s busbw"
    return "busbw " + ", ".join(
        f"{c}{' (in a node)' if link == INTRA_NODE else ''} {gb:.3g} GB/s"
        for (c, link), gb in rates.items())


def _size(gb: float) -> str:
    return f"{gb:.3g} GB" if gb >= 1 else f"{gb * 1000:.3g} MB"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def diagnose(rec: dict[str, Any], busbw: Busbw | None = None) -> dict[str, Any]:
    """The verdict for one FSDP record (see the module docstring)."""
    b = breakdown_of(rec)
    mean, share = b["mean_over_ranks"], shares(rec)
    metrics, params, cluster = rec["metrics"], rec["params"], rec.get("cluster") or {}
    nodes, world = params.get("nodes") or 1, params.get("world_size") or 1
    step = mean["step"]
    transfers = transfers_of(rec)
    bus_gb = sum(t.bus_bytes for t in transfers) / 1e9
    evidence = [
        f"step {_ms(step)} (mean over {world} ranks on {nodes} node(s), {b['timed_steps']} "
        f"timed steps, {b.get('clock')}): " + ", ".join(
            f"{part} {share.get(part, 0):.0%}" for part in [*b["parts"], "unaccounted"]),
        f"FSDP moves {_size(bus_gb)} through each rank's link per step (all-gathers + "
        "reduce-scatter" + (" + replica all-reduce" if params.get("hsdp") else "") + ")",
    ]
    exposed = mean.get("exposed_comm", 0.0)
    if exposed > 0 and bus_gb > 0:
        evidence.append(f"exposed communication {_ms(exposed)}: at least {bus_gb / exposed:.3g}"
                        " GB/s busbw would have hidden it (if none overlapped)")
    if busbw is not None and bus_gb > 0:
        predicted = step_seconds(transfers, busbw.of)
        evidence.append(f"predicted communication {_ms(predicted)} per step at "
                        f"{_rates(transfers, busbw)} ({busbw.source})")
    mfu = metrics.get("mfu")
    if isinstance(mfu, int | float):
        evidence.append(f"MFU {mfu:.1%} of the {metrics.get('peak_tflops')} TFLOP/s peak")
    node: str | None = None
    straggler = metrics.get("stragglers") or {}
    slow_compute = compute_straggler(b)
    outlier = link_outlier(rec)
    twin = bool(cluster.get("twin"))
    ckpt_share = share.get("checkpoint", 0.0) + share.get("data", 0.0)
    storage_s = mean.get("checkpoint", 0.0) + mean.get("data", 0.0)
    slow_storage = ckpt_share >= STORAGE_SHARE
    gap_s = slow_compute[0].value - slow_compute[0].reference if slow_compute else 0.0
    overhead = share.get("sync", 0.0) + share.get("unaccounted", 0.0)
    if bus_gb == 0:  # one rank: nothing to communicate, the "exposed" part is overhead
        overhead += share.get("exposed_comm", 0.0)

    if straggler.get("verdict") in ("WARN", "FAIL"):
        bottleneck, node = "straggler", straggler.get("slowest_node")
        evidence.insert(0, f"rank {straggler.get('slowest_rank')} on {node}: local update "
                        f"{_ms(straggler.get('local_s') or 0)}, "
                        f"{straggler.get('local_vs_median') or 0:.2f}x the median rank; the "
                        f"others wait {_ms(straggler.get('lateness_s') or 0)} a step for it "
                        f"({straggler.get('verdict')})")
        advice = [f"check {node} (`pctk health run --nodes {node}`, `pctk health slow-nodes`), "
                  f"drain it (`pctk health drain {node}`) and rerun without it"]
        summary = f"a straggler: {node} holds every step back"
    elif outlier is not None and share.get("exposed_comm", 0) >= LINK_MIN_COMM_SHARE:
        bottleneck, node = "interconnect", outlier[0]
        evidence.insert(0, f"{node} receives at {outlier[1]:.3g} GB/s, the other nodes at "
                        f"{outlier[2]:.3g} GB/s (median; outlier below {link_threshold(rec):.0%}); "
                        f"exposed communication is {share['exposed_comm']:.0%} of the step")
        advice = [f"check {node}'s network (`pctk health slow-nodes`, its EFA state), drain it "
                  "and rerun without it"]
        summary = f"the interconnect: {node}'s link is slow and every collective waits for it"
    elif slow_storage and (slow_compute is None or storage_s >= gap_s):
        bottleneck = "storage"
        saves = metrics.get("checkpoint_saves") or []
        gbps = (f"; checkpoint saves at {saves[-1]['gb_per_s']:.3g} GB/s "
                f"({saves[-1]['seconds']:.2f} s each)") if saves else ""
        evidence.insert(0, f"checkpoint saves take {share.get('checkpoint', 0):.0%} and data "
                        f"loading {share.get('data', 0):.0%} of the step{gbps}")
        if slow_compute is not None:
            evidence.insert(1, f"also: {slow_compute[0].key}'s compute is "
                            f"{slow_compute[0].ratio:.1f}x the other nodes' median, which "
                            f"costs {_ms(gap_s)} a step against storage's {_ms(storage_s)} "
                            "(a disk that stalls a node's memory stretches its compute too)")
        advice = ["save less often or asynchronously (torch.distributed.checkpoint.async_save)",
                  "check the file system (`pctk bench storage`) and its throughput tier"]
        summary = "storage: checkpoint saves or data loading take a large share of each step"
    elif slow_compute is not None:
        found, rank = slow_compute
        bottleneck, node = "straggler", found.key
        link = {r["node"]: r.get("link_recv_gb_per_s") for r in b.get("per_rank") or []}
        probe = (f"; its link probe {link[node]:.3g} GB/s" if isinstance(link.get(node), float)
                 else "")
        evidence.insert(0, f"rank {rank} on {node}: compute {_ms(found.value)} a step against "
                        f"{_ms(found.others[0])}-{_ms(found.others[1])} on the other nodes "
                        f"(median {_ms(found.reference)}, {found.ratio:.1f}x){probe}; FSDP's "
                        "collectives wait for it in every forward and backward")
        if slow_storage:
            evidence.insert(1, f"also: checkpoint saves and data loading take {ckpt_share:.0%} "
                            f"of the step ({_ms(storage_s)}), less than the others' wait "
                            f"for {node} ({_ms(gap_s)}); a slow node saves slowly too")
        advice = [f"check {node} (`pctk health run --nodes {node}`: clocks, throttling, "
                  f"other processes), drain it (`pctk health drain {node}`) and rerun "
                  "without it"]
        summary = f"a straggler: {node} computes {found.ratio:.1f}x slower and holds every " \
                  "step back"
    elif twin and nodes > 1:
        bottleneck = "twin-shared-cpu"
        cpus = os.cpu_count() or 0
        evidence.insert(0, f"a twin run: its {world} ranks on {nodes} emulated nodes share "
                        f"one host ({cpus} CPUs where this ran), so compute per rank "
                        f"({_ms(mean.get('compute', 0))}) grows with the node count and "
                        "communication is loopback; no node's link, CPU or disk stands out")
        advice = ["measure scaling on real nodes; on the twin, test the diagnosis with "
                  "`pctk local fault slow-net|slow-cpu|slow-storage NODE`"]
        summary = ("the twin's shared CPUs: its nodes share one machine, so this is not a "
                   "performance result and no node or link is to blame")
    elif share.get("exposed_comm", 0) >= COMM_SHARE and bus_gb > 0:
        bottleneck = "interconnect"
        evidence.insert(0, f"exposed communication is {share['exposed_comm']:.0%} of the step")
        advice = ["HSDP (`--hsdp`: gathers stay inside a node, only a replica all-reduce "
                  "crosses nodes)", "a larger per-GPU batch (`--batch-per-gpu`) to give the "
                  "compute more time to hide communication",
                  "compare busbw with `pctk bench nccl` on these nodes"]
        summary = "the interconnect: communication the compute does not hide"
    elif overhead >= OVERHEAD_SHARE:
        bottleneck = "overhead"
        evidence.insert(0, f"synchronisation {share.get('sync', 0):.0%} and unaccounted "
                        f"{share.get('unaccounted', 0):.0%} of the step" + (
                            f"; one rank moves no data, so its exposed_comm "
                            f"({share.get('exposed_comm', 0):.0%}) is FSDP's own overhead "
                            "and jitter" if bus_gb == 0 else ""))
        advice = ["more work per step (larger per-GPU batch), fewer log lines; "
                  "torch.compile to cut launch overhead"]
        summary = "overhead: synchronisation and launch latency, not compute"
    else:
        bottleneck = "compute"
        evidence.insert(0, f"compute is {share.get('compute', 0):.0%} of the step")
        low = isinstance(mfu, int | float) and mfu < MFU_LOW
        advice = (["compute runs below its expected level: torch.compile (`--compile`), a "
                   "larger per-GPU batch, activation checkpointing only where memory needs "
                   "it"] if low else
                  ["compute-bound, as a training run should be: scale out, or raise MFU with "
                   "`--compile`"])
        summary = "compute" + (f", at {mfu:.1%} MFU" if isinstance(mfu, int | float) else "")
    return {
        "record_id": rec.get("id"),
        "nodes": nodes,
        "world_size": world,
        "bottleneck": bottleneck,
        "node": node,
        "summary": summary,
        "evidence": evidence,
        "advice": advice,
        "shares": share,
        "breakdown_s": {k: mean.get(k) for k in ("step", "fwd_bwd", *b["parts"])},
        "comm_bus_bytes_per_step": bus_gb * 1e9,
        "twin": twin,
    }


def verdict_lines(verdict: dict[str, Any]) -> list[str]:
    """The verdict for people: the bottleneck, then evidence, advice and findings."""
    node = f" ({verdict['node']})" if verdict.get("node") else ""
    lines = [f"bottleneck: {verdict['bottleneck']}{node} - {verdict['summary']}"]
    lines += [f"  evidence: {x}" for x in verdict["evidence"]]
    lines += [f"  try: {x}" for x in verdict["advice"]]
    lines += [f"  finding: {x}" for x in verdict.get("prediction_gaps") or []]
    sizes = verdict.get("sizes") or []
    if sizes and sizes[-1]["predicted"].get("busbw_source"):
        p = sizes[-1]["predicted"]
        bw = p.get("busbw_gb_per_s")
        lines.append(f"  prediction busbw: {'-' if bw is None else f'{bw:.3g} GB/s'} "
                     f"({p['busbw_source']})")
    return lines
