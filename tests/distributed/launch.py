"""Start N worker processes the way torchrun does (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, LOCAL_RANK in the environment) and collect what they print."""
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(rank, world, port):
    env = dict(os.environ)
    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
               LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               OMP_NUM_THREADS="1", TRITON_INTERPRET="1",
               PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    return env


def start_command(cmd, world, extra_env=None, ranks=None):
    """Popen objects for ranks 0..world-1 (or only ``ranks``) each running ``cmd``
    (stdout and stderr together), with torchrun's environment and a fresh port."""
    port = free_port()
    procs = []
    for rank in range(world) if ranks is None else ranks:
        env = worker_env(rank, world, port)
        env.update(extra_env or {})
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    return procs


def start(job, world, out_dir, extra_env=None, ranks=None):
    """Workers running ``worker.py job out_dir`` (all ranks, or only ``ranks``)."""
    return start_command([sys.executable, os.path.join(HERE, "worker.py"), job, str(out_dir)],
                         world, extra_env, ranks)


def finish(procs, timeout):
    """Wait for every worker; returns [(returncode, output)]; kills all on timeout."""
    deadline = time.monotonic() + timeout
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += "\n[killed by the launcher: timeout]"
        results.append((p.returncode, out))
    return results


CLEAN_EXIT = "exit state: threads [], process group destroyed"


def assert_clean_exit(out, rank=""):
    """What worker.py prints after every other atexit handler: no thread of ours left
    running and the process group destroyed; and no abort, no C++ frames."""
    assert CLEAN_EXIT in out, f"rank {rank} did not exit cleanly:\n{out[-3000:]}"
    for bad in ("terminate called", "frame #", "Exception raised from"):
        assert bad not in out, f"rank {rank} printed {bad!r}:\n{out[-3000:]}"


def run(job, world, out_dir, timeout=300):
    """Run a job on ``world`` workers; fail with every worker's output unless all exit 0
    cleanly (:func:`assert_clean_exit`)."""
    results = finish(start(job, world, out_dir), timeout)
    if any(rc != 0 for rc, _ in results):
        logs = "\n".join(f"--- rank {r} (exit {rc}) ---\n{out[-4000:]}"
                         for r, (rc, out) in enumerate(results))
        raise AssertionError(f"job {job} on {world} workers failed:\n{logs}")
    for r, (_, out) in enumerate(results):
        assert_clean_exit(out, r)
    return results
