"""``pctk bench inference``: parse the flags, call the driver, print the record."""

from __future__ import annotations

from pathlib import Path

import typer

from toolkit.bench import job_cli
from toolkit.bench.inference import driver
from toolkit.cliopts import DbOption, StoreOption
from toolkit.cliout import JsonOption
from toolkit.submit.longrun import long_command


def inference_command(
    mode: str = typer.Option("offline", help="offline: the engine benchmark on each node."),
    model: str = typer.Option("1b", help="Shape preset: tiny, small, 1b, 8b, 70b."),
    nodes: int = typer.Option(1, "--nodes", "-N", min=1,
                              help="Nodes, each measured on its own."),
    prompt_lens: str | None = typer.Option(
        None, help="Prefill prompt lengths [1b and up 128,512,2048; tiny 32,128; small "
        "64,256]."),
    batch_sizes: str | None = typer.Option(
        None, help="Decode batch sizes [1b and up 1,8,32,64; tiny 1,4; small 1,8]."),
    context: int | None = typer.Option(
        None, min=1, help="Prompt tokens cached before the decode steps [512; tiny 64; small "
        "128]."),
    decode_tokens: int | None = typer.Option(
        None, min=1, help="Decode steps measured per batch size [64; tiny 16; small 32]."),
    samples: int = typer.Option(0, min=0,
                                help="Test-time compute: samples of one prompt (0: skip)."),
    output_len: int | None = typer.Option(
        None, min=1, help="Tokens per sample in the test-time run [1024; tiny 128; small "
        "256]."),
    partition: str | None = typer.Option(None, "--partition", "-p", help="Slurm partition."),
    instance_type: str | None = typer.Option(
        None, help="Instance type in the catalog: GPU bandwidth and peak for the roofline, "
        "GPUs and on-demand price for the cost per million tokens."),
    gpus_per_node: int | None = typer.Option(
        None, help="GPUs to request per node (GRES); 0 for CPU partitions [1 with a GPU "
        "--instance-type, else 0]."),
    device: str = typer.Option("auto", help="auto, cuda or cpu."),
    cuda_graph: bool = typer.Option(
        False, "--cuda-graph", help="Replay each decode step from a CUDA graph (GPU only)."),
    mem_bw_tbps: float | None = typer.Option(
        None, help="GPU memory bandwidth, TB/s (default: from --instance-type)."),
    peak_tflops: float | None = typer.Option(
        None, help="GPU dense bf16 peak, TFLOP/s (default: from --instance-type)."),
    time_limit: str | None = typer.Option(None, "--time", help="Slurm time limit."),
    run_dir: Path | None = typer.Option(
        None, help="Shared folder for script, logs, record "
        "[<state home>/runs/inference-MODEL-TIME]."),
    wait_: bool = typer.Option(True, "--wait/--no-wait", help="Wait for the job and report."),
    timeout: float | None = typer.Option(None, help="Give up waiting after this many seconds."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the batch script only."),
    as_json: bool = JsonOption,
    store: bool = StoreOption,
    db: Path | None = DbOption,
) -> None:
    """Offline inference benchmark (prefill, decode, TTFT/TPOT, roofline, test-time compute
    cost) through Slurm."""
    with long_command():
        job = driver.plan(mode=mode, model=model, nodes=nodes, prompt_lens=prompt_lens,
                          batch_sizes=batch_sizes, context=context, decode_tokens=decode_tokens,
                          samples=samples, output_len=output_len, partition=partition,
                          instance_type=instance_type, gpus_per_node=gpus_per_node,
                          device=device, cuda_graph=cuda_graph, mem_bw_tbps=mem_bw_tbps,
                          peak_tflops=peak_tflops,
                          time_limit=time_limit, run_dir=run_dir)
        if dry_run:
            typer.echo(driver.render_sbatch(job), nl=False)
            return
        done = driver.run(job, wait_for_it=wait_, timeout=timeout, quiet=as_json)
        job_cli.finish(job, done, title="pctk bench inference", rows=driver.summary_rows,
                       as_json=as_json, store=store, db=db)
