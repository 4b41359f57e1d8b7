"""``pctk bench``: interconnect, training and storage benchmarks.

Each subcommand is imported only when it runs or shows its own help, so ``pctk bench nccl
parse`` does not pay for the FSDP or storage drivers (tests/perf/nccl_parse.py).
"""

from __future__ import annotations

import typer

from toolkit.lazy_cli import LazyCommand, lazy_group

BENCH_COMMANDS = (
    LazyCommand("fsdp", "toolkit.bench.fsdp.cli:fsdp_command",
                "FSDP2 training benchmark (tokens/s, TFLOPs, MFU, checkpoint GB/s) through "
                "Slurm."),
    LazyCommand("scaling", "toolkit.bench.scaling.cli:scaling_command",
                "FSDP scaling study: the benchmark at several node counts, a prediction and a "
                "diagnosis."),
    LazyCommand("inference", "toolkit.bench.inference.cli:inference_command",
                "Inference benchmarks through Slurm: offline (prefill, decode, TTFT/TPOT, "
                "roofline, test-time compute cost) or serve (an OpenAI-compatible server "
                "under a load ladder)."),
    LazyCommand("nccl", "toolkit.bench.nccl.cli:app",
                "nccl-tests: run on the cluster, parse logs, judge, compare, plot."),
    LazyCommand("collectives", "toolkit.bench.collectives.cli:collectives",
                "torch.distributed collective sweep through Slurm (sbatch/collectives.sbatch)."),
    LazyCommand("storage", "toolkit.bench.storage.cli:storage_command",
                "Shared file system throughput, IOPS and metadata rates from N nodes at once "
                "(fio)."),
)

app = typer.Typer(
    cls=lazy_group(BENCH_COMMANDS),
    help="Benchmarks of every layer: interconnect, storage, training (FSDP, scaling, SFT, "
    "RL) and inference.",
    no_args_is_help=True,
)
