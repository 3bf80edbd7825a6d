"""The hub's own search threads: bounded, lower priority, errors and cancellation handed back."""

from __future__ import annotations

import os
import threading

import anyio
import pytest

from toolsearch.mcp.search_threads import SearchThreads

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def test_at_most_size_calls_run_at_once_and_each_result_comes_back() -> None:
    threads = SearchThreads(2, nice=5)
    running, most, lock = 0, 0, threading.Lock()
    release = threading.Event()

    def call(i: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(10)
        with lock:
            running -= 1
        return i * i

    results: dict[int, int] = {}

    async def one(i: int) -> None:
        results[i] = await threads.run(lambda: call(i))

    async with anyio.create_task_group() as tasks:
        for i in range(6):
            tasks.start_soon(one, i)
        await anyio.sleep(0.2)
        release.set()
    threads.close()
    assert results == {i: i * i for i in range(6)}
    assert most == 2


async def test_calls_run_nicer_than_the_caller_and_errors_reach_it() -> None:
    threads = SearchThreads(1, nice=3)
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen = await threads.run(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
    assert seen == min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + 3)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine

    def fail() -> None:
        raise ValueError("the index is gone")

    with pytest.raises(ValueError, match="the index is gone"):
        await threads.run(fail)
    threads.close()
    with pytest.raises(RuntimeError, match="closed"):
        await threads.run(lambda: None)


async def test_a_cancelled_caller_leaves_its_queued_call_unstarted() -> None:
    threads = SearchThreads(1, nice=0)
    busy, release, started = threading.Event(), threading.Event(), []

    def block() -> None:
        busy.set()
        release.wait(10)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(threads.run, block)
        await anyio.to_thread.run_sync(busy.wait, 10)
        with anyio.move_on_after(0.1):
            await threads.run(lambda: started.append(1))
        release.set()
    await threads.run(lambda: None)  # the queue has moved past the cancelled call
    threads.close()
    assert started == []
