"""The collectives sweep, nccl-tests, the storage and the inference benchmarks from Python,
as ``pctk bench collectives | nccl run | storage | inference`` run them: the same options by
the same names and defaults, the cluster in use found by itself, a progress line while the
jobs run (``progress=False``: none), the record stored in the results database (``store``,
``db``) and an interrupt that names the jobs left running
(:class:`toolkit.submit.longrun.StoppedWaiting`). The commands call these and print.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit import catalog
from toolkit.bench.collectives import driver as sweep
from toolkit.bench.inference import driver as inference
from toolkit.bench.inference import serve
from toolkit.bench.nccl import driver as nccl
from toolkit.bench.storage import driver as storage
from toolkit.errors import PctkError
from toolkit.progress import ProgressLines
from toolkit.results.ingest import Ingested, store_finished_run
from toolkit.submit.cluster import use_running_twin
from toolkit.submit.longrun import long_run

DEFAULT_OPS = sweep.SweepJob.ops  # the sweep's default collectives


@dataclass(frozen=True)
class BenchResult:
    """A finished benchmark: its judged record, where it was written, whether the verdict
    failed, what was stored, and the driver's own result (``detail``: the runs and verdicts
    of a sweep, the storage or inference run)."""

    record: dict[str, Any] | None  # None: an inference job not waited for
    record_path: Path | None
    failed: bool
    detail: Any
    stored: list[Ingested] = field(default_factory=list)
    job_id: str | None = None


def _store(path: Path | None, store: bool, db: Path | str | None) -> list[Ingested]:
    if not store or path is None:
        return []
    item = store_finished_run(path, None if db is None else Path(db))
    return [item] if item is not None else []


def bench_collectives(
    nodes: int = 2, *, partition: str | None = None, ntasks_per_node: int = 1,
    gpus_per_node: int | None = None, ops: str = DEFAULT_OPS, min_bytes: str = "1K",
    max_bytes: str = "64M", iters: int = 20, warmup: int = 5, emulate_missing: bool = False,
    run_dir: Path | str | None = None, timeout: float = 1800,
    instance_type: str | None = None, progress: bool = True, store: bool = True,
    db: Path | str | None = None,
    on_submit: Callable[[str, list[str]], None] | None = None,
) -> BenchResult:
    """``pctk bench collectives``: the torch.distributed sweep of ``ops`` over ``nodes``
    nodes, judged against the catalog's busbw for ``instance_type``. ``on_submit(job_id,
    sbatch command)`` once the job is queued."""
    job = sweep.SweepJob(nodes=nodes, partition=partition, ntasks_per_node=ntasks_per_node,
                         gpus_per_node=gpus_per_node, ops=ops, min_bytes=min_bytes,
                         max_bytes=max_bytes, iters=iters, warmup=warmup,
                         emulate_missing=emulate_missing)
    lines: dict[str, ProgressLines] = {}
    with long_run(), ExitStack() as waiting:
        def submitted(job_id: str, cmd: list[str]) -> None:
            if on_submit is not None:
                on_submit(job_id, cmd)
            lines[job_id] = waiting.enter_context(
                ProgressLines("bench collectives", quiet=not progress))

        def state(job_id: str, value: str) -> None:
            if job_id in lines:
                lines[job_id].update(f"job {job_id}: {value}")

        res = sweep.run_sweep(job, run_dir=None if run_dir is None else Path(run_dir),
                              timeout=timeout, instance_type=instance_type,
                              on_submit=submitted, on_state=state)
    return BenchResult(res.record, res.record_path, res.failed, res,
                       _store(res.record_path, store, db), next(iter(lines), None))


def bench_nccl(
    collectives: list[str] | tuple[str, ...] = ("all_reduce",), *, nodes: int = 1,
    gpus_per_node: int = 8, launcher: str = "srun", partition: str | None = None,
    min_bytes: str = "8", max_bytes: str = "16G", iters: int = 20, warmup: int = 5,
    nccl_tests_dir: str | None = None, env: dict[str, str] | None = None,
    run_dir: Path | str | None = None, instance_type: str | None = None,
    timeout: float = 1800, progress: bool = True, store: bool = True,
    db: Path | str | None = None,
    on_launch: Callable[[str, list[str]], None] | None = None,
) -> BenchResult:
    """``pctk bench nccl run``: one nccl-tests binary per collective (``all_reduce`` runs
    ``all_reduce_perf``) with the EFA environment, the logs kept and judged. ``env``: more
    variables for the binaries (``NCCL_ALGO``...). ``on_launch(name, command)`` as each
    binary starts."""
    lines = ExitStack()
    current: list[ProgressLines] = []

    def launched(name: str, cmd: list[str]) -> None:
        lines.close()  # the previous binary's line
        if on_launch is not None:
            on_launch(name, cmd)
        current[:] = [lines.enter_context(ProgressLines(f"bench nccl run {name}",
                                                        quiet=not progress))]

    with long_run(), lines:
        res = nccl.run_tests(
            list(collectives), nodes=nodes, gpus_per_node=gpus_per_node, launcher=launcher,
            partition=partition, min_bytes=min_bytes, max_bytes=max_bytes, iters=iters,
            warmup=warmup, nccl_tests_dir=nccl_tests_dir, env=dict(env or {}),
            run_dir=None if run_dir is None else Path(run_dir), instance_type=instance_type,
            timeout=timeout, on_launch=launched,
            on_sizes=lambda name, rows: current[0].update(f"{rows} sizes done")
            if current else None)
    return BenchResult(res.record, res.record_path, res.failed, res,
                       _store(res.record_path, store, db))


def bench_storage(
    nodes: int = 1, *, target: str | None = None, config: str | Path | None = None,
    instance_type: str | None = None, jobs_per_node: int = 8, size_mib: int = 1024,
    ckpt_mib: int = 1024, rand_seconds: int = 10, meta_files: int = 1000,
    phases: str = "seq,rand,shared,ckpt,meta", block_sizes: str = "1M", direct: bool = True,
    partition: str | None = None, time_limit: str | None = None, share_timeout: float = 30.0,
    run_dir: Path | str | None = None, timeout: float | None = None, progress: bool = True,
    store: bool = True, db: Path | str | None = None,
    on_state: Callable[[str], None] | None = None,
) -> BenchResult:
    """``pctk bench storage``: fio from ``nodes`` nodes at once on the shared file system
    (``target``, default the config's first SharedStorage MountDir), judged against the
    config's provisioned throughput. ``on_state(job state)`` as the job moves."""
    job = storage.StorageJob(
        nodes=nodes, target=target or "",
        run_dir=(Path(run_dir) if run_dir else storage.default_run_dir()).resolve(),
        jobs_per_node=jobs_per_node, size_mib=size_mib, ckpt_mib=ckpt_mib,
        rand_seconds=rand_seconds, meta_files=meta_files, phases=phases, partition=partition,
        time_limit=time_limit, share_timeout=share_timeout, direct=direct,
        block_sizes=block_sizes)
    with long_run(), ProgressLines("bench storage", quiet=not progress) as line:
        def state(value: str) -> None:
            line.update(f"job {value}")
            if on_state is not None:
                on_state(value)

        res = storage.bench_storage(job, config_path=config, instance_type=instance_type,
                                    timeout=timeout, on_state=state)
    stored = _store(res.record_path, store, db)
    res.stored = stored[0].id if stored else None
    return BenchResult(res.record, res.record_path, res.failed, res, stored)


InferenceJobs = inference.InferenceJob | serve.ServeJob
SERVE_WAITS = "--mode serve waits for the load and then stops the server"


def inference_job(
    mode: str = "offline", *, model: str | None = None, nodes: int = 1,
    prompt_lens: str | None = None, batch_sizes: str | None = None,
    context: int | None = None, decode_tokens: int | None = None, samples: int = 0,
    output_len: int | None = None, partition: str | None = None,
    instance_type: str | None = None, gpus_per_node: int | None = None,
    tensor_parallel: int | None = None, device: str = "auto", cuda_graph: bool = False,
    mem_bw_tbps: float | None = None, peak_tflops: float | None = None,
    checkpoint: Path | str | None = None, backend: str = "auto",
    load_partition: str | None = None, concurrencies: str | None = None,
    requests: int | None = None, prompt_tokens: int | None = None,
    output_tokens: int | None = None, slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None, server_timeout: float = 900,
    time_limit: str | None = None, run_dir: Path | str | None = None, wait: bool = True,
) -> InferenceJobs:
    """The job(s) ``pctk bench inference`` would submit with these options, validated;
    nothing is submitted. ``mode``: ``offline`` (the engine on each node) or ``serve`` (an
    OpenAI-compatible server job and a load-generator job, which is always waited for:
    ``wait=False`` is refused here, before anything is planned)."""
    use_running_twin()
    model = model or inference.default_model(partition, instance_type, gpus_per_node)
    where = None if run_dir is None else Path(run_dir)
    if mode == "serve":
        offline_only = {"--prompt-lens": prompt_lens, "--batch-sizes": batch_sizes,
                        "--context": context, "--decode-tokens": decode_tokens,
                        "--samples": samples or None, "--output-len": output_len,
                        "--cuda-graph": cuda_graph or None, "--mem-bw-tbps": mem_bw_tbps,
                        "--tensor-parallel": tensor_parallel, "--peak-tflops": peak_tflops}
        if given := [k for k, v in offline_only.items() if v is not None]:
            raise PctkError(f"{', '.join(given)}: offline-mode option(s), not for "
                            "--mode serve", "drop them, or use --mode offline")
        if nodes != 1:
            raise PctkError("--mode serve runs one server node and one load node",
                            "drop --nodes")
        if not wait:
            raise PctkError(SERVE_WAITS, "drop --no-wait")
        inst = catalog.get(instance_type) if instance_type else None
        return serve.plan(model=model, checkpoint=None if checkpoint is None else Path(checkpoint),
                          backend=backend, partition=partition, load_partition=load_partition,
                          gpus_per_node=gpus_per_node, device=device,
                          concurrencies=concurrencies, requests=requests,
                          prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                          slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms,
                          server_timeout=server_timeout, time_limit=time_limit, run_dir=where,
                          instance_gpus=inst.gpus if inst else 0,
                          price_usd_per_hour=inst.price_usd_per_hour if inst else None)
    serve_only = {"--checkpoint": checkpoint, "--load-partition": load_partition,
                  "--concurrencies": concurrencies, "--requests": requests,
                  "--prompt-tokens": prompt_tokens, "--output-tokens": output_tokens,
                  "--slo-ttft-ms": slo_ttft_ms, "--slo-tpot-ms": slo_tpot_ms,
                  "--backend": None if backend == "auto" else backend}
    if mode == "offline" and (given := [k for k, v in serve_only.items() if v is not None]):
        raise PctkError(f"{', '.join(given)}: serve-mode option(s), not for --mode offline",
                        "add --mode serve")
    return inference.plan(mode=mode, model=model, nodes=nodes, prompt_lens=prompt_lens,
                          batch_sizes=batch_sizes, context=context, decode_tokens=decode_tokens,
                          samples=samples, output_len=output_len, partition=partition,
                          instance_type=instance_type, gpus_per_node=gpus_per_node,
                          device=device, cuda_graph=cuda_graph, mem_bw_tbps=mem_bw_tbps,
                          tensor_parallel=tensor_parallel, peak_tflops=peak_tflops,
                          time_limit=time_limit, run_dir=where)


def run_inference(job: InferenceJobs, *, wait: bool = True, timeout: float | None = None,
                  progress: bool = True, store: bool = True, db: Path | str | None = None
                  ) -> BenchResult:
    """Submit ``job``; with ``wait``, wait and store its record (``store``). A serve job
    always waits: it stops its server once the load has run."""
    if isinstance(job, serve.ServeJob):
        if not wait:
            raise PctkError(SERVE_WAITS, "drop --no-wait")
        with long_run():
            sdone = serve.run(job, timeout=timeout, quiet=not progress)
        return BenchResult(sdone.record, job.record_path, bool(sdone.failed), sdone,
                           _store(job.record_path if sdone.record else None, store, db),
                           sdone.job_id)
    with long_run():
        done = inference.run(job, wait_for_it=wait, timeout=timeout, quiet=not progress)
    finished = done.record is not None
    return BenchResult(done.record, job.record_path, finished and done.failed, done,
                       _store(job.record_path if finished else None, store, db), done.job_id)


def bench_inference(mode: str = "offline", *, wait: bool = True, timeout: float | None = None,
                    progress: bool = True, store: bool = True, db: Path | str | None = None,
                    **options: Any) -> BenchResult:
    """``pctk bench inference`` from Python: :func:`inference_job` with ``options``, then
    :func:`run_inference`."""
    return run_inference(inference_job(mode, wait=wait, **options), wait=wait, timeout=timeout,
                         progress=progress, store=store, db=db)
