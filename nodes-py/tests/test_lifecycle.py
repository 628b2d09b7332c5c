"""Threads and processes: interpreter exit with live pipelines, and a
pipeline used in a forked child."""

import os
import subprocess
import sys
import textwrap

import pytest

import nodes_rs.torchdata as tn

LIVE_AT_EXIT = textwrap.dedent(
    """
    import threading
    import nodes_rs.torchdata as tn

    never = threading.Event()

    def slow(x):
        if x == 50:
            never.wait()  # a worker stays inside Python until the end
        return x

    mapped = tn.ParallelMapper(tn.IterableWrapper(range(10**6)), slow, num_workers=2)
    loader = tn.Loader(tn.Prefetcher(tn.Batcher(mapped, 4), 8))
    it = iter(loader)
    print(next(it), next(it), flush=True)
    # Falls off the end with the loader live and a worker blocked.
    """
)


@pytest.mark.timeout(120)
def test_interpreter_exit_with_a_live_pipeline_neither_hangs_nor_crashes() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LIVE_AT_EXIT], capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0, 1, 2, 3] [4, 5, 6, 7]"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.timeout(120)
def test_a_pipeline_used_in_a_forked_child_raises_naming_fork() -> None:
    node = tn.Prefetcher(tn.IterableWrapper(range(100)), 4)
    assert next(node) == 0
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what using the parent's pipeline did
        os.close(read)
        messages = []
        for use in (lambda: next(node), lambda: node.reset(), lambda: node.state_dict()):
            try:
                use()
                messages.append("no error")
            except Exception as e:  # noqa: BLE001 - the child reports any error
                messages.append(f"{type(e).__name__}: {e}")
        message = "\n".join(messages)
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        message = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    lines = message.splitlines()
    assert len(lines) == 3 and all("fork" in m and "ValueError" in m for m in lines), message
    assert next(node) == 1  # the parent's pipeline goes on


CTRL_C_WHILE_WAITING = textwrap.dedent(
    """
    import os, signal, threading
    import nodes_rs.torchdata as tn

    took_first, never = threading.Event(), threading.Event()

    class Stalls:
        # Item 0 at once; item 1 never. The prefetch thread sends SIGINT
        # once the consumer has taken item 0 and goes for item 1, and it can
        # run Python only while the consumer, inside next(), has released
        # the GIL: the signal arrives while the consumer waits in Rust.
        def __iter__(self):
            yield 0
            took_first.wait()
            os.kill(os.getpid(), signal.SIGINT)
            never.wait()

    node = tn.Prefetcher(tn.IterableWrapper(Stalls()), 1)
    assert next(node) == 0
    try:
        took_first.set()
        next(node)
        print("no interrupt")
    except KeyboardInterrupt:
        print("interrupted")
    """
)


@pytest.mark.timeout(120)
def test_ctrl_c_interrupts_a_next_that_waits_for_workers() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C_WHILE_WAITING], capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "interrupted"


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_importing_the_package_starts_no_thread() -> None:
    """Counts the process's threads (every OS thread, Rust's too) after the
    imports, in a fresh interpreter."""
    program = textwrap.dedent(
        """
        import os
        import nodes_rs, nodes_rs.torchdata, nodes_rs.torchdata.samplers.multi_node_round_robin_sampler
        print(len(os.listdir("/proc/self/task")))
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


DROPPED_ON_ITS_WORKER = textwrap.dedent(
    """
    import gc, os, sys, threading
    import nodes_rs.torchdata as tn

    armed, holder, unraisable = threading.Event(), {}, []
    sys.unraisablehook = lambda u: unraisable.append(repr(u.exc_value))

    def items():
        yield 0
        armed.wait()  # a worker pulling the source, which it holds
        holder.clear()  # the pipeline's last references
        gc.collect()  # so it is dropped here, on its own worker
        yield from range(1, 10**6)

    def pipeline_threads():
        names = []
        for task in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{task}/comm") as comm:
                    names.append(comm.read().strip())
            except OSError:  # it ended meanwhile
                pass
        return [n for n in names if n.startswith(("nodes-par-map", "nodes-reaper"))]

    node = tn.ParallelMapper(tn.IterableWrapper(items()), lambda x: x, num_workers=2)
    it = iter(node)
    print(next(it), bool(pipeline_threads()), flush=True)
    holder["refs"] = (node, it)
    del node, it
    armed.set()
    # Every thread the pipeline started ends: its workers, and whatever
    # joins them.
    while pipeline_threads():
        pass
    print(unraisable, flush=True)
    """
)


@pytest.mark.timeout(120)
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_a_pipeline_dropped_on_its_own_worker_neither_hangs_nor_panics() -> None:
    """Python's garbage collector runs wherever Python code does: here it
    drops a pipeline on one of that pipeline's workers, inside its source."""
    done = subprocess.run(
        [sys.executable, "-c", DROPPED_ON_ITS_WORKER], capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["0 True", "[]"]
