"""torch.distributed collective sweep, reported in the same layout as parsed nccl-tests output.

Node-side: standard library + torch only (torch is imported inside the functions that need
it). The collective names, bus-bandwidth factors and size parsing it shares with the driver
live in :mod:`benchmarks.vocab`.

Run one process per rank (``srun python -m benchmarks.collectives ...`` or torchrun)::

    python -m benchmarks.collectives --min-bytes 1M --max-bytes 1G \\
        --ops all_reduce,all_gather,reduce_scatter,all_to_all,broadcast \\
        --iters 20 --warmup 5 --out record.json

Conventions follow nccl-tests so the two sit side by side:

- ``size_bytes`` is nccl-tests' printed size: the whole buffer for all_reduce and broadcast,
  the gathered output for all_gather, the scattered input for reduce_scatter and the per-rank
  send buffer for alltoall; ``count`` is elements per rank as nccl-tests prints it.
- algbw = size_bytes / time (GB/s, 1e9), busbw = algbw x factor (see ``busbw_factor``).
- time per iteration is one rank's wall time over ``iters`` back-to-back calls, measured after
  a barrier and with the device synchronised (asynchronous GPU launches are not mistaken for
  completion), divided by ``iters``; across ranks it is the mean (``--time-reduction mean``,
  nccl-tests' default ``-a 1``) or the slowest rank (``max``, nccl-tests' ``-a 3``). The
  record's ``params.timing`` and each block's ``timing`` say which.
- Launch cost: a ``torch.distributed`` call costs 10-30 us of Python and dispatch on the host,
  where nccl-tests' C launch costs 2-5 us, so small messages measure the host, not the
  network. With NCCL on CUDA the timed calls are captured once in a CUDA graph and replayed
  (as nccl-tests ``-G``): one host launch for all ``iters``. Otherwise (gloo, or
  ``--cuda-graph off``) sizes below ``--launch-bound-below`` (64 KiB) are flagged
  ``launch_bound`` per row and kept out of ``avg_busbw_gbps_not_launch_bound``.
- ``avg_busbw_gbps`` is the mean over the measured sizes, like nccl-tests' "Avg bus
  bandwidth" over its own -b..-e range: it depends on that range, so the block carries the
  range (``avg_busbw_sizes``) and a note, and two averages compare only over the same sizes.
- Placement is reported honestly: ``torch.distributed.all_reduce`` and ``broadcast`` work
  in place, so their numbers sit under ``in_place``; the ``*_tensor``/``*_single`` calls are
  out of place.
- Each size is checked once more after timing with a known input and known result; the
  number of wrong elements (summed over ranks) goes into ``wrong``.
- Backend support is probed, not assumed: gloo in older torch has no reduce_scatter_tensor
  (torch 2.13's gloo has it). Such a block is reported ``unsupported``; with
  ``--emulate-missing`` it is measured as all_reduce + local slice and labelled EMULATED.

The record is ``pctk.result/v1`` with kind ``collectives``; ``metrics`` has the layout
documented in :mod:`toolkit.bench.nccl` (``{"collectives": [block, ...]}``).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks.vocab import SWEEP_OPS, busbw_factor, canonical_collective, parse_bytes, sweep_sizes


def per_rank_count(collective: str, size_bytes: int, nranks: int, elem: int = 4) -> int:
    """Elements per rank for a printed size; 0 when the size is too small to split."""
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return size_bytes // elem // nranks
    return size_bytes // elem


def measurement(time_us: float, size_bytes: int, factor: float, wrong: int | None) -> dict:
    algbw = size_bytes / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0
    return {"time_us": time_us, "algbw_gbps": algbw, "busbw_gbps": algbw * factor,
            "wrong": wrong, "error": None}


# ---------------------------------------------------------------- torch part (lazy import)

def _make_op(collective: str, count: int, rank: int, n: int, device: Any,
             emulate: bool) -> tuple[Callable[[], None], Callable[[], int], str]:
    """(timed call, check -> wrong elements on this rank, placement) for one size."""
    import torch
    import torch.distributed as dist

    f32 = torch.float32
    # torch >= 2.13 renamed the *_tensor calls; use whichever this torch has
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    if collective == "all_reduce":
        # zeros: summed in place call after call they stay zero, where torch.empty (whatever
        # memory held) or any non-zero start grows into inf/NaN or denormals, which slow gloo
        # on CPUs; the bytes moved do not depend on the values
        buf = torch.zeros(count, dtype=f32, device=device)

        def check() -> int:
            buf.fill_(rank + 1)
            dist.all_reduce(buf)
            return int((buf != n * (n + 1) / 2).sum())
        return (lambda: dist.all_reduce(buf)), check, "in_place"
    if collective == "broadcast":
        buf = torch.full((count,), float(rank + 1), dtype=f32, device=device)

        def check() -> int:
            buf.fill_(rank + 1)
            dist.broadcast(buf, src=0)
            return int((buf != 1).sum())
        return (lambda: dist.broadcast(buf, src=0)), check, "in_place"
    if collective == "all_gather":
        inp = torch.full((count,), float(rank + 1), dtype=f32, device=device)
        out = torch.empty(count * n, dtype=f32, device=device)

        def check() -> int:
            out.zero_()
            gather(out, inp)
            want = torch.arange(1, n + 1, dtype=f32, device=device).repeat_interleave(count)
            return int((out != want).sum())
        return (lambda: gather(out, inp)), check, "out_of_place"
    if collective == "reduce_scatter":
        # chunk j of rank r holds r + 1 + j; rank r receives sum over ranks = n(n+1)/2 + n*r
        inp = (torch.arange(n, dtype=f32, device=device).repeat_interleave(count) + rank + 1)
        out = torch.empty(count, dtype=f32, device=device)
        if emulate:
            tmp = torch.empty_like(inp)

            def call() -> None:
                tmp.copy_(inp)
                dist.all_reduce(tmp)
                out.copy_(tmp[rank * count:(rank + 1) * count])
        else:
            def call() -> None:
                scatter(out, inp)

        def check() -> int:
            out.zero_()
            call()
            return int((out != n * (n + 1) / 2 + n * rank).sum())
        return call, check, "out_of_place"
    if collective == "alltoall":
        # chunk j of rank r holds r*n + j; rank r receives chunk i = i*n + r
        inp = (torch.arange(n, dtype=f32, device=device).repeat_interleave(count) + rank * n)
        out = torch.empty(count * n, dtype=f32, device=device)

        def check() -> int:
            out.zero_()
            dist.all_to_all_single(out, inp)
            want = (torch.arange(n, dtype=f32, device=device) * n + rank).repeat_interleave(count)
            return int((out != want).sum())
        return (lambda: dist.all_to_all_single(out, inp)), check, "out_of_place"
    raise ValueError(f"the torch sweep does not run {collective}")


def _supported(collective: str, backend: str, device: Any) -> str | None:
    """None if the backend runs the collective, else why not (probed, not assumed)."""
    if collective != "reduce_scatter" or backend != "gloo":
        return None
    import torch
    import torch.distributed as dist

    n = dist.get_world_size()
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    try:
        scatter(torch.zeros(1, device=device),
                                   torch.zeros(n, device=device))
    except (RuntimeError, NotImplementedError, ValueError) as exc:
        return f"gloo has no reduce_scatter_tensor ({str(exc).splitlines()[0][:120]})"
    return None


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


TIME_REDUCTIONS = {"mean": "-a 1 (nccl-tests default)", "max": "-a 3"}
LAUNCH_BOUND_BELOW = 64 << 10


def _over_ranks(value: float, device: Any, how: str) -> float:
    """The mean or the max of ``value`` over all ranks."""
    import torch
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX if how == "max" else dist.ReduceOp.SUM)
    return float(t.item()) / (1 if how == "max" else dist.get_world_size())


def _graph_replay(call: Callable[[], None], iters: int, device: Any) -> Callable[[], None] | None:
    """``iters`` calls captured in one CUDA graph; its replay, or None if capture failed."""
    import torch

    try:
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            call()  # NCCL sets up its communicator outside the capture
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(iters):
                call()
    except RuntimeError:
        return None
    return graph.replay


def _timed_launcher(call: Callable[[], None], iters: int, device: Any,
                    graphs: bool) -> tuple[Callable[[], None], str]:
    """What to time for ``iters`` calls, and how they are launched. Every rank takes the same
    path (a capture that failed anywhere means eager everywhere), or they would deadlock."""
    replay = _graph_replay(call, iters, device) if graphs else None
    if graphs and _over_ranks(0.0 if replay else 1.0, device, "max") == 0.0 and replay:
        return replay, "cuda_graph"

    def eager() -> None:
        for _ in range(iters):
            call()
    return eager, "eager" + (" (CUDA graph capture failed)" if graphs else "")


def _sum_over_ranks(value: int, device: Any) -> int:
    import torch
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(t)
    return int(t.item())


def use_cuda_graphs(mode: str, backend: str, device: Any) -> bool:
    """auto: with NCCL on CUDA (the backend that can be captured); on: there or an error."""
    capturable = backend == "nccl" and device.type == "cuda"
    if mode == "on" and not capturable:
        raise ValueError(f"--cuda-graph on needs nccl on CUDA, not {backend} on {device.type}")
    return capturable and mode != "off"


def run_block(collective: str, sizes: list[int], iters: int, warmup: int, device: Any,
              backend: str, emulate: bool = False, time_reduction: str = "mean",
              graphs: bool = False,
              launch_bound_below: int = LAUNCH_BOUND_BELOW) -> dict[str, Any]:
    """Measure one collective over the sizes; return a metrics block."""
    import torch.distributed as dist

    rank, n = dist.get_rank(), dist.get_world_size()
    block: dict[str, Any] = {
        "collective": collective, "collective_source": "torch.distributed sweep",
        "dtype": "float", "redop": "sum" if collective in ("all_reduce", "reduce_scatter")
        else "none", "nranks": n, "format": "torch", "rows": [], "complete": True,
        "failure_lines": [], "out_of_bounds": None, "avg_busbw_gbps": None,
        "inconsistencies": [], "implementation": f"torch.distributed/{backend}", "notes": [],
    }
    why_not = _supported(collective, backend, device)
    if why_not and not emulate:
        block.update(unsupported=why_not, complete=False)
        return block
    if why_not:
        block["implementation"] = (f"EMULATED: all_reduce + local slice on {backend} "
                                   f"(not a reduce_scatter; bandwidth not comparable)")
    factor = busbw_factor(collective, n)
    for size in sizes:
        count = per_rank_count(collective, size, n)
        if count == 0:
            continue
        printed = count * 4 * (n if collective in ("all_gather", "reduce_scatter",
                                                   "alltoall") else 1)
        call, check, placement = _make_op(collective, count, rank, n, device, emulate)
        for _ in range(warmup):
            call()
        _sync(device)
        timed, launch = _timed_launcher(call, iters, device, graphs)
        if launch == "cuda_graph":
            timed()  # the first replay uploads the graph: keep it out of the timing
        _sync(device)
        dist.barrier()
        _sync(device)
        start = time.perf_counter()
        timed()
        _sync(device)
        elapsed_us = (time.perf_counter() - start) / max(1, iters) * 1e6
        time_us = _over_ranks(elapsed_us, device, time_reduction)
        wrong = _sum_over_ranks(check(), device)
        row = {"size_bytes": printed, "count": count, "dtype": "float",
               "redop": block["redop"], "root": 0 if collective == "broadcast" else -1,
               "out_of_place": None, "in_place": None,
               "launch": launch, "launch_bound": launch != "cuda_graph"
               and printed < launch_bound_below}
        row[placement] = measurement(time_us, printed, factor, wrong)
        block["rows"].append(row)
    block.update(summarise(block["rows"], time_reduction, launch_bound_below))
    return block


def summarise(rows: list[dict[str, Any]], time_reduction: str,
              launch_bound_below: int) -> dict[str, Any]:
    """Averages, the sizes they cover, the timing conventions, and notes that say so."""
    measured: list[tuple[int, dict[str, Any], bool]] = [
        (r["size_bytes"], r.get("out_of_place") or r["in_place"], r.get("launch_bound", False))
        for r in rows]
    out: dict[str, Any] = {
        "timing": timing_conventions(time_reduction),
        "launch": sorted({r.get("launch", "eager") for r in rows}),
        "launch_bound_below_bytes": (None if all(r.get("launch") == "cuda_graph" for r in rows)
                                     else launch_bound_below),
        "avg_busbw_gbps": None, "avg_busbw_sizes": None,
        "avg_busbw_gbps_not_launch_bound": None, "notes": [],
    }
    if not measured:
        return out
    sizes = [size for size, _, _ in measured]
    out["avg_busbw_gbps"] = sum(m["busbw_gbps"] for _, m, _ in measured) / len(measured)
    out["avg_busbw_sizes"] = [min(sizes), max(sizes)]
    unbound = [m["busbw_gbps"] for _, m, bound in measured if not bound]
    if unbound:
        out["avg_busbw_gbps_not_launch_bound"] = sum(unbound) / len(unbound)
    out["notes"].append(
        f"avg_busbw_gbps is the mean over {len(measured)} sizes, {min(sizes)} to {max(sizes)} "
        "bytes: like nccl-tests' 'Avg bus bandwidth' it depends on the size range, so compare "
        "two averages only over the same sizes and timing; compare per size otherwise")
    bound = [size for size, _, b in measured if b]
    if bound:
        out["notes"].append(
            f"{len(bound)} sizes below {launch_bound_below} bytes are launch-bound: one "
            "Python call per iteration (10-30 us) against nccl-tests' C launch (2-5 us); "
            "their busbw reads low")
    return out


def timing_conventions(time_reduction: str) -> dict[str, str]:
    return {
        "per_iteration": "wall time of iters back-to-back calls between device syncs / iters",
        "time_reduction": time_reduction,
        "over_ranks": ("mean over ranks" if time_reduction == "mean" else "slowest rank"),
        "nccl_tests_equivalent": TIME_REDUCTIONS[time_reduction],
    }


def _device_for(backend: str, local_rank: int) -> Any:
    import torch

    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def sweep(ops: list[str], min_bytes: int, max_bytes: int, iters: int, warmup: int,
          backend: str | None = None, emulate: bool = False, time_reduction: str = "mean",
          cuda_graph: str = "auto",
          launch_bound_below: int = LAUNCH_BOUND_BELOW) -> dict[str, Any] | None:
    """Run the sweep in an initialised-or-not process group; rank 0 gets the record."""
    import torch
    import torch.distributed as dist

    from benchmarks import distenv, record

    env = distenv.detect()
    if not dist.is_initialized():
        env.export()
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        dist.init_process_group(backend=backend, init_method="env://")
    backend = dist.get_backend()
    device = _device_for(backend, env.local_rank)
    rank, n = dist.get_rank(), dist.get_world_size()
    sizes = sweep_sizes(min_bytes, max_bytes)
    graphs = use_cuda_graphs(cuda_graph, backend, device)
    blocks = [run_block(canonical_collective(op), sizes, iters, warmup, device, backend,
                        emulate, time_reduction, graphs, launch_bound_below) for op in ops]
    # Slurm's node name where there is one: what sinfo/scontrol/drain use (and distinct on
    # the twin, where every node is this host)
    host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    info = {"rank": rank, "host": host,
            "device": device.index if device.type == "cuda" else None,
            "bus": None, "name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                                  else "cpu")}
    infos: list[Any] = [None] * n
    dist.all_gather_object(infos, info)
    if rank != 0:
        return None
    hosts = list(dict.fromkeys(i["host"] for i in infos))
    wrong = sum((r[p] or {}).get("wrong") or 0 for b in blocks for r in b["rows"]
                for p in ("out_of_place", "in_place"))
    for b in blocks:
        b.update(devices=infos, hosts=hosts,
                 network={"transport": "unknown", "evidence": []}, nccl_version=None)
    reasons = ([f"{wrong} wrong elements in correctness checks"] if wrong else
               ["all correctness checks passed; bandwidth judged by the driver"])
    reasons += [f"{b['collective']}: unsupported: {b['unsupported']}" for b in blocks
                if b.get("unsupported")]
    params = {"ops": [b["collective"] for b in blocks], "min_bytes": min_bytes,
              "max_bytes": max_bytes, "iters": iters, "warmup": warmup, "backend": backend,
              "world_size": n, "dtype": "float32", "emulate_missing": emulate,
              "cuda_graph": cuda_graph, "launch": "cuda_graph" if graphs else "eager",
              "launch_bound_below_bytes": None if graphs else launch_bound_below,
              "timing": timing_conventions(time_reduction)}
    return record.new_record("collectives", params=params, metrics={"collectives": blocks},
                             status="FAIL" if wrong else "PASS", reasons=reasons,
                             cluster={"hosts": hosts, "nodes": len(hosts)})


def _check_graph_backend(backend: str | None) -> None:
    """Refuse --cuda-graph on before any process group exists where it cannot work."""
    import torch

    if backend == "gloo" or not torch.cuda.is_available():
        raise ValueError("--cuda-graph on needs nccl on CUDA GPUs")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.collectives",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--min-bytes", default="1K", help="smallest size (8, 64K, 16M, 1G)")
    ap.add_argument("--max-bytes", default="64M", help="largest size")
    ap.add_argument("--ops", default=",".join(SWEEP_OPS),
                    help="comma-separated: " + ",".join(SWEEP_OPS))
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                    help="default: nccl with GPUs, else gloo")
    ap.add_argument("--emulate-missing", action="store_true",
                    help="emulate collectives the backend lacks (clearly labelled)")
    ap.add_argument("--time-reduction", choices=list(TIME_REDUCTIONS), default="mean",
                    help="time over ranks: mean (nccl-tests' default -a 1) or max (-a 3)")
    ap.add_argument("--cuda-graph", choices=("auto", "on", "off"), default="auto",
                    help="capture the timed calls in a CUDA graph (auto: with nccl on CUDA)")
    ap.add_argument("--launch-bound-below", default="64K",
                    help="without CUDA graphs, flag smaller sizes as launch-bound")
    ap.add_argument("--out", default=None, help="record path (rank 0 writes it)")
    args = ap.parse_args(argv)
    try:
        ops = [canonical_collective(o) for o in args.ops.split(",") if o.strip()]
        unknown = [o for o in ops if o not in SWEEP_OPS]
        if unknown:
            raise ValueError(f"the sweep runs {', '.join(SWEEP_OPS)}; not {', '.join(unknown)}")
        lo, hi = parse_bytes(args.min_bytes), parse_bytes(args.max_bytes)
        bound = parse_bytes(args.launch_bound_below)
        if args.iters < 1 or args.warmup < 0:
            raise ValueError("--iters must be at least 1 and --warmup at least 0")
        if args.cuda_graph == "on":
            _check_graph_backend(args.backend)
    except ValueError as exc:
        print(f"collectives: error: {exc}", file=sys.stderr)
        return 2
    rec = sweep(ops, lo, hi, args.iters, args.warmup, args.backend, args.emulate_missing,
                args.time_reduction, args.cuda_graph, bound)
    import torch.distributed as dist

    if rec is not None:
        from benchmarks.record import write_record

        out = args.out or os.environ.get("PCTK_RECORD") or "collectives-record.json"
        write_record(out, rec)
        print(f"collectives: wrote {out} ({rec['verdict']['status']})")
    dist.barrier()
    dist.destroy_process_group()
    return 1 if rec is not None and rec["verdict"]["status"] == "FAIL" else 0


if __name__ == "__main__":
    sys.exit(main())
