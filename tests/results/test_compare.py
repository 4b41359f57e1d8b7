from __future__ import annotations

from toolkit.results.compare import compare_records

from . import records

GIB = 1 << 30


def test_large_message_drop_is_flagged_at_the_sizes_where_it_appears() -> None:
    base = records.nccl_record()
    slow = records.nccl_record(scale=records.drop_above(8 * GIB, 0.85))
    comp = compare_records(slow, base)
    flagged = [p.where for p in comp.regressions]
    assert flagged == ["all_reduce @ 8 GiB (8589934592 B)", "all_reduce @ 16 GiB (17179869184 B)"]
    for point in comp.regressions:
        assert point.change is not None and abs(point.change + 0.15) < 1e-3
    # the sizes just below the drop were compared and passed
    assert any(p.where.startswith("all_reduce @ 4 GiB") and not p.regression
               for p in comp.points)


def test_noise_level_changes_are_not_flagged() -> None:
    base = records.nccl_record()
    jitter = records.nccl_record(scale=lambda s: 0.97 if (s >> 20) % 2 else 1.02)
    assert compare_records(jitter, base).regressions == []


def test_small_message_slowdown_is_not_judged() -> None:
    base = records.nccl_record()
    latency = records.nccl_record(scale=lambda s: 0.5 if s < (1 << 20) else 1.0)
    comp = compare_records(latency, base)
    assert comp.regressions == []
    assert all("GiB" in p.where for p in comp.points)


def test_several_collectives_in_one_record() -> None:
    base = records.collectives_record()
    slow = records.collectives_record(scale=lambda s: 0.8)
    comp = compare_records(slow, base)
    assert {p.where.split(" @ ")[0] for p in comp.regressions} == {"all_gather",
                                                                   "reduce_scatter"}


def test_training_throughput_drop_is_flagged_and_mfu_noise_is_not() -> None:
    base = records.fsdp_record(tokens=5762.0, mfu=0.34)
    comp = compare_records(records.fsdp_record(tokens=5100.0, mfu=0.33), base)
    assert [p.metric for p in comp.regressions] == ["tokens_per_s_per_gpu"]
    (tokens,) = comp.regressions
    assert tokens.where == "run summary"
    assert compare_records(records.fsdp_record(tokens=5700.0), base).regressions == []


def test_mfu_in_percent_and_fraction_compare_alike() -> None:
    base = records.fsdp_record(mfu=0.34)
    comp = compare_records(records.fsdp_record(mfu=30.0), base)
    assert [p.metric for p in comp.regressions] == ["mfu"]


def test_per_step_series_names_the_first_slow_step() -> None:
    base = records.fsdp_record(tokens=5762.0)
    slow = records.fsdp_record(tokens=5000.0)
    slow["metrics"]["steps"] = [{"step": s, "tokens_per_s_per_gpu": 5800.0 if s < 30 else 4600.0}
                                for s in range(1, 51)]
    (point,) = compare_records(slow, base).regressions
    assert point.where.startswith("from step 30 ")


def test_new_health_failure_is_a_regression_but_a_known_one_is_not() -> None:
    healthy = records.health_record()
    broken = records.health_record(fail=("gpu-st-p5-2", "gpu_count"))
    (point,) = compare_records(broken, healthy).regressions
    assert point.where == "gpu-st-p5-2 gpu_count"
    assert compare_records(broken, broken).regressions == []


def test_emulated_collectives_are_not_judged() -> None:
    base = records.collectives_record()
    slow = records.collectives_record(scale=lambda s: 0.5, emulated=True)
    comp = compare_records(slow, base)
    assert {p.where.split(" @ ")[0] for p in comp.regressions} == {"all_gather"}
    assert any("reduce_scatter: EMULATED" in note for note in comp.notes)


def test_records_from_the_real_nccl_parser_carry_its_verdict() -> None:
    rec = records.nccl_record()
    (block,) = rec["metrics"]["collectives"]
    assert block["format"] == "new" and block["nranks"] == 16 and block["complete"]
    assert rec["cluster"]["hosts"] == records.HOSTS
