"""The pairing and resolution logic of `pctk health slow-nodes`, on given bandwidths.

The measure function here is a bandwidth table, not Slurm: the sweep's decisions (who is
paired with whom, when a pair is slow, which node is blamed) are pure functions of the
figures. The twin tests (tests/health/test_slownodes_twin.py) run the same code on real jobs.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from toolkit.errors import PctkError
from toolkit.health import slownodes
from toolkit.health.inventory import HealthInputError, SlurmNode
from toolkit.health.slownodes import (
    FAIL,
    OK,
    SLOW,
    UNRESOLVED,
    PairResult,
    drain_slow,
    exit_code,
    run_sweep,
    table_rows,
)


def _measure(speed: dict[str, float | None], calls: list[list[tuple[str, str]]]):
    """A pair runs at its slower node's speed; None: the node never starts."""
    def measure(rnd: int, pairs: list[tuple[str, str]]) -> list[PairResult]:
        calls.append(pairs)
        flat = [n for p in pairs for n in p]
        assert len(flat) == len(set(flat)), "a node in two pairs of one round"
        out = []
        for a, b in pairs:
            sa, sb = speed[a], speed[b]
            if sa is None or sb is None:
                out.append(PairResult(rnd, (a, b), None, "did not start"))
            else:
                out.append(PairResult(rnd, (a, b), min(sa, sb)))
        return out
    return measure


def _nodes(n: int) -> list[str]:
    return [f"n{i:02d}" for i in range(1, n + 1)]


@pytest.mark.parametrize("n", [4, 5, 8, 9, 16, 64, 512])
@pytest.mark.parametrize("where", ["first", "last", "middle"])
def test_one_slow_node_is_named_in_three_rounds(n, where):
    # round 1 all pairs; rounds 2 and 3: the suspects with two different good partners
    # (one more for 5 nodes: an odd node out and two suspects, but two good partners)
    nodes = _nodes(n)
    slow = {"first": nodes[0], "last": nodes[-1], "middle": nodes[n // 2]}[where]
    speed: dict[str, float | None] = {x: 1.0 for x in nodes}
    speed[slow] = 0.05
    calls: list[list[tuple[str, str]]] = []
    r = run_sweep(nodes, _measure(speed, calls))
    assert r.blamed == [slow]
    assert r.verdict_of(slow).verdict == SLOW
    assert r.rounds <= (4 if n == 5 else 3) <= 1 + math.ceil(math.log2(n)) == r.max_rounds
    # N/2 tests, then per round the retests and as many control pairs: not N^2
    assert sum(len(c) for c in calls) <= n // 2 + 12


def test_no_fault_blames_no_one_and_takes_one_round():
    nodes = _nodes(8)
    # spread, but within 2x
    speed: dict[str, float | None] = {x: 1.0 + 0.1 * i for i, x in enumerate(nodes)}
    r = run_sweep(nodes, _measure(speed, []))
    assert r.blamed == [] and r.rounds == 1 and exit_code(r) == 0


def test_odd_node_out_is_tested_with_a_good_partner():
    nodes = _nodes(7)
    speed: dict[str, float | None] = {x: 1.0 for x in nodes}
    calls: list[list[tuple[str, str]]] = []
    r = run_sweep(nodes, _measure(speed, calls))
    assert r.rounds == 2 and r.verdict_of("n07").verdict == OK
    assert calls[1][0] == ("n07", "n01")  # then a control pair of good nodes


def test_a_node_that_never_starts_fails_and_its_partner_is_cleared():
    nodes = _nodes(8)
    speed: dict[str, float | None] = {x: 1.0 for x in nodes}
    speed["n03"] = None
    r = run_sweep(nodes, _measure(speed, []))
    assert r.verdict_of("n03").verdict == FAIL and r.verdict_of("n04").verdict == OK
    assert "did not start" in r.verdict_of("n03").evidence and exit_code(r) == 1


def _losing(speed: dict[str, float | None], calls: list[list[tuple[str, str]]],
            lost_in: dict[str, int]):
    """As _measure; a node in lost_in is set down by Slurm in that round: its pair gets no
    figure and names it, as SlurmPairs does when it cancels a pair that cannot start."""
    inner = _measure(speed, calls)

    def measure(rnd: int, pairs: list[tuple[str, str]]) -> list[PairResult]:
        out = []
        for p in inner(rnd, pairs):
            gone = {n: "down+not_responding (Not responding)" for n in p.nodes
                    if lost_in.get(n, 0) and rnd >= lost_in[n]}
            out.append(PairResult(rnd, p.nodes, None, "not started", lost=gone) if gone else p)
        return out
    return measure


def test_a_node_slurm_sets_down_fails_at_once_and_its_partner_is_retested():
    nodes = _nodes(8)
    speed: dict[str, float | None] = {x: 1.0 for x in nodes}
    calls: list[list[tuple[str, str]]] = []
    r = run_sweep(nodes, _losing(speed, calls, {"n03": 1}))
    v = r.verdict_of("n03")
    assert v.verdict == FAIL and v.evidence.startswith("Slurm: down+not_responding")
    assert "round 1 pair with n04" in v.evidence
    # no retest of n03 (its pair could not start): n04 alone, with a good partner and a
    # control pair, and the sweep ends after round 2
    assert r.rounds == 2 and [x for c in calls[1:] for p in c for x in p].count("n03") == 0
    assert r.verdict_of("n04").verdict == OK and r.blamed == ["n03"]
    assert exit_code(r) == 1


def test_a_suspect_whose_good_partner_is_lost_gets_no_strike():
    # n08 is slow; its first good partner (n02) goes down in round 2: that retest says
    # nothing of n08, which is still confirmed slow by two other good partners
    nodes = _nodes(8)
    speed: dict[str, float | None] = {x: 1.0 for x in nodes}
    speed["n08"] = 0.05
    calls: list[list[tuple[str, str]]] = []
    r = run_sweep(nodes, _losing(speed, calls, {"n02": 2}))
    assert r.verdict_of("n02").verdict == FAIL and r.verdict_of("n08").verdict == SLOW
    partners = [next(x for x in p if x != "n08") for c in calls[1:] for p in c if "n08" in p]
    assert partners[0] == "n02" and "n02" not in partners[1:] and len(partners) == 3
    assert sorted(r.blamed) == ["n02", "n08"] and r.verdict_of("n07").verdict == OK


def test_several_slow_nodes_take_more_rounds_within_the_limit():
    # slow pairs must stay a minority: the median pair is the reference
    nodes = _nodes(16)
    speed: dict[str, float | None] = {x: 1.0 for x in nodes}
    for x in ("n01", "n03", "n05"):
        speed[x] = 0.1
    r = run_sweep(nodes, _measure(speed, []))
    assert sorted(r.blamed) == ["n01", "n03", "n05"]
    assert r.rounds <= r.max_rounds


def test_without_good_partners_suspects_stay_unresolved():
    speed: dict[str, float | None] = {"a": 1.0, "b": 1.0, "c": 0.1, "d": 0.1}
    # 2 pairs: (a,b) fast, (c,d) slow, a and b are good partners for c and d
    r = run_sweep(["a", "b", "c", "d"], _measure(speed, []))
    assert sorted(r.blamed) == ["c", "d"]
    r = run_sweep(["a", "b", "c", "d"], _measure(speed, []), max_rounds=1)
    assert {v.node: v.verdict for v in r.verdicts}["c"] == UNRESOLVED and exit_code(r) == 1


def test_drain_names_the_figures_and_only_slow_nodes():
    nodes = _nodes(8)
    speed: dict[str, float | None] = {x: 2.0 for x in nodes}
    speed["n06"] = 0.02
    r = run_sweep(nodes, _measure(speed, []))
    drained: list[tuple[str, str]] = []
    drain_slow(r, lambda n, why: drained.append((n, why)))
    assert drained == [("n06", "pctk: slow-node: 0.02 GB/s vs median 2 GB/s")]
    head, rows = table_rows(r)
    assert head[:3] == ["node", "round 1", "round 2"] and head[-1] == "verdict"
    row = next(x for x in rows if x[0] == "n06")
    assert row[1] == "0.02 n05" and row[-1] == SLOW


def test_drain_refuses_when_most_nodes_are_slow():
    speed: dict[str, float | None] = {"a": 1.0, "b": 0.1, "c": 0.1, "d": 0.1, "e": 0.1,
                                      "f": 1.0}
    r = run_sweep(list(speed), _measure(speed, []))
    drained: list[str] = []
    drain_slow(r, lambda n, why: drained.append(n))
    if len(r.blamed) * 2 > len(r.nodes):
        assert drained == [] and r.drain_refused


def test_too_few_nodes_is_an_input_error():
    with pytest.raises(PctkError, match="at least 2"):
        run_sweep(["a"], _measure({"a": 1.0}, []))


def test_a_noisy_retest_is_not_blamed_without_confirmation():
    nodes = _nodes(8)
    speed: dict[str, float | None] = {x: 1.0 for x in nodes}
    speed["n08"] = 0.05
    calls: list[list[tuple[str, str]]] = []
    inner = _measure(speed, calls)
    noisy = {"n07"}  # n07's first retest hits a busy moment; the second does not

    def measure(rnd: int, pairs: list[tuple[str, str]]) -> list[PairResult]:
        out = inner(rnd, pairs)
        return [PairResult(p.round, p.nodes, 0.3) if rnd == 2 and p.nodes[0] in noisy else p
                for p in out]

    r = run_sweep(nodes, measure)
    assert r.blamed == ["n08"] and r.verdict_of("n07").verdict == OK


def test_retests_are_judged_against_control_pairs_of_the_same_round():
    nodes = _nodes(8)
    speed = {x: 1.0 for x in nodes}
    speed["n02"] = 0.05

    def measure(rnd: int, pairs: list[tuple[str, str]]) -> list[PairResult]:
        # from round 2 on the whole machine runs at a fifth of round 1's speed (load)
        scale = 1.0 if rnd == 1 else 0.2
        return [PairResult(rnd, (a, b), min(speed[a], speed[b]) * scale) for a, b in pairs]

    r = run_sweep(nodes, measure)
    assert r.blamed == ["n02"], r.verdicts  # n01 is cleared: 0.2 is the load, not the node


def test_pair_commands_for_both_methods(tmp_path):
    from toolkit.health.slownodes import PairTest

    torch_cmd = PairTest(size="4M", iters=3, python="/usr/bin/python3").command(tmp_path / "r")
    # the ranks take their rendezvous from the job, not from the submitting shell
    assert torch_cmd.startswith("unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK "
                                "MASTER_ADDR MASTER_PORT; srun --ntasks-per-node=1 "
                                "--kill-on-bad-exit=1 /usr/bin/python3")
    assert "--min-bytes 4M --max-bytes 4M --iters 3" in torch_cmd
    # nccl-tests: the runner's srun line for 2 nodes x 8 GPUs (a stand-in binary: no GPUs here)
    stand_in = tmp_path / "all_reduce_perf"
    stand_in.write_text("#!/bin/sh\n")
    stand_in.chmod(0o755)
    cmd = PairTest(method="nccl-tests", size="1G", nccl_tests_dir=str(tmp_path)).command(
        tmp_path / "unused.json")
    assert cmd.startswith("srun --nodes=2 --ntasks-per-node=8") and str(stand_in) in cmd
    assert "-b 1G -e 1G" in cmd
    # a real nccl-tests sendrecv log (tests/nccl/fixtures): its "Avg bus bandwidth" line
    log = Path(__file__).parents[1] / "nccl" / "fixtures" / \
        "13_nccl-tests-331-sendrecv-a100-nthread2-info.log"
    gbps, err = PairTest(method="nccl-tests", collective="sendrecv").figure(tmp_path / "x", log)
    assert (gbps, err) == (pytest.approx(24.3607), None)
    gbps, err = PairTest(method="nccl-tests").figure(tmp_path / "x", tmp_path / "none.out")
    assert gbps is None and err


def _loaded_after_round_1(speed: dict[str, float], noisy: set[tuple[str, str]],
                          scale: float, calls: list[list[tuple[str, str]]] | None = None):
    """Round 1 at full speed but with the pairs in ``noisy`` hit by a busy moment; from
    round 2 on the whole machine runs at ``scale`` of round 1's speed (host load)."""
    def measure(rnd: int, pairs: list[tuple[str, str]]) -> list[PairResult]:
        if calls is not None:
            calls.append(pairs)
        out = []
        for a, b in pairs:
            fig = min(speed[a], speed[b]) * (1.0 if rnd == 1 else scale)
            if rnd == 1 and (a, b) in noisy:
                fig = 0.3
            out.append(PairResult(rnd, (a, b), fig))
        return out
    return measure


def test_a_busy_round_without_control_pairs_blames_no_healthy_node():
    # 8 nodes, n08 slowed; a busy moment makes round 1's n05-n06 pair slow too, so four
    # suspects meet four good nodes: with all four as partners no control pair would run, and
    # the retests (at a third of round 1's speed: load) would be judged against round 1
    nodes = _nodes(8)
    speed = {x: 1.0 for x in nodes}
    speed["n08"] = 0.05
    r = run_sweep(nodes, _loaded_after_round_1(speed, {("n05", "n06")}, 0.3))
    assert r.blamed == ["n08"], r.verdicts
    assert r.verdict_of("n08").verdict == SLOW


def test_four_nodes_re_measure_a_control_pair_before_blaming():
    # 4 nodes: both good nodes are partners in round 2, so no control pair can run beside
    # the retests; a loaded round 2 must not make c1 (healthy) slow against round 1's median
    speed = {"c1": 1.0, "c2": 0.05, "c3": 1.0, "c4": 1.0}
    nodes = ["c3", "c4", "c1", "c2"]
    calls: list[list[tuple[str, str]]] = []
    r = run_sweep(nodes, _loaded_after_round_1(speed, set(), 0.25, calls))
    assert r.blamed == ["c2"], r.verdicts
    assert r.verdict_of("c1").verdict == OK


def test_powered_down_dynamic_nodes_are_skipped_by_the_rule_health_run_uses():
    # one rule for every sweep (toolkit.health.inventory.not_swept): idle~ is a dynamic
    # node's normal state, so slow-nodes leaves it out without a verdict, as health run SKIPs
    from toolkit.health.inventory import SlurmNode, not_swept
    from toolkit.health.slownodes import choose_nodes
    from toolkit.health.sweep import SKIP, node_state_check

    def node(name: str, state: str, reason: str = "") -> SlurmNode:
        return SlurmNode(name, ("cpu",), state, reason, (), "")

    chosen = [node("a", "idle"), node("b", "idle"), node("c", "idle+cloud+powered_down"),
              node("d", "down+not_responding", "Not responding")]
    names, down, skipped = choose_nodes(chosen)
    assert names == ["a", "b", "d"] and list(skipped) == ["c"]
    assert down == {"d": "down+not_responding (Not responding)"}
    assert node_state_check(chosen[2]).status == SKIP
    assert node_state_check(chosen[2]).message == not_swept(chosen[2]) == skipped["c"]
    r = run_sweep(names, _measure({"a": 1.0, "b": 1.0}, []), down=down)
    assert [v.node for v in r.verdicts] == ["a", "b", "d"] and r.blamed == ["d"]


def test_a_sweep_is_a_record_kept_in_the_results_history(tmp_path, capsys, monkeypatch):
    # slow-node sweeps were not kept: now a `slow-nodes` record like every other run's,
    # stored by the command (or `results add`) and listed by `results list`
    import json

    from benchmarks.record import write_record
    from toolkit.cli import main
    from toolkit.health.slownodes import to_record

    monkeypatch.setenv("PCTK_HOME", str(tmp_path / "home"))
    nodes = _nodes(8)
    speed: dict[str, float | None] = {x: 1.0 for x in nodes}
    speed["n05"] = 0.05
    rec = to_record(run_sweep(nodes, _measure(speed, [])), partition="cpu", job_ids=["7", "8"])
    assert rec["kind"] == "slow-nodes" and rec["verdict"]["status"] == "FAIL"
    assert rec["verdict"]["reasons"][0].startswith("SLOW n05: ")
    assert rec["cluster"]["nodes"] == 8 and rec["cluster"]["job_id"] == "7,8"
    path = write_record(tmp_path / "record.json", rec)
    db = tmp_path / "results.db"
    assert main(["results", "add", str(path), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["results", "list", "--db", str(db), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["kind"]) for r in listed] == [(rec["id"], "slow-nodes")]
    from toolkit.results.metrics import headline
    assert headline(rec) == "median pair 1 GB/s; blamed n05"


@pytest.mark.parametrize("slow", ["n01", "n02", "n03", "n04"])
def test_a_node_2_5x_slow_among_four_is_named(slow):
    """The figures of a 4-node twin sweep with one link shaped to 1600 Mbit/s: its pair ran at
    0.181 GB/s, the other at 0.497. Against the mean of both pairs (their median) that was
    0.53 x: "OK", exit 0. Against the other pair it is 0.36 x: a suspect, then confirmed with
    two known-good partners."""
    nodes = _nodes(4)
    speed: dict[str, float | None] = dict.fromkeys(nodes, 0.497)
    speed[slow] = 0.181
    calls: list[list[tuple[str, str]]] = []
    r = run_sweep(nodes, _measure(speed, calls))
    assert r.blamed == [slow]
    assert r.verdict_of(slow).verdict == SLOW and r.rounds == 3
    assert all(r.verdict_of(n).verdict == OK for n in nodes if n != slow)


def test_four_nodes_judge_a_retest_against_the_fast_retest_beside_it():
    """Four nodes leave no room for a control pair beside round 2's two retests; one measured
    after them can meet another load. Here it does (a lone pair runs at half speed), and
    against it the slow node's retest passed. The fast retest beside the slow one ran at the
    same moment with a known-good node in it: against that, the slow node is named."""
    nodes = _nodes(4)
    speed = dict.fromkeys(nodes, 1.0)
    speed["n01"] = 0.4
    calls: list[list[tuple[str, str]]] = []
    base = _measure(speed, calls)

    def measure(rnd: int, pairs: list[tuple[str, str]]) -> list[PairResult]:
        out = base(rnd, pairs)
        if len(pairs) == 1:  # a control measured alone, after the retests: a busy moment
            out = [PairResult(r.round, r.nodes, (r.gbps or 0) * 0.5) for r in out]
        return out

    r = run_sweep(nodes, measure)
    assert r.blamed == ["n01"] and r.verdict_of("n02").verdict == OK
    assert all(len(c) > 1 for c in calls), "no control had to be measured alone"


def test_named_nodes_without_a_partition_sweep_in_the_one_they_share() -> None:
    """Pair jobs name a partition that holds both nodes: without one Slurm takes its default
    partition, which refuses nodes of another ("Requested nodes not in this partition")."""
    def node(name: str, *parts: str) -> SlurmNode:
        return SlurmNode(name, parts, "idle", "", (), "")

    assert slownodes.shared_partition([node("a", "cpu"), node("b", "cpu")]) == "cpu"
    assert slownodes.shared_partition([node("a", "all", "cpu"), node("b", "cpu", "all")]) \
        == "all"
    with pytest.raises(HealthInputError, match=r"share no partition \(gpu: a; cpu: b\)"):
        slownodes.shared_partition([node("a", "gpu"), node("b", "cpu")])
