"""``pctk bench inference``: parse the flags, call the driver, print the record."""

from __future__ import annotations

from pathlib import Path

import typer

from toolkit.api import benchmarks as api
from toolkit.bench.inference import driver, serve
from toolkit.cliopts import DbOption, StoreOption
from toolkit.cliout import JsonOption
from toolkit.commands import jobend
from toolkit.submit.longrun import long_command


def inference_command(
    mode: str = typer.Option(
        "offline", help="offline: the engine benchmark on each node; serve: an "
        "OpenAI-compatible server job driven by a load-generator job on another node."),
    model: str | None = typer.Option(
        None, help="Shape preset: tiny, small, 1b, 8b, 70b [1b on GPU nodes, tiny on nodes "
        "without GPUs (the partition's nodes as Slurm has them)]."),
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
        None, help="GPUs to request per node (GRES); 0 for CPU partitions [with a GPU "
        "--instance-type: the tensor-parallel size (serve: all its GPUs), else 0]."),
    tensor_parallel: int | None = typer.Option(
        None, "--tensor-parallel", "--tp", min=1, help="offline: GPUs of a node that share "
        "one model (one process each; heads, hidden units and vocabulary split between them) "
        "[1; with a GPU --instance-type the fewest whose memory holds the weights: 70b on "
        "p5.48xlarge 4, on p5e 2]."),
    device: str = typer.Option("auto", help="auto, cuda or cpu."),
    cuda_graph: bool = typer.Option(
        False, "--cuda-graph", help="Replay each decode step from a CUDA graph (GPU only)."),
    mem_bw_tbps: float | None = typer.Option(
        None, help="GPU memory bandwidth, TB/s (default: from --instance-type)."),
    peak_tflops: float | None = typer.Option(
        None, help="GPU dense bf16 peak, TFLOP/s (default: from --instance-type)."),
    checkpoint: Path | None = typer.Option(
        None, help="serve: the user's checkpoint folder (save_pretrained: config, weights, "
        "tokenizer) instead of a random-weight --model shape."),
    backend: str = typer.Option(
        "auto", help="serve: vllm (GPU nodes, tensor parallel = GPUs per node) or "
        "transformers (transformers serve, CPU nodes) [auto: by --gpus-per-node]."),
    load_partition: str | None = typer.Option(
        None, help="serve: partition of the load-generator job [--partition]."),
    concurrencies: str | None = typer.Option(
        None, help="serve: requests in flight at each level [1,4,16,64; CPU 1,2]."),
    requests: int | None = typer.Option(
        None, min=0, help="serve: requests per level [GPU 0 = 4 x concurrency, at least 8; "
        "CPU 4]."),
    prompt_tokens: int | None = typer.Option(
        None, min=1, help="serve: prompt length in tokens [512; CPU 32]."),
    output_tokens: int | None = typer.Option(
        None, min=1, help="serve: output tokens per request [128; CPU 16]."),
    slo_ttft_ms: float | None = typer.Option(
        None, min=0, help="serve: goodput SLO on time to first token, ms [500; CPU 2000]."),
    slo_tpot_ms: float | None = typer.Option(
        None, min=0, help="serve: goodput SLO on time per output token, ms [50; CPU 200]."),
    server_timeout: float = typer.Option(
        900, min=1, help="serve: seconds the server may take to answer after it starts."),
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
    """Inference benchmarks through Slurm: offline (prefill, decode, TTFT/TPOT, roofline,
    test-time compute cost) or serve (an OpenAI-compatible server under a load ladder)."""
    with long_command():
        job = api.inference_job(
            mode, model=model, nodes=nodes, prompt_lens=prompt_lens, batch_sizes=batch_sizes,
            context=context, decode_tokens=decode_tokens, samples=samples,
            output_len=output_len, partition=partition, instance_type=instance_type,
            gpus_per_node=gpus_per_node, tensor_parallel=tensor_parallel, device=device,
            cuda_graph=cuda_graph, mem_bw_tbps=mem_bw_tbps, peak_tflops=peak_tflops,
            checkpoint=checkpoint, backend=backend, load_partition=load_partition,
            concurrencies=concurrencies, requests=requests, prompt_tokens=prompt_tokens,
            output_tokens=output_tokens, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms,
            server_timeout=server_timeout, time_limit=time_limit, run_dir=run_dir,
            wait=wait_)
        serving = isinstance(job, serve.ServeJob)
        if dry_run and isinstance(job, serve.ServeJob):
            typer.echo(serve.render_server(job), nl=False)
            typer.echo(f"# ---- {job.run_dir / 'load.sbatch'} (submitted with "
                       "--exclude=<the server's node>)")
            typer.echo(serve.render_load(job), nl=False)
            return
        if dry_run and isinstance(job, driver.InferenceJob):
            typer.echo(driver.render_sbatch(job), nl=False)
            return
        # stored by jobend.finish, after the summary, as every one-job benchmark
        done = api.run_inference(job, wait=wait_, timeout=timeout, progress=not as_json,
                                 store=False).detail
        jobend.finish(job, done, title="pctk bench inference" + (" --mode serve" if serving
                                                                  else ""),
                      rows=serve.summary_rows if serving else driver.summary_rows,
                      as_json=as_json, store=store, db=db)
