"""What the benchmarks share: data, the thread setting, and the runner of the mxnet 1.9.1
peer. Nothing here imports torch (the thread setting must come before it loads)."""
import os


def make_data(n, dim, classes, seed=0):
    """Overlapping Gaussian blobs: ``n`` rows of ``dim`` features in ``classes`` classes,
    hard enough that accuracy stays informative after a few epochs."""
    import numpy as np
    rng = np.random.RandomState(seed)
    centers = rng.randn(classes, dim).astype(np.float32) * 0.35
    y = rng.randint(0, classes, n)
    x = centers[y] + rng.randn(n, dim).astype(np.float32)
    return x.astype(np.float32), y.astype(np.float32)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHERLOCK = os.path.join(ROOT, "examples", "data", "sherlockholmes")


def run_mxnet_peer(python, args, timeout=1800):
    """Run ``benchmarks/mxnet_peer.py ARGS`` with mxnet's interpreter ``python``.

    Returns its JSON result, or None (with the reason printed) when it fails:
    the mxnet column is then reported as missing, never guessed.
    """
    import json
    import subprocess
    script = os.path.join(ROOT, "benchmarks", "mxnet_peer.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYMTRITON_", "TRITON_"))}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([python, script] + [str(a) for a in args], capture_output=True,
                          text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        print(f"mxnet peer failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def set_thread_env(argv, default):
    """``--threads N`` from ``argv`` (else ``default``) into the OpenMP / BLAS variables,
    before torch loads its thread pools; returns N."""
    n = default
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            n = int(argv[i + 1])
        elif a.startswith("--threads="):
            n = int(a.split("=", 1)[1])
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)
    return n


BUSY_LOOP = ("import time\n"
             "end = time.monotonic() + {seconds}\n"
             "while time.monotonic() < end:\n"
             "    pass\n")


class busy_loops:
    """``with busy_loops(n, seconds) as procs:`` ``n`` processes that spin on a core
    each (``while True: pass``) for the block; killed when it ends, and each stops on
    its own after ``seconds`` should the caller die first (no process outlives the
    bound). ``procs`` are their ``subprocess.Popen`` objects (empty for n = 0)."""

    def __init__(self, n, seconds):
        self.n, self.seconds = n, seconds
        self.procs = []

    def __enter__(self):
        import subprocess
        import sys
        code = BUSY_LOOP.format(seconds=float(self.seconds))
        try:
            for _ in range(self.n):
                self.procs.append(subprocess.Popen([sys.executable, "-c", code]))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.procs

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()
        return False
