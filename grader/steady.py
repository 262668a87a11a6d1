"""nbclient, waiting for the kernel's messages in short slices.

nbclient waits for a cell's ``execute_reply`` with one poll of the shell socket that
lasts the whole cell timeout (up to 20 minutes here). pyzmq's asyncio sockets wake such
a poll through the socket's file descriptor, which signals an edge, not a level: a
wake-up can be missed, and then the reply sits in the socket while the poll sleeps on.
The course saw it in CI after lesson 1's widget cell (the kernel idle, its reply sent,
the runner waiting); nbclient has the same report open (jupyter/nbclient#312).

``SteadyClient`` makes every wait of the shell and IOPub channels a series of slices:
each slice first asks zmq directly whether a message is ready (``poll(0)``, which reads
the socket's state, not an edge), then waits at most ``SLICE_S`` seconds. A missed
wake-up costs one slice, and a wait with a deadline still ends at that deadline.
"""
from __future__ import annotations

import time
from queue import Empty

from nbclient import NotebookClient
from nbclient.util import run_sync

SLICE_S = 2.0


def sliced(get_msg, slice_s: float = SLICE_S, clock=time.monotonic):
    """``get_msg(timeout)`` of an async channel, waiting in slices of ``slice_s`` seconds.

    Same contract as the channel's: the next message, or ``Empty`` once ``timeout``
    seconds have passed (``None``: wait for ever).
    """
    async def get_msg_in_slices(timeout: float | None = None, **kwargs):
        deadline = None if timeout is None else clock() + timeout
        while True:
            try:
                return await get_msg(timeout=0, **kwargs)  # the socket's state, read directly
            except Empty:
                pass
            left = None if deadline is None else deadline - clock()
            if left is not None and left <= 0:
                raise Empty
            try:
                return await get_msg(timeout=slice_s if left is None else min(slice_s, left), **kwargs)
            except Empty:
                continue

    get_msg_in_slices.sliced = True
    return get_msg_in_slices


class SteadyClient(NotebookClient):
    """A NotebookClient whose shell and IOPub waits cannot sleep through a message."""

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        for channel in (kc.shell_channel, kc.iopub_channel):  # a new client's channels: never sliced before
            channel.get_msg = sliced(channel.get_msg)
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # the sync path (setup_kernel) too
