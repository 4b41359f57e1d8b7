"""The scaling study's PNGs (``pctk bench scaling`` writes them, the report embeds them):
a study from the twin says so on the figure in the words of toolkit.twinnote, and the
breakdown's tallest stack and its total sit inside the axes. Real records of the FSDP
benchmark (local gloo ranks, no checkpoints, as ``bench scaling`` runs them)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tests.fsdp.fsdp_launch import TINY, run_ranks
from toolkit.results import plots
from toolkit.results.scaling import scaling_record, study
from toolkit.twinnote import EMULATED, twin_caveat


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """One rank, then two ranks standing for two nodes (weak scaling, no checkpoints)."""
    out = []
    for world, batch in ((1, 4), (2, 8)):
        folder = tmp_path_factory.mktemp(f"world{world}")
        run = run_ranks(world, [*TINY, "--steps", "4", "--batch-size", str(batch)],
                        folder / "record.json", extra_env={"SLURM_NNODES": str(world)},
                        ranks_per_node=1)
        assert run.returncodes == [0] * world and run.record is not None, run.output
        out.append(run.record)
    return out


def scaling(records: list[dict], twin: bool) -> dict:
    recs = copy.deepcopy(records)
    for rec in recs:  # what benchmarks.record sets on the twin (a loopback slurmctld)
        rec["cluster"]["twin"] = twin
    return scaling_record(recs, study(recs, strong=False), {"mode": "weak", "model": "tiny"})


def twin_texts(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.texts if t.get_gid() == "twin-caveat"]


def test_a_study_from_the_twin_is_labelled_on_both_pngs(records: list[dict],
                                                        tmp_path: Path) -> None:
    rec = scaling(records, twin=True)
    caveat = twin_caveat(rec)
    assert rec["cluster"]["twin"] is True and caveat is not None and EMULATED in caveat
    for draw in (plots.scaling_efficiency, plots.scaling_breakdown):
        fig = draw(rec, "t")
        assert twin_texts(fig) == [f"TWIN: {caveat}"]
        FigureCanvasAgg(fig).draw()
        label = fig.texts[0].get_window_extent()
        assert fig.bbox.x0 <= label.x0 and label.y0 >= fig.bbox.y0, draw.__name__
        # not on the x axis' label either
        assert label.y1 < fig.axes[0].xaxis.label.get_window_extent().y0, draw.__name__
    paths = plots.write_scaling_pngs(rec, tmp_path)
    assert [p.name for p in paths] == ["scaling-efficiency.png", "scaling-breakdown.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths)
    # the saved figure holds the words (matplotlib's SVG keeps each text as a comment)
    svg = tmp_path / "breakdown.svg"
    plots.scaling_breakdown(rec, "t").savefig(svg, format="svg", bbox_inches="tight")
    assert f"<!-- TWIN: {caveat} -->" in svg.read_text()


def test_a_study_from_a_real_cluster_carries_no_twin_label(records: list[dict]) -> None:
    rec = scaling(records, twin=False)
    assert twin_caveat(rec) is None
    assert twin_texts(plots.scaling_efficiency(rec, "t")) == []
    assert twin_texts(plots.scaling_breakdown(rec, "t")) == []


def test_the_tallest_breakdown_stack_and_its_total_are_inside_the_axes(
        records: list[dict]) -> None:
    rec = scaling(records, twin=True)
    sizes = rec["metrics"]["sizes"]
    # no checkpoint: the top part of every stack is 0 ms, the case that cut the bar off
    assert all(not s["breakdown_s"]["checkpoint"] for s in sizes)
    totals = [sum((s["breakdown_s"].get(p) or 0.0) * 1000 for p in plots.BREAKDOWN_COLORS)
              for s in sizes]
    fig = plots.scaling_breakdown(rec, "t")
    ax = fig.axes[0]
    FigureCanvasAgg(fig).draw()
    top = ax.get_ylim()[1]
    assert top >= max(totals) * 1.1, (top, totals)
    labels = [t for t in ax.texts if t.get_gid() == "bar-total"]
    assert [t.get_text() for t in labels] == [f"{x:.1f} ms" for x in totals]
    frame = ax.get_window_extent()
    for label in labels:
        box = label.get_window_extent()
        assert frame.y0 <= box.y0 and box.y1 <= frame.y1, (label.get_text(), box, frame)
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= frame.x1  # beside the axes, over no bar
