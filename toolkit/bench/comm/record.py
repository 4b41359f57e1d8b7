"""Runs <-> ``pctk.result/v1`` records (metrics layout documented in :mod:`toolkit.bench.comm`)."""

from __future__ import annotations

from typing import Any

from benchmarks.record import new_record
from toolkit.bench.comm.model import CollectiveRun
from toolkit.bench.comm.verdict import Expectation, Verdict, judge, lookup_expectation, worst
from toolkit.errors import PctkError


def judge_runs(runs: list[CollectiveRun], *, instance_type: str | None = None,
               nodes: int | None = None, expectation: Expectation | None = None,
               expected_ranks: int | None = None) -> list[Verdict]:
    """A verdict per run; the expectation comes from the catalog unless given.

    ``expected_ranks``: how many ranks were launched (a run on fewer measured less than
    asked, one on N lone processes nothing)."""
    verdicts = []
    for run in runs:
        n = nodes or len(run.hosts) or None
        top = run.largest()
        exp = expectation or lookup_expectation(instance_type, n, run.collective or "all_reduce",
                                                top.size_bytes if top else None,
                                                algorithm=run.algorithm)
        verdicts.append(judge(run, exp, nodes=n, expected_ranks=expected_ranks))
    return verdicts


def _first(values: list[str | None]) -> str | None:
    distinct = list(dict.fromkeys(v for v in values if v))
    return ",".join(distinct) if distinct else None


def software_from_runs(runs: list[CollectiveRun]) -> dict[str, Any]:
    """The software the log says ran (not the machine that parses it)."""
    return {
        "nccl": _first([(r.nccl_version or "").split("+")[0] or None for r in runs]),
        "cuda": _first([r.cuda_version for r in runs]),
        "cuda_driver": _first([r.cuda_driver for r in runs]),
        "nccl_tests": _first([r.nccl_tests_version for r in runs]),
        "torch": None, "python": None, "aws_ofi_nccl": None, "efa": None,
        "libfabric": None, "driver": None,
        "source": "parsed log",
    }


def build_record(kind: str, runs: list[CollectiveRun], verdicts: list[Verdict], *,
                 params: dict[str, Any] | None = None, raw_logs: list[str] | None = None,
                 cluster: dict[str, Any] | None = None,
                 from_log: bool = False) -> dict[str, Any]:
    """The record; ``from_log``: the runs were parsed from a log, so software and cluster
    come from that log, not from the machine running pctk."""
    blocks = []
    for run, v in zip(runs, verdicts, strict=True):
        block = run.to_block()
        block["verdict"] = v.to_dict()
        blocks.append(block)
    reasons = [f"{r.collective or '?'}: {reason}" for r, v in zip(runs, verdicts, strict=True)
               for reason in v.reasons]
    hosts = list(dict.fromkeys(h for r in runs for h in r.hosts))
    base = {"hosts": hosts, "nodes": len(hosts) or None}
    base.update({k: v for k, v in (cluster or {}).items() if v is not None})
    return new_record(kind, params=params, metrics={"collectives": blocks},
                      status=worst([v.status for v in verdicts]), reasons=reasons,
                      cluster=base, raw_logs=raw_logs,
                      software=software_from_runs(runs) if from_log else None,
                      describe_this_machine=not from_log)


def runs_from_record(rec: dict[str, Any]) -> list[CollectiveRun]:
    blocks = rec.get("metrics", {}).get("collectives")
    if not isinstance(blocks, list):
        raise PctkError(f"record {rec.get('id')} has no metrics.collectives",
                        "pass an nccl-tests or collectives record")
    return [CollectiveRun.from_block(b) for b in blocks]
