import pytest

from hw.pipeline import Stage, StageStats, run_pipeline


def make(times):
    return [Stage(name=f"s{i}", stats=StageStats(), service=lambda t, s, c=c: s + c) for i, c in enumerate(times)]


@pytest.mark.parametrize("times, tiles", [([3, 5, 2], 10), ([4, 4, 4, 4], 7), ([1], 5), ([9, 1, 1], 4)])
def test_balanced_pipeline_closed_form(times, tiles):
    stages = make(times)
    end = run_pipeline(stages, tiles, [0.0] * tiles, depth=2)
    # a pipeline with unbounded queues: fill (sum) + (tiles - 1) * bottleneck; depth 2 suffices when the
    # bottleneck is downstream of nothing slower (checked cases)
    assert end[-1][-1] == sum(times) + (tiles - 1) * max(times)
    for st, c in zip(stages, times, strict=False):
        assert st.stats.busy_cycles == c * tiles and st.stats.tiles == tiles


def test_back_pressure_stalls_producer():
    # depth 1: the consumer works in the single queue slot, so the producer refills it only after it finished
    stages = make([1, 10])
    end = run_pipeline(stages, 6, [0.0] * 6, depth=1)
    assert stages[0].stats.stall_output_cycles == 5 * 10  # the fast producer waits for queue room
    assert stages[1].stats.stall_input_cycles == 6 and end[-1][-1] == 6 * (1 + 10)
    # depth 2 (double buffering): the producer runs ahead, the consumer never starves after the first tile
    stages = make([1, 10])
    end = run_pipeline(stages, 6, [0.0] * 6, depth=2)
    assert stages[1].stats.stall_input_cycles == 1 and end[-1][-1] == 1 + 6 * 10


def test_ready_times_delay_start_and_count_as_input_stall():
    stages = make([2, 2])
    end = run_pipeline(stages, 3, [0.0, 50.0, 50.0])
    assert end[0][1] == 52.0 and stages[0].stats.stall_input_cycles == pytest.approx(48.0)
    with pytest.raises(ValueError, match="depth"):
        run_pipeline(stages, 1, [0.0], depth=0)
