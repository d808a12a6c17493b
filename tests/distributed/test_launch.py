"""The local launcher and rank teardown: results come back, work left in flight is completed, a dead rank is named
with its signal, traceback and stderr, and the torchrun entry wrapper exits with Python's status codes."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch.distributed as dist
from rank_functions import abort_on_rank, leave_async_work_in_flight, raise_on_rank, warn_to_stderr

from distributed.launch import GRACE_S, RankFailure, spawn
from distributed.teardown import _live_groups, finish_process_groups

ROOT = Path(__file__).resolve().parents[2]


def test_ranks_exit_cleanly_with_work_left_in_flight_and_groups_held():
    """Without `distributed.teardown` this pattern killed a rank with SIGABRT in most runs
    (benchmarks/teardown_race.py measures both)."""
    for _ in range(3):
        assert spawn(leave_async_work_in_flight, 2, 25) == [1.0, 2.0]


def test_rank_killed_by_a_signal_is_named_with_its_stderr():
    start = time.monotonic()
    with pytest.raises(RankFailure) as info:
        spawn(abort_on_rank, 2, 1)
    message = str(info.value)
    assert "rank 1: killed by SIGABRT" in message and "rank about to abort" in message, message
    assert time.monotonic() - start < GRACE_S + 30  # the surviving rank did not wait on its collective timeout


def test_rank_exception_is_reported_with_its_traceback():
    with pytest.raises(RankFailure, match=r"(?s)rank 0: exit code 1.*ValueError: deliberate failure on rank 0"):
        spawn(raise_on_rank, 2, 0)


def test_rank_stderr_reaches_the_parent(capfd):
    assert spawn(warn_to_stderr, 2) == [0, 1]
    err = capfd.readouterr().err
    assert "note from rank 0" in err and "note from rank 1" in err


def test_teardown_sees_every_group_then_destroys_them():
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(d, 'store')}", rank=0, world_size=1)
        sub = dist.new_group(backend="gloo")
        groups = _live_groups()
        assert groups[0] is dist.group.WORLD and sub in groups and len(groups) == 2
        finish_process_groups()
        assert not dist.is_initialized()
    finish_process_groups()  # no group: nothing to do


@pytest.mark.parametrize("body,code,stderr", [("return 3", 3, ""),
                                              ("raise SystemExit('error: bad flag')", 1, "error: bad flag"),
                                              ("raise SystemExit(2)", 2, ""),
                                              ("raise KeyError('boom')", 1, "KeyError: 'boom'")])
def test_run_rank_main_exits_with_pythons_status(body, code, stderr):
    program = ("from distributed.teardown import run_rank_main\n"
               "def main():\n"
               f"    print('ran', flush=False)\n    {body}\n"
               "run_rank_main(main)\n")
    out = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == code and out.stdout == "ran\n" and stderr in out.stderr, out


def test_teardown_race_table_shows_every_mode():
    from benchmarks import teardown_race

    res = {"command": "python benchmarks/teardown_race.py --runs 4 --rounds 50", "rounds": 50,
           "rows": [{"mode": "plain", "runs": 4, "runs_with_a_dead_rank": 3, "signals": {"SIGABRT": 3}},
                    {"mode": "teardown", "runs": 4, "runs_with_a_dead_rank": 0, "signals": {}}]}
    lines = teardown_race.render(res)
    assert "| plain | 4 | 3 | SIGABRT x3 |" in lines and "| teardown | 4 | 0 | - |" in lines
