"""A hung ``--nproc`` job (capture/ranks.py): where each rank waited, read from the Python stacks it wrote to
its log (faulthandler's format) before the timeout's kill, and only the ranks' own processes asked for them."""

from __future__ import annotations

import os
from pathlib import Path

from inductor_lens.capture.ranks import dump_stacks, waited_at
from inductor_lens.exchange.shared import PID_FILE

SITE = "/venv/lib/python3.11/site-packages"
DUMP = f"""[inductor-lens] phase eager run
Thread 0x00007f085f7fe6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f0884a52b80 (most recent call first):
  File "{SITE}/torch/distributed/distributed_c10d.py", line 3252 in all_reduce
  File "{SITE}/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/home/me/model.py", line 31 in forward
  File "{SITE}/torch/nn/modules/module.py", line 1778 in _wrapped_call_impl
  File "/home/me/model.py", line 40 in <module>
W1128 01:00:51 torch/distributed/elastic: Received 15 death signal
"""


def test_a_rank_waiting_in_a_collective_is_named_with_the_users_line(tmp_path: Path) -> None:
    log = tmp_path / "capture.log"
    log.write_text(DUMP, encoding="utf-8")
    # the main thread's stack (the last one dumped), its top frame and the first frame of the user's code
    assert waited_at(log) == (
        "waiting in all_reduce (torch/distributed/distributed_c10d.py:3252) from model.py:31 in forward"
    )


def test_a_rank_in_the_users_code_is_named_at_its_line(tmp_path: Path) -> None:
    log = tmp_path / "capture.log"
    log.write_text('Current thread 0x1 (most recent call first):\n  File "/home/me/model.py", line 29 in forward\n')
    assert waited_at(log) == "at model.py:29 in forward"
    only_torch = f'Thread 0x2 (most recent call first):\n  File "{SITE}/torch/x.py", line 3 in wait\n'
    log.write_text(only_torch)
    assert waited_at(log) == "waiting in wait (torch/x.py:3)"


def test_no_stacks_no_words(tmp_path: Path) -> None:
    log = tmp_path / "capture.log"
    log.write_text("Traceback (most recent call last):\n  File \"/home/me/model.py\", line 3, in f\n")
    assert waited_at(log) == ""
    assert waited_at(tmp_path / "missing.log") == ""


def test_only_a_ranks_own_process_is_asked_for_its_stacks(tmp_path: Path) -> None:
    # a pid file naming a process that is no rank (this test's own: the pid went to another program) is left
    # alone: SIGUSR1 would end it
    folder = tmp_path / "rank0" / "capture"
    folder.mkdir(parents=True)
    (folder / PID_FILE).write_text(str(os.getpid()), encoding="utf-8")
    (tmp_path / "rank1" / "capture").mkdir(parents=True)
    (tmp_path / "rank1" / "capture" / PID_FILE).write_text("not a pid", encoding="utf-8")
    dump_stacks(tmp_path)  # still running: nothing was sent
