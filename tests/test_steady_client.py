"""grader/steady.py: the notebook runners' waits cannot sleep through a message that has arrived.

The fake channel below has the fault nbclient#312 describes: a poll that is already
waiting when a message arrives is never woken, and sleeps its whole timeout; only a
direct look (``timeout=0``) sees the message. Time is a fake clock, so nothing here
depends on the machine's speed.
"""
from __future__ import annotations

import asyncio
from queue import Empty

import nbformat
import pytest

from grader.steady import SteadyClient, sliced


class DeafChannel:
    """A channel whose message arrives at ``arrives_at``; waits started earlier miss it."""

    def __init__(self, arrives_at: float | None) -> None:
        self.now = 0.0
        self.arrives_at = arrives_at
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def ready(self) -> bool:
        return self.arrives_at is not None and self.now >= self.arrives_at

    async def get_msg(self, timeout: float | None = None) -> dict:
        if timeout == 0:
            if self.ready():
                return {"msg": "reply"}
            raise Empty
        if self.ready():  # already there when the wait starts: seen
            return {"msg": "reply"}
        assert timeout is not None, "a wait with no end would hang this test"
        self.waits.append(timeout)
        self.now += timeout  # the wake-up is missed: the whole timeout passes
        raise Empty


def test_the_fake_shows_the_fault_a_single_long_wait_sleeps_through_the_reply() -> None:
    channel = DeafChannel(arrives_at=3.0)
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=600))
    assert channel.now == 600


def test_a_sliced_wait_finds_the_reply_within_one_slice_of_its_arrival() -> None:
    channel = DeafChannel(arrives_at=3.0)
    get = sliced(channel.get_msg, slice_s=2.0, clock=channel.clock)
    assert asyncio.run(get(timeout=600)) == {"msg": "reply"}
    assert channel.now <= 3.0 + 2.0
    assert all(w <= 2.0 for w in channel.waits)


def test_a_sliced_wait_with_no_deadline_still_finds_the_reply() -> None:
    channel = DeafChannel(arrives_at=9.5)
    get = sliced(channel.get_msg, slice_s=2.0, clock=channel.clock)
    assert asyncio.run(get(timeout=None)) == {"msg": "reply"}
    assert channel.now <= 9.5 + 2.0


def test_a_sliced_wait_ends_at_its_deadline_when_nothing_comes() -> None:
    channel = DeafChannel(arrives_at=None)
    get = sliced(channel.get_msg, slice_s=2.0, clock=channel.clock)
    with pytest.raises(Empty):
        asyncio.run(get(timeout=5.0))
    assert channel.now == 5.0  # slices of 2, 2, then the last 1: not a moment past the deadline
    assert channel.waits == [2.0, 2.0, 1.0]


def test_a_message_already_waiting_is_returned_without_a_wait() -> None:
    channel = DeafChannel(arrives_at=0.0)
    get = sliced(channel.get_msg, slice_s=2.0, clock=channel.clock)
    assert asyncio.run(get(timeout=0)) == {"msg": "reply"}
    assert channel.waits == []


def test_the_course_client_slices_its_shell_and_iopub_waits_and_runs_a_widget_cell() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import ipywidgets as w\nw.IntSlider(value=3)"),
                nbformat.v4.new_code_cell("print(6 * 7)")]
    client = SteadyClient(nb, timeout=120, kernel_name="python3")
    with client.setup_kernel():
        assert getattr(client.kc.shell_channel.get_msg, "sliced", False)
        assert getattr(client.kc.iopub_channel.get_msg, "sliced", False)
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in nb.cells[0].outputs)
    assert nb.cells[1].outputs[0]["text"] == "42\n"
