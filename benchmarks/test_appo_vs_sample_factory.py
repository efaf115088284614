"""benchmarks/appo_vs_sample_factory.py measures both libraries alike: frames/s over the last seconds of each log."""

from __future__ import annotations

import appo_vs_sample_factory  # this directory: pytest puts a test's own directory on the path
import pytest

# a report as Sample Factory 2.1.1 prints it to a terminal, colour codes included
SF_LINE = (
    "\x1b[36m[2026-11-26 13:02:55,563][04753] Fps is (10 sec: 614.6, 60 sec: 614.4, 300 sec: 766.6). "
    "Total num frames: 188416. Throughput: 0: 154.1. Samples: 47512. "
    "Policy #0 lag: (min: 0.0, avg: 1.0, max: 2.0)\x1b[0m"
)


def test_sample_factory_reports_are_read_with_their_time_and_frames() -> None:
    match = appo_vs_sample_factory.SF_REPORT.search(SF_LINE)
    assert match is not None
    assert (match[1], int(match[2])) == ("2026-11-26 13:02:55,563", 188416)


def test_the_window_starts_at_the_last_point_a_window_before_the_end() -> None:
    points = [(0.0, 0), (10.0, 500), (20.0, 2_000), (30.0, 3_000), (40.0, 4_000)]
    # the window of 25 s starts at 10 s (the last point at or before 40 - 25 = 15): 3,500 frames in 30 s
    assert appo_vs_sample_factory.window_rate(points, 25.0) == pytest.approx(3_500 / 30)
    assert appo_vs_sample_factory.window_rate(points, 40.0) == pytest.approx(100.0)
    with pytest.raises(RuntimeError, match="lengthen --seconds"):
        appo_vs_sample_factory.window_rate(points, 41.0)
