"""The one wait loop (toolkit.slurm.wait_jobs): when it asks Slurm, on a clock the test moves.

``read`` is the loop's own seam for the job-state query (the submitit watcher plugs in there);
here it records when it is asked and says what a job of a given length would show then.
"""

from __future__ import annotations

import itertools

import pytest

from toolkit import slurm


class Clock:
    """time.monotonic and time.sleep for the loop: sleeping moves the clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(slurm.time, "monotonic", c.monotonic)
    monkeypatch.setattr(slurm.time, "sleep", c.sleep)
    return c


def job_of(seconds: float, clock: Clock, asked: list[float]):
    """A read() for one job "1" that runs ``seconds`` from the start of the wait."""
    start = clock.now

    def read(ids: list[str]) -> dict[str, str | None]:
        asked.append(clock.now - start)
        return {i: "COMPLETED" if clock.now - start >= seconds else "RUNNING" for i in ids}

    return read


def test_a_short_job_is_seen_ending_within_a_fraction_of_a_second(clock):
    asked: list[float] = []
    states, timed_out = slurm.wait_jobs(["1"], read=job_of(0.7, clock, asked), poll=5)
    assert states == {"1": "COMPLETED"} and not timed_out
    # asked at once, then after 0.25 s, 0.375 s, ...: the end at 0.7 s is seen at 1.19 s
    # (a fixed 5 s poll saw it at 5 s)
    assert asked[0] == 0 and asked[1] == pytest.approx(slurm.FIRST_GAP_S)
    assert asked[-1] < 1.3, asked


def test_a_long_job_is_asked_about_once_per_poll_after_the_first_seconds(clock):
    asked: list[float] = []
    slurm.wait_jobs(["1"], read=job_of(600, clock, asked), poll=5)
    gaps = [b - a for a, b in itertools.pairwise(asked)]
    assert gaps == sorted(gaps) and max(gaps) == pytest.approx(5)
    assert all(g == pytest.approx(5) for g in gaps[10:])
    # the growing gaps cost a handful of calls over a fixed 5 s poll, over the whole wait
    assert len(asked) <= 600 / 5 + 8, len(asked)


def test_the_timeout_and_until_are_kept_between_polls(clock):
    asked: list[float] = []
    states, timed_out = slurm.wait_jobs(["1"], read=job_of(600, clock, asked), poll=5,
                                        timeout=30)
    assert timed_out and states == {"1": "RUNNING"}
    # the last poll within a gap of the timeout, the return right after it
    assert asked[-1] + 5 >= 30 and clock.now - 1000 < 30 + 5
    start, checks = clock.now, []

    def until() -> bool:
        checks.append(clock.now - start)
        return clock.now - start >= 12

    states, timed_out = slurm.wait_jobs(["1"], read=job_of(600, clock, []), poll=5,
                                        until=until, tick=0.5)
    assert not timed_out and 12 <= checks[-1] < 12.5, checks
