"""Realistic result records built with the node-side ``benchmarks.record.new_record``.

nccl-tests records go through toolkit.bench.nccl's parser and judge, collectives blocks use
benchmarks.collectives' measurement helper. The busbw curve follows a 2-node p5.48xlarge
all_reduce sweep (about 470 GB/s at large messages); the fsdp metrics follow
``benchmarks.fsdp.train``'s layout and torchtitan's Llama 3.1 8B figures on H100 (5,762
tokens/s per GPU, about 34% MFU).
"""

from __future__ import annotations

import copy
import random
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks.collectives import measurement
from benchmarks.record import new_record
from benchmarks.vocab import busbw_factor
from toolkit.bench.comm.record import build_record, judge_runs
from toolkit.bench.nccl import parse_nccl_output

SOFTWARE = {"python": "3.11.7", "torch": "2.6.0", "cuda": "12.4", "nccl": "2.21.5",
            "aws_ofi_nccl": "1.13.0", "efa": "1.37.0", "libfabric": "1.22.0",
            "driver": "550.127.05", "host": "gpu-st-p5-1"}
HOSTS = ["gpu-st-p5-1", "gpu-st-p5-2"]
SIZES = [8 << i for i in range(32)]  # 8 B .. 16 GiB
BUS_FACTOR = {"all_reduce": 2 * 15 / 16, "all_gather": 15 / 16, "reduce_scatter": 15 / 16}
PEAK = {"all_reduce": 470.0, "all_gather": 360.0, "reduce_scatter": 350.0}


def cluster(name: str = "train-a", instance_type: str = "p5.48xlarge") -> dict[str, Any]:
    return {"name": name, "instance_type": instance_type, "nodes": 2, "hosts": list(HOSTS),
            "partition": "gpu", "job_id": "1234"}


def busbw_at(collective: str, size: int) -> float:
    half = 64 << 20  # message size that reaches half the peak
    return PEAK[collective] * size / (size + half)


def nccl_tests_stdout(collective: str = "all_reduce",
                      scale: Callable[[int], float] = lambda _s: 1.0) -> str:
    """What ``all_reduce_perf -b 8 -e 16G -f 2 -g 1`` prints on 16 ranks over 2 nodes."""
    factor = BUS_FACTOR[collective]
    lines = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: "
             "5 iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    for rank in range(16):
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {4000 + rank:6d} on {HOSTS[rank // 8]} "
                     f"device  {rank % 8} [0x{0x53 + rank % 8:02x}] NVIDIA H100 80GB HBM3")
    lines += ["#", "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
              "#       size         count      type   redop    root     time   algbw   busbw "
              "#wrong     time   algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)  "
              "          (us)  (GB/s)  (GB/s)"]
    total = 0.0
    for size in SIZES:
        busbw = busbw_at(collective, size) * scale(size)
        algbw = busbw / factor
        time_us = size / (algbw * 1e3)
        total += 2 * round(busbw, 2)
        cells = f"{time_us:8.2f}  {algbw:6.2f}  {busbw:6.2f}      0"
        lines.append(f"{size:12d}  {size // 4:12d}     float     sum      -1  {cells}  {cells}")
    lines += ["# Out of bounds values : 0 OK",
              f"# Avg bus bandwidth    : {total / (2 * len(SIZES)):.4f} ", "#", ""]
    return "\n".join(lines)


def nccl_record(scale: Callable[[int], float] = lambda _s: 1.0, created: str | None = None,
                name: str = "train-a", collective: str = "all_reduce") -> dict[str, Any]:
    """Parsed and judged by toolkit.bench.nccl, as ``pctk bench nccl`` does."""
    runs = parse_nccl_output(nccl_tests_stdout(collective, scale), collective=collective)
    rec = build_record("nccl-tests", runs, judge_runs(runs, instance_type="p5.48xlarge"),
                       params={"collective": collective, "minbytes": 8, "maxbytes": SIZES[-1]},
                       raw_logs=["nccl-tests.log"], cluster=cluster(name))
    rec["software"] = dict(SOFTWARE)
    if created:
        rec["created"] = created
    return rec


def collectives_block(collective: str, scale: Callable[[int], float] = lambda _s: 1.0,
                      emulated: bool = False) -> dict[str, Any]:
    """One block as ``benchmarks.collectives.run_block`` lays it out (out-of-place only)."""
    factor = busbw_factor(collective, 16)
    rows = []
    for size in SIZES[17:]:  # 1 MiB .. 16 GiB
        busbw = busbw_at(collective, size) * scale(size)
        time_us = size / (busbw / factor * 1e3)
        rows.append({"size_bytes": size, "count": size // 4 // 16, "dtype": "float",
                     "redop": "sum", "root": -1, "in_place": None,
                     "out_of_place": measurement(time_us, size, factor, 0)})
    return {
        "collective": collective, "collective_source": "torch.distributed sweep",
        "dtype": "float", "redop": "sum", "nranks": 16, "format": "torch", "rows": rows,
        "complete": True, "failure_lines": [], "out_of_bounds": None, "inconsistencies": [],
        "avg_busbw_gbps": sum(r["out_of_place"]["busbw_gbps"] for r in rows) / len(rows),
        "implementation": ("EMULATED: all_reduce + local slice on gloo" if emulated
                           else "torch.distributed/nccl"),
        "hosts": list(HOSTS), "network": {"transport": "unknown", "evidence": []},
    }


def collectives_record(scale: Callable[[int], float] = lambda _s: 1.0,
                       created: str | None = None, emulated: bool = False) -> dict[str, Any]:
    """The PyTorch collectives benchmark: several collectives in one record."""
    blocks = [collectives_block("all_gather", scale),
              collectives_block("reduce_scatter", scale, emulated)]
    rec = new_record("collectives", params={"backend": "nccl", "world_size": 16},
                     metrics={"collectives": blocks}, status="PASS",
                     cluster=cluster(), software=dict(SOFTWARE))
    if created:
        rec["created"] = created
    return rec


def fsdp_record(tokens: float = 5762.0, mfu: float = 0.34, created: str | None = None,
                name: str = "train-a") -> dict[str, Any]:
    step_time = 8 * 8192 / tokens
    losses = [[s, 11.0 - 0.35 * s ** 0.5] for s in range(1, 51)]
    metrics = {
        "measured_steps": 47, "step_time_mean_s": step_time, "step_time_p50_s": step_time,
        "step_time_p90_s": step_time * 1.04, "tokens_per_s_per_gpu": tokens,
        "tflops_per_gpu": mfu * 989.0, "mfu": mfu, "flops_per_token": 57_000_000_000,
        "peak_tflops": 989.0, "peak_memory_gib": 61.2,
        "peak_memory_kind": "cuda_max_memory_allocated", "final_loss": losses[-1][1],
        "losses": losses, "resumed_from_step": None,
        "checkpoint_saves": [{"step": 25, "seconds": 9.5, "bytes": 96_000_000_000,
                              "gb_per_s": 10.1},
                             {"step": 50, "seconds": 8.9, "bytes": 96_000_000_000,
                              "gb_per_s": 10.8}],
        "checkpoint_load": None,
    }
    rec = new_record("fsdp", params={"model": "llama3-8b", "steps": 50, "world_size": 16,
                                     "timing_warmup_steps": 3},
                     metrics=metrics, status="PASS", cluster=cluster(name),
                     software=dict(SOFTWARE))
    if created:
        rec["created"] = created
    return rec


def fsdp_breakdown_record(name: str = "train-a") -> dict[str, Any]:
    """An fsdp record as ``benchmarks.fsdp.train`` writes it on 2 p5.48xlarge nodes: the
    model's shape, the mesh, per-rank step-time breakdown and link probe, the straggler
    judgement (a 2-rank CPU run of that module, its figures scaled to 16 ranks of 8b)."""
    rec = fsdp_record(name=name)
    rec["params"].update(
        model="8b", workload="pretrain", world_size=16, nodes=2, ranks_per_node=8,
        model_args={"dim": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 8,
                    "ffn_dim": 14_336, "vocab_size": 128_256, "norm_eps": 1e-05,
                    "rope_theta": 500000.0, "max_seq_len": 8192},
        n_params=8_030_261_248, global_batch_size=16, local_batch_size=1, seq_len=8192,
        mesh={"shape": [16], "dims": ["dp_shard"]}, hsdp=False, param_dtype="bfloat16",
        device="cuda", device_name="NVIDIA H100 80GB HBM3", backend="nccl",
        peak_tflops=989.0)
    step = 8192 / rec["metrics"]["tokens_per_s_per_gpu"]
    rec["metrics"].update(step_time_mean_s=step, step_time_p50_s=step,
                          step_time_p90_s=step * 1.04)
    mean = {"step": 1.422, "fwd_bwd": 1.21, "compute": 1.05, "exposed_comm": 0.16,
            "optimizer": 0.09, "sync": 0.031, "data": 0.004, "checkpoint": 0.0}
    per_rank = [{"rank": r, "node": HOSTS[r // 8], **mean,
                 "link_recv_gb_per_s": 44.1 if r % 8 else 45.0} for r in range(16)]
    rec["metrics"].update(
        breakdown={"timed_steps": 47, "mean_over_ranks": mean, "per_rank": per_rank,
                   "parts": ["compute", "exposed_comm", "optimizer", "sync", "data",
                             "checkpoint"], "clock": "cuda events",
                   "link_probe": {"bytes": 64_000_000, "repeats": 3, "note": "ring"}},
        stragglers={"per_rank": [{"rank": r, "node": HOSTS[r // 8], "step_s": 1.42,
                                  "local_s": 0.09, "sync_wait_s": 0.03} for r in range(16)],
                    "slowest_rank": 5, "slowest_node": HOSTS[0], "local_s": 0.092,
                    "median_local_s": 0.09, "local_vs_median": 1.02, "lateness_s": -0.001,
                    "lateness_of_step": -0.0007, "verdict": "OK"})
    return rec


def health_record(fail: tuple[str, str] | None = None,
                  created: str | None = None) -> dict[str, Any]:
    nodes: dict[str, dict[str, Any]] = {}
    for host in HOSTS:
        nodes[host] = {
            "gpu_count": {"status": "OK", "value": 8, "expected": 8, "message": "8 H100",
                          "remedy": ""},
            "efa_devices": {"status": "OK", "value": 32, "expected": 32, "message": "32 EFA",
                            "remedy": ""},
            "xid_errors": {"status": "SKIP", "value": None, "expected": 0,
                           "message": "dmesg not readable", "remedy": ""},
        }
    status = "PASS"
    if fail:
        node, check = fail
        nodes[node][check] = {"status": "FAIL", "value": 7, "expected": 8,
                              "message": "7 of 8 GPUs visible",
                              "remedy": "drain the node and reboot it"}
        status = "FAIL"
    rec = new_record("health", params={"checks": ["gpu_count", "efa_devices", "xid_errors"]},
                     metrics={"nodes": nodes}, status=status, cluster=cluster(),
                     software=dict(SOFTWARE))
    if created:
        rec["created"] = created
    return rec


def drop_above(size: int, factor: float) -> Callable[[int], float]:
    return lambda s: factor if s >= size else 1.0


def fill_store(store: Any) -> None:
    """A small history: two clusters, a busbw drop after the baseline, training over four
    days, a health run with one failing node."""
    base = store.add(nccl_record(created="2026-01-01T00:00:00Z"))
    store.set_baseline(base)
    store.add(nccl_record(scale=drop_above(4 << 30, 0.85), created="2026-01-05T00:00:00Z"))
    store.add(collectives_record(created="2026-01-05T01:00:00Z"))
    for day, (tokens, mfu) in enumerate([(5762, .34), (5790, .342), (5700, .337), (5300, .31)]):
        rid = store.add(fsdp_record(tokens=tokens, mfu=mfu, created=f"2026-01-0{day + 1}T12:00Z"))
        if day == 0:
            store.set_baseline(rid)
    for day, (tokens, mfu) in enumerate([(2400, .40), (2450, .41)]):
        rec = fsdp_record(tokens=tokens, mfu=mfu, created=f"2026-01-0{day + 2}T12:00Z",
                          name="train-b")
        rec["cluster"]["instance_type"] = "p4d.24xlarge"
        rec["software"]["nccl"] = "2.23.4"
        store.add(rec)
    store.add(health_record(fail=("gpu-st-p5-2", "gpu_count"), created="2026-01-05T02:00:00Z"))


HISTORY_CLUSTERS = (("train-a", "p5.48xlarge", 2), ("train-b", "p4d.24xlarge", 2),
                    ("train-c", "p5.48xlarge", 4))


def _templates() -> dict[str, dict[str, Any]]:
    return {"nccl-tests": nccl_record(), "fsdp": fsdp_record(),
            "health": health_record()}


def _scale_busbw(rec: dict[str, Any], factor: float) -> None:
    for block in rec["metrics"].get("collectives") or []:
        for row in block.get("rows") or []:
            for side in ("out_of_place", "in_place"):
                part = row.get(side)
                if isinstance(part, dict):
                    for key in ("busbw_gbps", "algbw_gbps"):
                        if isinstance(part.get(key), float):
                            part[key] = round(part[key] * factor, 2)


def _night_record(template: dict[str, Any], cluster: tuple[str, str, int], night: int,
                  hour: int, factor: float, nccl: str) -> dict[str, Any]:
    rec = copy.deepcopy(template)
    rec["id"] = uuid.uuid4().hex
    rec["created"] = (f"{2025 + night // 336}-{1 + night % 336 // 28:02d}-"
                      f"{1 + night % 28:02d}T{hour:02d}:00:00Z")
    name, instance_type, nodes = cluster
    rec["cluster"] = {**rec["cluster"], "name": name, "instance_type": instance_type,
                      "nodes": nodes}
    rec["software"] = {**rec["software"], "nccl": nccl}
    if rec["kind"] == "nccl-tests":
        _scale_busbw(rec, factor)
    elif rec["kind"] == "fsdp":
        rec["metrics"]["tokens_per_s_per_gpu"] *= factor
    return rec


def fill_history(store: Any, count: int, seed: int = 1) -> None:
    """``count`` records of a nightly history over three clusters (p5.48xlarge, p4d.24xlarge,
    p5.48xlarge at 4 nodes): an nccl-tests all_reduce sweep each night, fsdp every third
    night, health every fifth; 2% run-to-run noise; busbw and tokens/s drop 10% with an NCCL
    version change two thirds of the way through. One record of each kind is built by the
    builders above and copied with a new id, date and scaled figures (fast enough for
    10,000); the copies keep the template's PASS verdict."""
    rng = random.Random(seed)
    shapes = _templates()
    nights = count * 15 // (len(HISTORY_CLUSTERS) * 23)  # 1 + 1/3 + 1/5 records per night
    made = 0
    for night in range(nights + 10):
        for cluster in HISTORY_CLUSTERS:
            kinds = ["nccl-tests"] + (["fsdp"] if night % 3 == 0 else []) + (
                ["health"] if night % 5 == 0 else [])
            for hour, kind in enumerate(kinds, start=2):
                if made == count:
                    return
                late = night > nights * 2 // 3
                factor = (0.9 if late else 1.0) * rng.gauss(1.0, 0.02)
                store.add(_night_record(shapes[kind], cluster, night, hour, factor,
                                        "2.23.4" if late else "2.21.5"))
                made += 1
