"""Find the slow node: a pairwise bandwidth sweep that resolves slow pairs to nodes.

One degraded node drags every collective to its speed, and a whole-cluster figure cannot
say which. The sweep pairs the nodes (1-2, 3-4, ...) and runs a two-node bandwidth test on
every pair at once (round 1). A pair below ``threshold`` x the median of the other pairs is
slow; both of its nodes become suspects, and so does a node whose pair produced no figure.
Each later round pairs every suspect with a node already measured fast (a known-good
partner), all at once, so one round resolves as many suspects as there are good partners: a
suspect that runs fast with a good partner was only paired with a slow node; one that is
slow (or fails) with ``confirm`` (2) different good partners in turn is slow itself. Retests
are judged against control pairs of good nodes run in the same round (the same load on a
shared machine), so a noisy retest is not taken for a slow node. With s slow nodes among N
the sweep takes 1 + confirm rounds while good partners suffice (3 for one slow node at any
N; more when 2s approaches N/2), never more than ``max_rounds`` (default 1 + ceil(log2 N));
suspects still unresolved then are reported UNRESOLVED, not blamed.

Verdicts: each node's figure is the best bandwidth it reached in any pair (a good node
paired with a slow one is judged by its fast retest); the report sets it against the
median of those figures. SLOW: slow with two known-good partners. FAIL: its pair jobs did
not start or produced no figure, with two good partners, or Slurm has the node down (before
the sweep, or set down, drained or failed while its pair waited to start: that pair is
cancelled at once rather than left to the round's timeout, and the node is not retested).
Only SLOW nodes are drained, with ``pctk: slow-node: <figure> vs median <figure>``; a
sweep that finds more than half the nodes slow drains none (the reference itself is then
in doubt).

The test is pluggable: ``measure(round, pairs)`` returns one :class:`PairResult` per pair.
:class:`SlurmPairs` submits one two-node job per pair (torch collectives over gloo on CPU
nodes and the twin; nccl-tests on GPU nodes) and waits for all of them, cancelling any job
still pending or running at the round's timeout (its pair then FAILs instead of hanging).
"""

from __future__ import annotations

import json
import math
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from benchmarks.distenv import LAUNCHER_VARIABLES
from toolkit import slurm
from toolkit.bench.nccl.parse import parse_nccl_file
from toolkit.bench.nccl.runner import LaunchSpec, build_command, find_binary
from toolkit.cliout import console as cli_console
from toolkit.errors import PctkError
from toolkit.health import slurmops
from toolkit.health.inventory import (
    HealthInputError,
    SlurmNode,
    not_swept,
    read_nodes,
    select_nodes,
)
from toolkit.paths import code_root
from toolkit.submit.jobspec import JobSpec, sbatch_options

OK, SLOW, FAIL, UNRESOLVED = "OK", "SLOW", "FAIL", "UNRESOLVED"
DRAIN_PREFIX = "pctk: slow-node:"


@dataclass(frozen=True)
class PairResult:
    round: int
    nodes: tuple[str, str]
    gbps: float | None  # None: no figure (did not start, failed, timed out)
    error: str | None = None
    job_id: str | None = None
    # nodes Slurm would not start it on (down, drained, failed) while the pair waited to
    # start: node -> Slurm's state (reason)
    lost: dict[str, str] = field(default_factory=dict)


@dataclass
class NodeVerdict:
    node: str
    verdict: str
    gbps: float | None
    ratio: float | None  # gbps / median
    evidence: str


@dataclass
class SweepResult:
    nodes: list[str]
    threshold: float
    rounds: int
    max_rounds: int
    median_gbps: float | None
    pairs: list[PairResult]
    verdicts: list[NodeVerdict]
    drained: list[str] = field(default_factory=list)
    drain_refused: str | None = None
    wall_s: float = 0.0
    method: str = ""
    # left out, no verdict (toolkit.health.inventory.not_swept: powered-down dynamic nodes)
    skipped: dict[str, str] = field(default_factory=dict)
    job_ids: list[str] = field(default_factory=list)  # the pair jobs, in submission order
    instance_type: str | None = None  # the nodes' (Slurm feature), when they share one
    partition: str | None = None  # the partition the pair jobs ran in

    def verdict_of(self, node: str) -> NodeVerdict:
        return next(v for v in self.verdicts if v.node == node)

    @property
    def blamed(self) -> list[str]:
        return [v.node for v in self.verdicts if v.verdict in (SLOW, FAIL)]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "slow-nodes", "method": self.method, "nodes": self.nodes,
            "threshold": self.threshold, "rounds": self.rounds, "max_rounds": self.max_rounds,
            "median_gbps": self.median_gbps, "wall_s": round(self.wall_s, 2),
            "pairs": [{**asdict(p), "nodes": list(p.nodes)} for p in self.pairs],
            "verdicts": [asdict(v) for v in self.verdicts],
            "blamed": self.blamed, "drained": self.drained, "drain_refused": self.drain_refused,
            "skipped": self.skipped,
        }


Measure = Callable[[int, list[tuple[str, str]]], list[PairResult]]


def default_max_rounds(n: int) -> int:
    return 1 + max(1, math.ceil(math.log2(max(2, n))))


def fmt_gbps(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g} GB/s"


def drain_reason(v: NodeVerdict, median: float | None) -> str:
    return f"{DRAIN_PREFIX} {fmt_gbps(v.gbps)} vs median {fmt_gbps(median)}"


def run_sweep(nodes: Sequence[str], measure: Measure, *, threshold: float = 0.5,
              max_rounds: int | None = None, down: dict[str, str] | None = None,
              confirm: int = 2, progress: Callable[[str], None] = lambda _: None) -> SweepResult:
    """Pair, measure, re-pair suspects with good nodes; judge each node (no Slurm here)."""
    if not 0 < threshold < 1:
        raise PctkError(f"threshold {threshold} must lie between 0 and 1")
    t0 = time.monotonic()
    down = dict(down or {})
    live = [n for n in dict.fromkeys(nodes) if n not in down]
    if len(live) < 2:
        raise PctkError(f"a pairwise sweep needs at least 2 usable nodes (have {len(live)}; "
                        f"set aside: {len(down)} down)",
                        "name more nodes with --nodes or --partition")
    limit = max_rounds or default_max_rounds(len(live))
    pairs: list[PairResult] = []
    good: set[str] = set()
    slow_pairs: list[PairResult] = []
    # a node Slurm set down or drained while its pair waited: FAIL now, no retest
    lost: dict[str, PairResult] = {}

    def note_lost(results: list[PairResult]) -> None:
        for r in results:
            for n in r.lost:
                lost.setdefault(n, r)
                good.discard(n)

    def median_pair(without: PairResult | None = None) -> float | None:
        # round 1 only: each node once; retests (mostly of slow nodes) would drag it down.
        # A pair is judged against the median of the *other* pairs: with two pairs the median
        # of both is their mean, and a pair 2.5x slower than the other passed at 0.53 x it
        figs = [p.gbps for p in pairs if p.gbps is not None and p.round == 1
                and p is not without]
        return statistics.median(figs) if figs else None

    def is_fast(p: PairResult, ref: float | None) -> bool:
        return p.gbps is not None and ref is not None and p.gbps >= threshold * ref

    first = [(live[i], live[i + 1]) for i in range(0, len(live) - 1, 2)]
    progress(f"round 1: {len(first)} pairs at once")
    pairs += measure(1, first)
    note_lost(pairs)
    ref = median_pair()
    pending: list[str] = [live[-1]] if len(live) % 2 else []
    for p in pairs:
        # one pair alone (two nodes) has no other to be judged against
        if is_fast(p, median_pair(without=p) if len(pairs) > 1 else ref):
            good.update(p.nodes)
        else:
            slow_pairs.append(p)
            pending += [n for n in p.nodes if n not in lost]
    # from here on the reference is what the good pairs reached: the slow pairs' figures
    # would pull it down to where a slow retest passes
    fast = [p.gbps for p in pairs if p not in slow_pairs and p.gbps is not None]
    ref = statistics.median(fast) if fast else ref
    resolved: dict[str, tuple[str, list[PairResult]]] = {}  # node -> (SLOW|FAIL, evidence)
    strikes: dict[str, list[PairResult]] = {}  # slow or failed with a known-good partner
    rounds = 1
    while pending and rounds < limit and good:
        rounds += 1
        free = sorted(good)
        # two good nodes stay free for a control pair when there are three or more: a
        # suspect is judged against pairs measured at the same moment, never against round 1
        # alone (on a loaded machine a later round may run at a fraction of round 1's speed)
        reserve = 2 if len(free) >= 3 else 0
        batch: list[tuple[str, str]] = []
        for s in pending:
            if len(free) - 1 < reserve:
                break  # the other suspects wait for the next round
            # a confirmation takes another partner than the first strike's
            used = {x for p in strikes.get(s, []) for x in p.nodes}
            g = next((x for x in free if x not in used), None)
            if g is not None:
                free.remove(g)
                batch.append((s, g))
        if not batch:
            break
        # control pairs of good nodes, run with the retests: the same load, the reference
        controls = [(free[i], free[i + 1]) for i in range(0, len(free) - 1, 2)][:len(batch)]
        progress(f"round {rounds}: {len(batch)} suspect(s) with known-good partners, "
                 f"{len(controls)} control pair(s)")
        results = measure(rounds, batch + controls)
        pairs += results
        note_lost(results)
        ctrl = [r.gbps for r in results[len(batch):] if r.gbps is not None]
        retests = results[:len(batch)]
        measured = [r for r in retests if r.gbps is not None]
        best = max(measured, key=lambda r: r.gbps or 0.0) if len(measured) >= 2 else None
        if not ctrl and best is not None and is_fast(best, ref) and \
                any(not is_fast(r, best.gbps) for r in retests):
            # no room for a control pair (four nodes: both good nodes are partners), but one
            # retest ran fast beside a slow one: the same moment, the same load, a known-good
            # node in each; the fast one is the round's reference (two slow retests, or none
            # slow against the best, fall through to the control measured after)
            ctrl = [best.gbps or 0.0]
        if not ctrl and any(not is_fast(r, ref) or r.gbps is None for r in retests):
            # no control pair could run beside the retests (two good nodes, both partners):
            # measure one right after, before anyone is blamed on round 1's figure
            partners = sorted({g for _, g in batch if g in good})[:2]
            if len(partners) == 2:
                progress(f"round {rounds}: a control pair re-measured after the retests")
                again = measure(rounds, [(partners[0], partners[1])])
                pairs += again
                note_lost(again)
                ctrl = [r.gbps for r in again if r.gbps is not None]
        ref_now = statistics.median(ctrl) if ctrl else None
        for (s, _), r in zip(batch, retests, strict=True):
            if s in lost:
                pending.remove(s)
                continue
            if is_fast(r, ref_now if ref_now is not None else ref):
                good.add(s)
                strikes.pop(s, None)
                pending.remove(s)
                continue
            if r.lost or ref_now is None:
                # the good partner was lost, not s; or no pair of good nodes gave a figure
                # this round to judge by: no strike, s waits for another round
                continue
            strikes.setdefault(s, []).append(r)
            if len(strikes[s]) >= confirm:
                resolved[s] = (FAIL if r.gbps is None else SLOW, strikes[s])
                pending.remove(s)
    return _judge(live, down, pairs, resolved, pending, lost, threshold, rounds, limit,
                  time.monotonic() - t0)


def _judge(live: list[str], down: dict[str, str], pairs: list[PairResult],
           resolved: dict[str, tuple[str, list[PairResult]]], pending: list[str],
           lost: dict[str, PairResult], threshold: float,
           rounds: int, limit: int, wall: float) -> SweepResult:
    best: dict[str, float] = {}
    for p in pairs:
        if p.gbps is None:
            continue
        for n in p.nodes:
            best[n] = max(best.get(n, 0.0), p.gbps)
    median = statistics.median(best.values()) if best else None
    verdicts: list[NodeVerdict] = []
    for n in live:
        fig = best.get(n)
        ratio = fig / median if fig is not None and median else None
        if n in lost:
            ev = lost[n]
            verdicts.append(NodeVerdict(n, FAIL, fig, ratio,
                                        f"Slurm: {ev.lost[n]}, while its round {ev.round} "
                                        f"pair with {next(x for x in ev.nodes if x != n)} "
                                        "waited to start"))
        elif n in resolved:
            kind, evidence = resolved[n]
            why = "; ".join(
                (f"{fmt_gbps(ev.gbps)} with known-good " if ev.gbps is not None else
                 f"no figure ({ev.error}) with known-good ")
                + f"{next(x for x in ev.nodes if x != n)} (round {ev.round})"
                for ev in evidence) + f"; median {fmt_gbps(median)}"
            verdicts.append(NodeVerdict(n, kind, fig, ratio, why))
        elif n in pending:
            verdicts.append(NodeVerdict(n, UNRESOLVED, fig, ratio,
                                        "in a slow or failed pair; no known-good partner or "
                                        f"rounds left ({rounds}/{limit})"))
        else:
            verdicts.append(NodeVerdict(n, OK, fig, ratio, f"best {fmt_gbps(fig)}"))
    for n, why in down.items():
        verdicts.append(NodeVerdict(n, FAIL, None, None, f"Slurm: {why}"))
    return SweepResult(nodes=[*live, *down], threshold=threshold, rounds=rounds,
                       max_rounds=limit, median_gbps=median, pairs=pairs, verdicts=verdicts,
                       wall_s=wall)


def to_record(result: SweepResult, *, partition: str | None = None,
              job_ids: Sequence[str] = (), raw_logs: Sequence[str] = ()) -> dict[str, Any]:
    """The sweep as a ``pctk.result/v1`` record of kind ``slow-nodes``, kept in the results
    history like every other run: PASS no node blamed, FAIL a node SLOW or FAIL, WARN a
    suspect left UNRESOLVED."""
    from benchmarks.record import new_record

    kinds = {v.verdict for v in result.verdicts}
    status = "FAIL" if kinds & {SLOW, FAIL} else "WARN" if UNRESOLVED in kinds else "PASS"
    body = result.to_json()
    return new_record(
        "slow-nodes",
        params={k: body[k] for k in ("method", "threshold", "max_rounds")},
        metrics={k: body[k] for k in ("rounds", "median_gbps", "wall_s", "pairs", "verdicts",
                                      "blamed", "drained", "drain_refused", "skipped")},
        status=status,
        reasons=[f"{v.verdict} {v.node}: {v.evidence}" for v in result.verdicts
                 if v.verdict != OK],
        cluster={"hosts": sorted(result.nodes), "nodes": len(result.nodes),
                 "partition": partition, "job_id": ",".join(job_ids) or None,
                 "instance_type": result.instance_type},
        raw_logs=list(raw_logs))


def drain_slow(result: SweepResult, drain: Callable[[str, str], None]) -> None:
    """Drain the SLOW nodes (never more than half the sweep: then the median is in doubt)."""
    slow = [v for v in result.verdicts if v.verdict == SLOW]
    if len(slow) * 2 > len(result.nodes):
        result.drain_refused = (f"{len(slow)} of {len(result.nodes)} nodes slow: the median "
                                "is no reference; nothing drained")
        return
    for v in slow:
        drain(v.node, drain_reason(v, result.median_gbps))
        result.drained.append(v.node)


# ---------------------------------------------------------------- Slurm pair jobs
@dataclass
class PairTest:
    """What one pair job runs; ``torch`` (collectives over gloo/NCCL) or ``nccl-tests``."""
    method: str = "torch"
    collective: str = "all_reduce"
    size: str = "8M"
    iters: int = 10
    warmup: int = 2
    python: str = sys.executable
    gpus_per_node: int = 8
    nccl_tests_dir: str | None = None

    def command(self, out: Path) -> str:
        if self.method == "torch":
            argv = [self.python, "-m", "benchmarks.collectives", "--ops", self.collective,
                    "--min-bytes", self.size, "--max-bytes", self.size, "--iters",
                    str(self.iters), "--warmup", str(self.warmup), "--out", str(out)]
            # a failed rank ends the pair at once rather than leaving its partner waiting.
            # The ranks find their partner from the job (benchmarks.distenv: the first node,
            # a port from the job id), not from a MASTER_ADDR/PORT left in the user's shell
            # by another run, which would send every pair to one address
            return (f"unset {' '.join(LAUNCHER_VARIABLES)}; srun --ntasks-per-node=1 "
                    "--kill-on-bad-exit=1 " + shlex.join(argv))

        spec = LaunchSpec(collective=self.collective, nodes=2, gpus_per_node=self.gpus_per_node,
                          min_bytes=self.size, max_bytes=self.size, iters=self.iters,
                          warmup=self.warmup)
        return shlex.join(build_command(spec, find_binary(self.collective,
                                                          self.nccl_tests_dir)))

    def figure(self, out: Path, log: Path) -> tuple[float | None, str | None]:
        """(bus bandwidth GB/s, error) read from the pair's record or nccl-tests log."""
        if self.method == "torch":
            try:
                blocks = json.loads(out.read_text())["metrics"]["collectives"]
                value = blocks[0].get("avg_busbw_gbps")
                return (float(value), None) if value is not None else (None, "no busbw")
            except (OSError, ValueError, KeyError, IndexError, TypeError):
                return None, _tail(log) or "no record written"

        try:
            runs = parse_nccl_file(log, collective=self.collective)
        except (OSError, PctkError) as exc:
            return None, str(exc)[:160]
        figs = [r.avg_busbw_gbps for r in runs if r.avg_busbw_gbps is not None]
        return (figs[-1], None) if figs else (None, _tail(log) or "no nccl-tests output")


def _tail(path: Path, n: int = 1) -> str:
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])[:200]


@dataclass
class SlurmPairs:
    """Runs each round's pairs as concurrent two-node Slurm jobs (toolkit/slurm.py)."""
    test: PairTest
    workdir: Path
    partition: str | None = None
    timeout: float = 300.0
    poll: float = 1.0
    node_poll: float = 5.0  # seconds between looks at the nodes of pairs still pending
    job_ids: list[str] = field(default_factory=list)

    def sbatch_argv(self, stem: str, pair: tuple[str, str], out: Path, log: Path) -> list[str]:
        """One pair job: two nodes, one task each, the test command as its --wrap. Its
        ranks rendezvous on the port benchmarks.distenv derives from the job id (below the
        ephemeral range, distinct for the round's concurrent pairs)."""
        spec = JobSpec(job_name=f"pctk-slow-{stem}", nodes=2, ntasks_per_node=1,
                       partition=self.partition, nodelist=",".join(pair),
                       time=max(2, math.ceil(self.timeout / 60) + 1), output=str(log),
                       chdir=str(code_root()), export="ALL")
        return [*sbatch_options(spec), "--wrap", self.test.command(out)]

    def __call__(self, rnd: int, pairs: list[tuple[str, str]]) -> list[PairResult]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        jobs: list[tuple[tuple[str, str], str | None, Path, Path, str | None]] = []
        for a, b in pairs:
            stem = f"r{rnd}-{a}-{b}"
            out, log = self.workdir / f"{stem}.json", self.workdir / f"{stem}.out"
            out.unlink(missing_ok=True)
            try:
                jid: str | None = slurm.sbatch(self.sbatch_argv(stem, (a, b), out, log))
                err = None
            except PctkError as exc:
                jid, err = None, exc.one_line()
            if jid:
                self.job_ids.append(jid)
            jobs.append(((a, b), jid, out, log, err))
        pair_of = {jid: nodes for nodes, jid, *_ in jobs if jid}
        lost: dict[str, dict[str, str]] = {}  # job id -> {node: Slurm's state (reason)}
        looked = [-math.inf]

        def look(states: dict[str, str]) -> None:
            """A pair waiting on a node Slurm will not start jobs on (down, drained, failed)
            would only wait for the timeout: cancel it now and say which node and why."""
            waiting = [j for j, st in states.items() if st.startswith("PENDING") and j not in lost]
            if not waiting or time.monotonic() - looked[0] < self.node_poll:
                return
            looked[0] = time.monotonic()
            try:
                nodes = read_nodes()
            except PctkError:
                return  # sinfo failed this time: the round's timeout still bounds the wait
            for j in waiting:
                unusable = {n: f"{nodes[n].state} ({nodes[n].reason or 'no reason'})"
                            for n in pair_of[j]
                            if n in nodes and nodes[n].takes_no_jobs}
                if unusable:
                    lost[j] = unusable
                    slurmops.cancel(j)

        states, timed_out = slurm.wait_jobs(pair_of, timeout=self.timeout, poll=self.poll,
                                            on_poll=look)
        for jid in pair_of:
            st = states.get(jid, "UNKNOWN")
            if jid in lost:
                states[jid] = "not started: " + ", ".join(
                    f"{n} is {why}" for n, why in lost[jid].items()) + " in Slurm: cancelled"
            elif timed_out and not slurm.has_ended(st):
                slurmops.cancel(jid)
                states[jid] = f"no result within {self.timeout:g} s (was {st}): cancelled"
            else:
                states[jid] = st
        results = []
        for nodes, jid, out, log, err in jobs:
            if jid is None:
                results.append(PairResult(rnd, nodes, None, err, None))
                continue
            gbps, why = self.test.figure(out, log)
            st = states[jid]
            if gbps is not None and st.startswith("COMPLETED"):
                results.append(PairResult(rnd, nodes, gbps, None, jid))
            else:
                results.append(PairResult(rnd, nodes, None, f"{st}: {why or ''}".strip(": "),
                                          jid, lost.get(jid, {})))
        return results


# ---------------------------------------------------------------- report
def table_rows(result: SweepResult) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the node x round table (cell: bandwidth and partner)."""
    head = ["node", *[f"round {r}" for r in range(1, result.rounds + 1)], "best", "vs median",
            "verdict"]  # a round's cell: GB/s and the partner
    rows = []
    for v in result.verdicts:
        cells = []
        for r in range(1, result.rounds + 1):
            mine = [p for p in result.pairs if p.round == r and v.node in p.nodes]
            if not mine:
                cells.append("")
                continue
            p = mine[0]
            partner = next(x for x in p.nodes if x != v.node)
            cells.append(f"{f'{p.gbps:.3g}' if p.gbps is not None else 'FAIL'} {partner}")
        ratio = f"{v.ratio:.2f}x" if v.ratio is not None else "-"
        rows.append([v.node, *cells, fmt_gbps(v.gbps), ratio, v.verdict])
    return head, rows


def print_report(result: SweepResult) -> None:
    console = cli_console()
    head, rows = table_rows(result)
    t = Table(*head, box=None, pad_edge=False)
    colour = {OK: "green", SLOW: "red", FAIL: "red", UNRESOLVED: "yellow"}
    for row in rows:
        t.add_row(*row[:-1], f"[{colour.get(row[-1], 'white')}]{row[-1]}[/]")
    console.print(t)
    console.print(f"{len(result.nodes)} nodes, {result.rounds} round(s) of pairs (at most "
                  f"{result.max_rounds}), median {fmt_gbps(result.median_gbps)}, slow below "
                  f"{result.threshold:g} x median, {result.wall_s:.1f} s", highlight=False)
    for v in result.verdicts:
        if v.verdict != OK:
            console.print(f"{v.verdict} {v.node}: {v.evidence}", highlight=False)
    if result.drained:
        console.print(f"drained: {', '.join(result.drained)}", highlight=False)
    if result.drain_refused:
        console.print(f"[yellow]{result.drain_refused}[/]")
    if result.skipped:
        console.print(f"skipped, powered down: {', '.join(result.skipped)} (dynamic nodes "
                      "not running; --include-powered-down powers them up for the sweep)",
                      highlight=False)


def exit_code(result: SweepResult) -> int:
    """pctk's rule (docs/commands.md, exit codes): 1 findings (a node SLOW, FAIL or
    UNRESOLVED), else 0; unusable input is a :class:`PctkError` (2)."""
    kinds = {v.verdict for v in result.verdicts}
    return 1 if kinds & {SLOW, FAIL, UNRESOLVED} else 0


def power_up(names: list[str], timeout: float,
             progress: Callable[[str], None]) -> dict[str, SlurmNode]:
    """Power dynamic nodes up (``scontrol update State=POWER_UP``, as a job would) and wait
    until each runs or ``timeout`` passes; returns the nodes as Slurm then shows them."""
    r = slurm.update_nodes(names, State="POWER_UP")
    if r.returncode != 0:
        raise PctkError(f"could not power up {','.join(names)}: {slurm.error_line(r)}")
    deadline = time.monotonic() + timeout
    while True:
        now = {n: v for n, v in read_nodes().items() if n in names}
        waiting = [n for n in names if n not in now or now[n].powered_down
                   or not now[n].responsive]
        if not waiting or time.monotonic() > deadline:
            return now
        progress(f"powering up {len(waiting)} node(s): {', '.join(waiting)}")
        time.sleep(1.0)


def choose_nodes(chosen: list[SlurmNode]) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """(nodes to sweep, down: node -> why (FAIL), skipped: node -> why (no verdict))."""
    skipped = {n.name: why for n in chosen if (why := not_swept(n))}
    down = {n.name: f"{n.state} ({n.reason})" for n in chosen
            if n.name not in skipped and not n.responsive}
    return [n.name for n in chosen if n.name not in skipped], down, skipped


def shared_partition(chosen: list[SlurmNode]) -> str:
    """The partition every chosen node is in (the first of the first node's, in Slurm's
    order): a pair job names one that holds both its nodes."""
    shared = [p for p in chosen[0].partitions if all(p in n.partitions for n in chosen[1:])]
    if not shared:
        by_part: dict[str, list[str]] = {}
        for n in chosen:
            by_part.setdefault(n.partitions[0] if n.partitions else "?", []).append(n.name)
        spread = "; ".join(f"{p}: {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}"
                           for p, names in by_part.items())
        raise HealthInputError(f"the nodes share no partition ({spread})",
                               "name nodes of one partition, or sweep each with --partition")
    return shared[0]


def sweep_partition(*, nodes: str | None, partition: str | None, test: PairTest,
                    workdir: Path, threshold: float, max_rounds: int | None, timeout: float,
                    drain: bool, progress: Callable[[str], None],
                    include_powered_down: bool = False) -> SweepResult:
    """The Slurm side: choose the nodes (powered-down ones skipped, or powered up first),
    set aside those Slurm has down, sweep, drain."""
    chosen = select_nodes(read_nodes(), nodes, partition)
    if partition is None:  # else Slurm's default partition, which may not hold the nodes
        partition = shared_partition(chosen)
    names, down, skipped = choose_nodes(chosen)
    if include_powered_down and skipped:
        now = power_up(list(skipped), timeout, progress)
        for n in list(skipped):
            names.append(n)
            if n not in now or now[n].powered_down or not now[n].responsive:
                st = now[n].state if n in now else "unknown"
                down[n] = f"{st}: not powered up within {timeout:g} s"
        skipped = {}
    if len(names) - len(down) < 2 and skipped:
        raise PctkError(
            f"a pairwise sweep needs at least 2 running nodes; {len(skipped)} powered down "
            f"(skipped: {', '.join(skipped)})",
            "add --include-powered-down to power them up for the sweep, or name more nodes")
    runner = SlurmPairs(test=test, workdir=workdir, partition=partition, timeout=timeout)
    result = run_sweep(names, runner, threshold=threshold,
                       max_rounds=max_rounds, down=down, progress=progress)
    result.method = test.method
    result.skipped = skipped
    result.job_ids = list(runner.job_ids)
    types = {n.instance_type for n in chosen}
    result.instance_type = types.pop() if len(types) == 1 else None
    result.partition = partition
    if drain:
        drain_slow(result, slurmops.drain)
    return result
