"""The hand-written sessionizer that ``benchmarks/bench_task_path.py`` measures as the floor of the
sessions task path must give exactly the task's output (else the speed ratio compares unequal
work): same records, same order, over random click streams where sessions extend, merge, close and
clicks come late."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks import bench_task_path as bench


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), users=st.integers(1, 40), gap=st.integers(1, 20_000),
       grace=st.integers(0, 150_000), batch=st.sampled_from([1, 7, 500]))
def test_floor_output_equals_the_task_path_output(seed: int, users: int, gap: int, grace: int, batch: int) -> None:
    records = bench.make_records(1_500, users, seed)
    task_out: list = []
    floor_out: list = []
    _, n_task, _ = bench.run_task(records, batch, task_out, gap=gap, grace=grace)
    _, n_floor = bench.run_floor(records, batch, floor_out, gap=gap, grace=grace)
    assert n_task == len(task_out) and n_floor == len(floor_out)
    assert floor_out == task_out
