"""The adaptive thread policy's state machine: baselines, the ladder, trials, decisions.

Once a key (a bound launch list) has a baseline at the current count (the mean of
its last 2 to 4 runs), :class:`ThreadPolicy` tries the neighbouring count of a
ladder (the user's count, its half, its quarter, ..., 1) for a few runs, compares
them with the same keys' baselines, keeps the faster (by 10% at least: a near tie
keeps the count in use), and tries again later, since the load of a machine
changes:

* a trial starts on one of the cheapest keys, and a trial run that has taken
  three times its key's baseline goes back to the count in use between two
  launches; after one such run, or two runs 1.5x slower, the trial is lost. So
  trying more threads on a busy machine (ten times slower) costs about two
  baseline runs of a cheap key;
* the interval between trials doubles from 1 s to 60 s while nothing changes,
  and the next trial never comes sooner than the seconds the last one lost
  divided by a budget of 3%: trials cost about 3% of the time at most;
* a key whose mean time moves by more than 1.4x from its reference (the load
  came or went) asks for a trial as soon as the budget allows, in the direction
  the time moved;
* a run more than 3x its key's baseline with a team of two or more threads,
  while the load reading says the cores are taken, moves down at once without a
  trial (:meth:`ThreadPolicy._team_stalled`): such a team loses every time;
* a trial of more threads waits while the cores are taken
  (``runtime/threads_load.py``), and the ladder's row-split rung is tried only
  on a key that can split (``runtime/threads_split.py``).

The policy's clock is the time spent in timed launch lists, not the wall
clock, so what a program does between steps does not count as waiting.

This module owns the policies (:class:`ThreadPolicy`, :class:`FixedCount`), the
per-key statistics they keep, and the ladder; ``runtime/threads.py`` holds the
process's policy and runs launch lists with it.
"""
from __future__ import annotations

from collections import deque

from .threads_load import _cores
from .threads_split import MAX_DEFER, MIN_SPLIT_S, SPLIT, _label, _threads_of

MIN_BASE = 2                # runs of a key that make a baseline a trial may compare with


class _Stats:
    """What the policy keeps per key (a bound launch list), on the key itself.

    ``gen``: the policy generation ``recent`` belongs to (a change of count
    starts a new one); ``recent``: the last ``window`` seconds at the current
    count; ``ref``: the mean of a full window taken after the last decision,
    against which drift is measured; ``seen``: the counts this key ran at (the
    first run at a count is a warm-up: oneDNN makes its primitives then).
    """

    __slots__ = ("gen", "recent", "ref", "seen")

    def __init__(self):
        self.gen = -1
        self.recent = []
        self.ref = None
        self.seen = set()


class FixedCount:
    """``SYMTRITON_THREADS=N``: every launch list runs with ``min(N, cap)`` threads."""

    def __init__(self, n: int):
        self.n = n

    def choose(self, cap: int, key=None) -> int:
        return min(self.n, cap)

    def limit(self, key, n: int):
        return None

    def observe(self, key, n: int, seconds: float, cut: bool = False) -> None:
        pass

    def state(self) -> dict:
        return {"mode": f"{self.n}"}

    @property
    def count(self):
        return self.n


def _fits(n, others: int) -> bool:
    """Whether ``n`` threads (:data:`SPLIT`: its two) and ``others`` runnable tasks fit
    the machine's cores, one each."""
    return others + _threads_of(n) <= _cores()


class ThreadPolicy:
    """The adaptive thread count (module doc): measure, try a neighbour, keep the faster.

    Parameters
    ----------
    window : int
        The most runs per key that make its baseline (their mean; two suffice for a
        trial, a full window for drift).
    probe_pairs : int
        Tried runs, each paired with its key's baseline, before a decision.
    min_gain : float
        A tried count is kept only if its runs took at most ``1 - min_gain`` of
        the baseline's time: a near tie keeps the count in use.
    abort_first, abort_ratio : float
        A trial stops and loses at once when its first paired run took more
        than ``abort_first`` times its baseline, or two or more took more than
        ``abort_ratio`` times theirs.
    min_interval, max_interval : float
        Seconds between trials: the interval starts at ``min_interval`` after
        a change and doubles after each trial that kept the count, up to
        ``max_interval``.
    budget : float
        The next trial waits at least the seconds the last one lost divided by
        ``budget``.
    drift : float
        A key whose window mean moves by more than this factor from its
        reference asks for a trial.
    stall : float
        A run of a team of two or more threads slower than this factor times its
        key's baseline, with the cores taken by other tasks, leaves the count at
        once (:meth:`_team_stalled`).

    Notes
    -----
    The policy's clock is the sum of the timed runs' seconds, not the wall
    clock: intervals and the budget count the time spent in launches, whatever
    the program does between them (a data loader, a validation pass, another
    process's turn in a benchmark). Tests drive it with made-up timings.
    """

    def __init__(self, window=4, probe_pairs=6, min_gain=0.10, abort_first=3.0,
                 abort_ratio=1.5, min_interval=1.0, max_interval=60.0, budget=0.03,
                 drift=1.4, stall=3.0, others_running=None):
        self.clock = 0.0             # seconds of timed runs so far: the policy's time
        self.window, self.probe_pairs, self.min_gain = window, probe_pairs, min_gain
        self.abort_first, self.abort_ratio = abort_first, abort_ratio
        self.min_interval, self.max_interval = min_interval, max_interval
        self.budget, self.drift, self.stall = budget, drift, stall
        self.others_running = others_running
        self.split_seen = False      # whether any key with a row_split has run
        self.skipped = 0             # trials of more threads not run: the cores were taken
        self.cap = None
        self.decisions = deque(maxlen=64)   # (time, from, tried, kept, tried/baseline)
        self.trials = 0
        self.lost = 0.0              # seconds the lost trials cost beyond their baseline
        self._restart(None)

    # -- the state machine

    def _restart(self, cap):
        """Start over at ``cap`` (the first call, or the user changed the count)."""
        self.cap = cap
        self.ladder = _ladder(cap) if cap else [1]
        self.count = self._starting_count(cap)
        self.gen = getattr(self, "gen", 0) + 1
        self.probe = None
        self.due = None              # the first trial: once some key has a baseline
        self.earliest = float("-inf")
        self.interval = self.min_interval
        # from the user's count the only way is down; from a count the load chose,
        # the first trial goes up (it waits while the cores stay taken)
        self.direction = -1 if self.count == cap else 1
        self.deferred = 0            # runs of keys without a row-split while SPLIT was due
        self.least = float("inf")    # the smallest baseline mean of a key: trials start there
        self._clear_trial()

    def _clear_trial(self):
        self.tried = self.base = 0.0         # paired runs: what the decision compares
        self.cost_tried = self.cost_base = 0.0   # every run with a baseline: the trial's cost
        self.pairs = self.probe_calls = 0
        self.probe_runs = []         # (stats, seconds) of the trial, its baseline if kept

    def choose(self, cap: int, key=None) -> int:
        """The thread count for a run of ``key`` about to start, ``cap`` being
        torch's current count (:data:`SPLIT`: two row halves of one thread each,
        where ``key`` can split; one thread where it cannot). A trial starts only on
        a timed ``key`` with a baseline, among the cheapest (so a losing trial's
        first run costs little), or, for :data:`SPLIT`, one that can split."""
        if cap != self.cap:
            self._restart(cap)
        if not self.split_seen and getattr(key, "row_split", None) is not None:
            self.split_seen = True   # a key that may split exists: SPLIT trials wait for it
        if self.probe is not None:
            return self.probe
        if self.due is not None and self.clock >= self.due and key is not None and \
                len(self.ladder) > 1:
            mean = _mean_of(key, self.gen)
            target = self._neighbour(key, mean) if mean is not None else None
            if target is None or (target != SPLIT and mean > 1.5 * self.least):
                return self.count
            if _threads_of(target) > _threads_of(self.count) and self._cores_taken(target):
                self._skip_trial()
                return self.count
            self.probe = target
            self.trials += 1
            self.deferred = 0
            return self.probe
        return self.count

    def _neighbour(self, key, mean):
        """The ladder's next count from the one in use, in the current direction; None
        to wait for another key. :data:`SPLIT` is stepped over where ``key`` cannot
        split (its graph is refused, or its runs take under ``MIN_SPLIT_S``: the
        halves' fixed costs would eat the gain), where no key that may split has
        run, or after
        ``MAX_DEFER`` runs of keys without a row-split (an optimizer's, an imperative
        call's) while it was due."""
        i = self.ladder.index(self.count)
        if i == 0:
            step = 1
        elif i == len(self.ladder) - 1:
            step = -1
        else:    # the ladder runs from many threads to one: down is i + 1
            step = 1 if self.direction < 0 else -1
        j = i + step
        if self.ladder[j] != SPLIT:
            return self.ladder[j]
        rs = getattr(key, "row_split", None)
        if rs is not None and rs.forced is not None:
            return None              # a backward runs as its forward ran: wait for that
        if _splits(key, mean):
            return SPLIT
        if rs is None and self.split_seen and self.deferred < MAX_DEFER:
            self.deferred += 1
            return None
        j += step
        return self.ladder[j] if 0 <= j < len(self.ladder) else None

    def _starting_count(self, cap):
        """The count a (re)start begins at: ``cap``, or on a busy machine the most
        threads of the ladder that the free cores hold (1 at least). Starting at
        ``cap`` there would stall every parallel region of the first steps (and of a
        bind, ``runtime.threads.chosen_count``) until a trial moved down: Inception-BN's
        first training step on 2 cores beside other load took 18 s at 2 threads and
        0.9 s at 1. One reading of the load decides (the ladder runs from ``cap`` down)."""
        others = self.others_running() if self.others_running and cap and cap > 1 else None
        if others is None:
            return cap
        return next((n for n in self.ladder if n != SPLIT and _fits(n, others)), 1)

    def _cores_taken(self, n: int) -> bool:
        """Whether other runnable tasks leave fewer than ``n`` cores free right now
        (``others_running()``: their count, or None when unknown). Then a trial of
        ``n`` threads would share a core with another task: its regions would wait
        for a descheduled thread, and it would lose at a cost of several runs."""
        if self.others_running is None:
            return False
        others = self.others_running()
        return others is not None and not _fits(n, others)

    def _skip_trial(self):
        """A trial of more threads not run (the cores are taken): counted as a lost
        trial that cost nothing, so the next comes after the interval, doubled."""
        self.skipped += 1
        self.interval = min(self.interval * 2.0, self.max_interval)
        self.due = max(self.clock + self.interval, self.earliest)

    def limit(self, key, n: int):
        """After how many seconds a trial run of ``key`` with ``n`` threads should
        give up the tried count, or None: ``abort_first`` times the key's
        baseline. A trial of more threads on a busy machine can be ten times
        slower; cut short, its first run costs a few baseline runs at most."""
        if self.probe is None or n != self.probe:
            return None
        st = getattr(key, "_thread_stats", None)
        if st is None or st.gen != self.gen or len(st.recent) < MIN_BASE:
            return None
        return self.abort_first * _mean(st.recent)

    def observe(self, key, n: int, seconds: float, cut: bool = False) -> None:
        """Record that ``key`` ran with ``n`` threads for ``seconds``; ``cut``: the
        run went back to the count in use part way (see :meth:`limit`)."""
        self.clock += seconds
        now = self.clock
        st = _stats_of(key)
        if st.gen != self.gen:
            st.gen, st.recent, st.ref = self.gen, [], None
        warm = n not in st.seen      # a first run at a count: a warm-up, not a sample
        st.seen.add(n)
        if self.probe is not None:
            if n == self.probe:
                self._trial_run(st, seconds, now, warm, cut)
            return
        if warm or n != self.count:
            return
        others = self._team_stalled(st, seconds)
        if others is not None:
            self._leave_count(key, _mean(st.recent), now, seconds, others)
            return
        st.recent.append(seconds)
        if len(st.recent) > self.window:
            del st.recent[0]
        if len(st.recent) < MIN_BASE:
            return
        mean = _mean(st.recent)
        # a baseline exists: the first trial now (on a busy machine every step at
        # the user's count may cost several)
        if self.due is None:
            self.due = now
        self.least = min(self.least, mean)
        if len(st.recent) < self.window:
            return
        if st.ref is None:
            st.ref = mean
        elif mean > self.drift * st.ref or mean * self.drift < st.ref:
            # the load came (slower: fewer threads may pay) or went (faster: more may)
            self.direction = -1 if mean > st.ref else 1
            st.ref = mean
            self.least = mean        # the other keys' means are from before the change
            self.due = min(self.due, max(now, self.earliest))

    def _team_stalled(self, st, seconds):
        """The count of other runnable tasks when a run at the count in use just took
        more than ``stall`` times its key's baseline (``st``) and those tasks leave the
        count's team fewer cores than threads, else None: load has come, and every
        parallel region now waits for a descheduled thread (5-10x slower steps), so
        waiting for a full window and a trial would cost several such runs per key.
        The load is read only after such a run; a run 1.5x slower beside a passing
        task is the window's to weigh (an idle LeNet step meets one every few
        seconds)."""
        if _threads_of(self.count) < 2 or len(st.recent) < MIN_BASE or \
                seconds <= self.stall * _mean(st.recent) or self.others_running is None:
            return None
        others = self.others_running()
        return others if others is not None and not _fits(self.count, others) else None

    def _leave_count(self, key, mean, now, seconds, others):
        """Move at once, without a trial, to the most threads below the count in use
        that the free cores hold, or else to the row halves (only where ``key`` can
        split) or one thread, whose teams of one never wait for each other. A team
        that does not fit the cores loses to fewer threads every time, as a trial of
        more threads on taken cores would (:meth:`_skip_trial` never runs one). The
        next trial comes after the shortest interval and tries the rung below (from
        one thread, the halves); trials of more threads wait until the cores free up."""
        below = self.ladder[self.ladder.index(self.count) + 1:]
        target = next(n for n in below if (n != SPLIT or _splits(key, mean)) and
                      (_threads_of(n) == 1 or _fits(n, others)))
        old = self.count
        self.count = target
        self.gen += 1
        self.direction = -1
        self.interval = self.min_interval
        self.least = float("inf")
        self.decisions.append((now, old, target, target, seconds / mean))
        self.due = max(now + self.interval, self.earliest)

    def _trial_run(self, st, seconds, now, warm, cut):
        self.probe_calls += 1
        base = _mean(st.recent) if len(st.recent) >= MIN_BASE else None
        if base is not None:
            self.cost_tried += seconds
            self.cost_base += base
        if cut:                      # slower than abort_first times the baseline
            self._end_trial(False, now)
            return
        if not warm:
            self.probe_runs.append((st, seconds))
            if base is not None:
                self.tried += seconds
                self.base += base
                self.pairs += 1
        if self.pairs and (self.tried > self.abort_first * self.base or
                           (self.pairs >= 2 and self.tried > self.abort_ratio * self.base)):
            self._end_trial(False, now)
        elif self.pairs >= self.probe_pairs:
            self._end_trial(self.tried < (1.0 - self.min_gain) * self.base, now)
        elif self.probe_calls >= 4 * self.probe_pairs:
            self._end_trial(False, now)      # nothing to compare with: keep the count

    def _end_trial(self, keep_tried, now):
        old, tried = self.count, self.probe
        ratio = (self.tried / self.base if self.base else
                 self.cost_tried / self.cost_base if self.cost_base else float("nan"))
        lost = max(0.0, self.cost_tried - self.cost_base)
        self.lost += lost
        self.least = float("inf")    # found again as the keys' windows fill
        if keep_tried:
            self.count = tried
            self.gen += 1
            for st, seconds in self.probe_runs:       # the trial's runs: the new baseline
                if st.gen != self.gen:
                    st.gen, st.recent, st.ref = self.gen, [], None
                st.recent.append(seconds)
                del st.recent[:-self.window]
            self.interval = self.min_interval
            # the way that paid, again (the ladder runs from many threads to one)
            self.direction = -1 if self.ladder.index(tried) > self.ladder.index(old) else 1
        else:
            self.interval = min(self.interval * 2.0, self.max_interval)
            self.direction = -self.direction
        self.decisions.append((now, old, tried, self.count, ratio))
        self.earliest = now + max(self.min_interval, lost / self.budget)
        self.due = max(now + self.interval, self.earliest)
        self.probe = None
        self._clear_trial()

    def state(self) -> dict:
        """What the policy chose and did, for reports: mode, cap, count, trials,
        and the count changes as (from, to, ratio): a trial's tried/baseline, or
        for a move a stalled run forced (:meth:`_leave_count`), that run over its
        baseline (above ``stall``)."""
        return {"mode": "adaptive", "cap": self.cap, "count": _label(self.count),
                "trials": self.trials, "skipped": self.skipped, "lost_s": round(self.lost, 3),
                "changes": [(_label(d[1]), _label(d[3]), round(d[4], 3))
                            for d in self.decisions if d[1] != d[3]]}


def _ladder(cap: int) -> list:
    """The counts the policy moves between: ``cap``, its half, quarter, ..., 2,
    :data:`SPLIT` (two threads that never wait for each other inside a phase), 1."""
    out, n = [], cap
    while n >= 1:
        if not out or out[-1] != n:
            if n == 1 and cap >= 2:
                out.append(SPLIT)
            out.append(n)
        if n == 1:
            break
        n //= 2
    return out


def _mean(values):
    return sum(values) / len(values)


def _splits(key, mean) -> bool:
    """Whether ``key``, whose baseline mean is ``mean`` seconds, may run as row halves:
    it has a row-split whose graph is separable, and its runs are long enough to pay
    for two halves."""
    rs = getattr(key, "row_split", None)
    return rs is not None and mean >= MIN_SPLIT_S and rs.usable()


def _mean_of(key, gen):
    """``key``'s baseline mean in generation ``gen``, or None."""
    st = getattr(key, "_thread_stats", None)
    if st is None or st.gen != gen or len(st.recent) < MIN_BASE:
        return None
    return _mean(st.recent)


def _stats_of(key) -> _Stats:
    st = getattr(key, "_thread_stats", None)
    if st is None:
        st = _Stats()
        key._thread_stats = st
    return st

