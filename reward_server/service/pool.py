"""A pool of verification processes with a hard per-item budget.

``concurrent.futures.ProcessPoolExecutor`` cannot stop one stuck task: sympy can spend minutes
(or all memory) on ``10^{10^{10^{10}}}``. Here each worker process has its own pipe and runs one
check at a time under two bounds:

- **CPU budget** (``timeout_s``): the check may use this much of its worker's CPU time. The
  worker arms a CPU-time timer (``ITIMER_PROF``) before each check; when it fires, the kernel
  ends the worker (SIGPROF's default action, so even a check stuck inside one C call is
  stopped). CPU time is what decides, not wall time: a check that waits for a CPU on a busy
  machine, or for a free worker, uses none, so the same answer gets the same verdict however
  loaded the machine is.
- **Wall-clock safety net** (``wall_timeout_s``, several times the budget): from the answer's
  arrival, waiting for a worker included. Past it the caller stops waiting and is told the
  verdict could not be computed (``wall_timeout``, ``queue_timeout``: a retryable 503), so no
  answer takes longer than the net however busy the machine. **The check does not stop with
  it**: a check still using CPU (slowed, not stuck: a worker starved of CPU beside other work)
  runs on within its CPU budget, and a retry of the same answer joins it (the verifier's
  single-flight) or finds its verdict cached, so retries converge instead of starting the same
  check again each time. A check that used no CPU since the last look (``_ask``) hangs, and its
  worker is killed; one still queued when nobody has waited for it for a net
  (``RETRY_WINDOW_FACTOR``) is dropped. What a client can leave running is therefore bounded:
  one check per worker, each within its CPU budget of CPU time and ``HANG_FACTOR`` nets of wall
  time.

Checks wait for a worker in a fair queue (``FairQueue``): one FIFO per client, served by
the worker time each client has used, so one client's big batches cannot hold the others back.

A killed worker is replaced while the other workers keep serving. A check whose worker dies
under it for another reason (killed by an operator or the OOM killer, or exited after a
MemoryError on an earlier answer) is run again on the replacement, within the safety net, so a
lost process does not become a wrong reward; a worker that dies while idle is replaced at once.
Workers are started with the
``forkserver`` context on Linux (never plain ``fork``: the server is multi-threaded); the
forkserver imports and warms the verifier once (``forkserver_init.py``), so a replacement is
ready in milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import heapq
import itertools
import logging
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

from reward_server.checker.pending import SymbolicCheck
from reward_server.protocol import Reason

log = logging.getLogger(__name__)

Target = Callable[[SymbolicCheck], tuple[bool, str]]

_STARTUP_TIMEOUT_S = 120.0  # a cold start imports sympy + ANTLR; generous on a loaded machine
# Tries of each worker's first start: a forkserver left dying by the pool before (its thread
# gone) fails one start, and the next runs a new one; a worker that cannot start at all (a
# broken install) still stops the server at start-up.
_START_ATTEMPTS = 3
# Most runs of one check whose workers keep dying under it (it also stops once its runs have
# taken the timeout in all): an answer that does crash workers costs a few restarts, then
# scores 0 as ``check_error`` (the answer's doing, since it lost a worker every time).
_MAX_RUNS_WHEN_LOST = 10
WORKER_LOST = "WorkerLost"  # the ``error`` of a check whose every run lost its worker
# A check nobody waits for any more stays queued this many nets after its last caller left (a
# retry within them joins it); then it is dropped.
RETRY_WINDOW_FACTOR = 1.0
# A running check is killed when it used no CPU time since the last look (at its first caller's
# net, then every half net: stuck, not slowed) or when it has run this many nets in all.
HANG_FACTOR = 10.0
# CPU seconds a check must use between two looks to count as running.
_MIN_PROGRESS_S = 0.005
# The wall-clock safety net when none is given: this many CPU budgets. Two CPU-bound processes
# beside two workers on two cores leave each worker about a quarter of a core (the workers run
# at a lower priority), so a check that uses its whole budget then takes about 4x its wall time.
WALL_NET_FACTOR = 5.0
WORKER_NICENESS = 5  # added to a verification worker's nice value (lower CPU priority)
PROCESS_NAME = "gtpo-rs-verify"  # what ps/top show for a verification worker (Linux)


@dataclass(frozen=True)
class PoolResult:
    """Outcome of one check: ``equal`` is True only for ``equivalent``."""

    equal: bool
    reason: str
    cause: str | None = None  # a timeout's cause: CAUSE_CPU, CAUSE_WALL or CAUSE_QUEUE
    error: str | None = None  # ``check_error``: the exception the check raised in its worker


# Why a check timed out (the ``cause`` label of ``gtpo_rs_verify_timeouts_total``): its CPU
# budget ran out (the answer's cost), or the wall-clock safety net passed while it ran or while
# it waited for a worker (the machine's load).
CAUSE_CPU = "cpu"
CAUSE_WALL = "wall"
CAUSE_QUEUE = "queue"


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int | None) -> float | None:
    """The CPU time a process has used (user and system), from ``/proc`` (Linux); None where
    it cannot be read (then a check past its net counts as stuck, the cautious reading)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime


# What systemd, Slurm, `kill -- -PGID` and Ctrl-C send to the server's whole process group.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """Block the stop signals in this thread while it starts a process: a new process keeps the
    mask across exec, so the forkserver cannot die of a signal to the group (with a
    KeyboardInterrupt traceback for SIGINT) while it imports the checker, seconds on a busy
    machine, before ``forkserver_init`` ignores them and unblocks them. The same pattern as
    multiprocessing's own resource tracker, which is started first here: its start unblocks
    these signals when it is done, and would lift the block before the forkserver started. A
    signal meanwhile waits, and reaches this process when the block ends."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no process groups to signal
        yield
        return
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def ignore_stop_signals() -> None:
    """Ignore the stop signals and unblock them (``stop_signals_blocked``): this process ends
    when the server ends it, never of a signal sent to the whole group."""
    for stop in STOP_SIGNALS:
        signal.signal(stop, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies (no orphans even if the
    server is killed with -9 while a worker is busy and cannot notice the closed pipe)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG


def _name_process(name: str) -> None:
    """Set the name ps/top/pkill see (``/proc/PID/comm``), so an operator can tell verification
    workers from the server process (they otherwise show the same command line)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(15, name.encode()[:15])  # PR_SET_NAME


def _worker_main(
    conn: Connection, target: Target, hang_answer: object, memory_mb: int, cpu_s: float
) -> None:
    """Worker loop: receive (job_id, check), send (job_id, equal, reason, CPU
    seconds the check used, the name of the exception it raised or None). A check that uses
    ``cpu_s`` of CPU time ends this process."""
    die_with_parent()
    _name_process(PROCESS_NAME)
    # Checks are batch work; the server's event loop is what keeps every answer's deadline.
    # On a busy machine it must win the CPU, or a burst of slow checks delays even the answers
    # the cost guard refuses at once.
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)
    # Ctrl-C, and the SIGTERM that systemd, Slurm or `kill -- -PGID` send, reach the whole
    # process group: a worker that died of it would be replaced while the server drains its
    # requests. Ending workers is the server's job (``close``; the death signal above).
    ignore_stop_signals()
    # The CPU budget: SIGPROF's default action ends the process, which the pool reads from the
    # exit status. No Python handler: it would only run between bytecodes, never inside a long
    # C call (big-integer arithmetic), which is where a costly check spends its time.
    budget = hasattr(signal, "setitimer")  # Unix; elsewhere the wall-clock net alone bounds it
    if budget:
        signal.signal(signal.SIGPROF, signal.SIG_DFL)
    if memory_mb > 0:
        import resource

        limit = memory_mb * 1024 * 1024
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        target(SymbolicCheck("1", "1"))  # import and warm the parser before reporting ready
    except Exception:
        log.exception("verification worker warm-up failed")
    try:
        conn.send(("ready", os.getpid()))
    except OSError:
        return  # the server gave up on this worker (its start-up took too long, or it is closing)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return  # the server went away
        if msg is None:
            return
        job_id, check = msg
        fatal = False
        error = None
        cpu0 = time.process_time()
        if budget:
            signal.setitimer(signal.ITIMER_PROF, cpu_s)  # counts this process's CPU time only
        try:
            if hang_answer is not None and check.answer == hang_answer:
                while True:  # test hook: behave like a hung sympy call, which burns CPU
                    pass
            equal, reason = target(check)
        except Exception as exc:  # a parser bug (or the memory limit) costs one answer
            equal, reason, error = False, Reason.CHECK_ERROR, type(exc).__name__
            fatal = isinstance(exc, MemoryError)  # the heap may be unusable: start afresh
        finally:
            if budget:
                signal.setitimer(signal.ITIMER_PROF, 0)  # disarmed while idle
        cpu = time.process_time() - cpu0
        try:
            conn.send((job_id, bool(equal), str(reason), cpu, error))
        except (OSError, ValueError):
            return
        if fatal:
            return  # after MemoryError the heap may be unusable; the pool replaces us


@dataclass
class _Worker:
    process: mp.process.BaseProcess
    conn: Connection
    tasks: int = 0


@dataclass
class Job:
    """One check in the pool, from its first caller to its result (``result``, set once the
    check has run or been given up, whoever still waits for it). ``deadline``
    (``time.perf_counter()``) is its first caller's net, when the pool first looks whether a
    running check still uses CPU. ``client``: who asked first (the fair queue's key).
    ``waiters``: callers waiting now; ``left_at``: when the last one stopped."""

    check: SymbolicCheck
    result: asyncio.Future[PoolResult]
    queued_at: float
    deadline: float
    client: Hashable = None
    started: bool = False
    waiters: int = 0
    left_at: float = 0.0


# What a check is charged when a worker takes it, before its time is known: enough that a
# client with many checks waiting does not take every free worker at once.
_CHARGE_AT_START_S = 0.01
# Clients remembered between their requests while they are this far ahead of the client served
# last (their next checks start where their last ones left off, not level with a newcomer):
# a client whose checks use whole CPU budgets. One only a little ahead starts level, so that
# ordinary clients are served in the order they ask (remembering every client doubled the p99
# of the load benchmark, 64 clients on keep-alive connections). The oldest are forgotten past
# _CLIENTS_REMEMBERED.
_REMEMBERED_AHEAD_S = 0.5
_CLIENTS_REMEMBERED = 10_000


@dataclass
class _Client:
    jobs: deque[Job] = field(default_factory=deque)
    service: float = 0.0  # worker seconds its checks used (estimates while they run)
    running: int = 0
    entry: int = -1  # the sequence number of its live entry in the queue's heap


class FairQueue:
    """The checks waiting for a worker: one FIFO per client, and the next check taken from the
    client whose checks have used the least worker time so far (start-time fair queuing, as a
    CPU scheduler shares a core between processes). A client that arrives starts level with the
    client served last, never with a credit; one that comes back (the next request on its
    connection) starts where its last check left it when that is further, so a client whose
    every check uses its whole CPU budget queues behind those that used less. With one FIFO for
    everyone, one client's 4,096-pair batch held every other client's checks back 9.4 s; here a
    single check waits at most for the checks already running and those of clients no more
    served than its own.

    One event loop: ``put``, ``await get()``, then ``done`` with the seconds the check held a
    worker."""

    def __init__(self) -> None:
        self._clients: dict[Hashable, _Client] = {}
        self._heap: list[tuple[float, int, Hashable]] = []  # (service, entry, client key)
        self._entries = itertools.count()
        self._floor = 0.0  # the service of the client served last: where newcomers start
        self._idle: OrderedDict[Hashable, float] = OrderedDict()  # clients ahead, between checks
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.waiting = 0

    def put(self, job: Job) -> None:
        client = self._clients.get(job.client)
        if client is None:
            service = max(self._floor, self._idle.pop(job.client, 0.0))
            client = self._clients[job.client] = _Client(service=service)
        client.jobs.append(job)
        self.waiting += 1
        if len(client.jobs) == 1:
            self._enter(job.client, client)
        self._wake()

    async def get(self) -> Job:
        while True:
            job = self._pop()
            if job is not None:
                return job
            woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(woken)
            try:
                await woken
            except asyncio.CancelledError:
                if woken.done() and not woken.cancelled():
                    self._wake()  # woken for a job it will not take: pass it on
                else:
                    self._waiters.remove(woken)
                raise

    def done(self, job: Job, seconds: float) -> None:
        """``job`` left its worker after ``seconds`` (0 when it was skipped): its client's
        charge is corrected, and a client with nothing left is forgotten."""
        client = self._clients[job.client]
        client.service += seconds - _CHARGE_AT_START_S
        client.running -= 1
        if client.jobs:
            self._enter(job.client, client)  # its place moves with its new service
        elif client.running == 0:
            del self._clients[job.client]
            if client.service > self._floor + _REMEMBERED_AHEAD_S:
                self._idle[job.client] = client.service
                if len(self._idle) > _CLIENTS_REMEMBERED:
                    self._idle.popitem(last=False)

    def drain(self) -> list[Job]:
        """Every waiting job, taken out (the pool is closing)."""
        jobs = [job for client in self._clients.values() for job in client.jobs]
        for client in self._clients.values():
            client.jobs.clear()
        self.waiting = 0
        return jobs

    def _enter(self, key: Hashable, client: _Client) -> None:
        client.entry = next(self._entries)
        heapq.heappush(self._heap, (client.service, client.entry, key))

    def _pop(self) -> Job | None:
        while self._heap:
            _, entry, key = heapq.heappop(self._heap)
            client = self._clients.get(key)
            if client is None or entry != client.entry or not client.jobs:
                continue  # an entry left behind when the client's service changed
            job = client.jobs.popleft()
            self.waiting -= 1
            self._floor = max(self._floor, client.service)
            client.service += _CHARGE_AT_START_S
            client.running += 1
            if client.jobs:
                self._enter(key, client)
            return job
        return None

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


class _Stopping(Exception):
    """A worker is lost after the server began to stop (``stop_replacing``): its slot ends
    instead of starting another."""


class _WorkerLost(Exception):
    """The worker ended without an answer: ``reason`` is the verdict's (``timeout``,
    ``wall_timeout``, ``worker_error``), ``cause`` a timeout's cause (``CAUSE_CPU``,
    ``CAUSE_WALL``)."""

    def __init__(self, reason: str, cause: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.cause = cause


# The forkserver listens on a Unix socket that multiprocessing names
# <TMPDIR>/pymp-XXXXXXXX/listener-XXXXXXXX; Linux takes a socket path of at most 107 bytes, and
# a longer TMPDIR (a job scheduler's per-job folder) made the server die at start-up with
# "AF_UNIX path too long" in a traceback.
SOCKET_PATH_MAX = 107
_FORKSERVER_SOCKET_NAME = len("/pymp-XXXXXXXX/listener-XXXXXXXX")


class TempDirTooLongError(RuntimeError):
    """The temporary folder leaves no room for the forkserver's socket path."""


def check_socket_room(tempdir: str | None = None) -> None:
    """Raise ``TempDirTooLongError``, naming the fix, when the forkserver's socket path under
    ``tempdir`` (default: the one multiprocessing uses) would pass ``SOCKET_PATH_MAX``."""
    if not sys.platform.startswith("linux"):
        return  # spawn: no forkserver socket
    folder = tempdir if tempdir is not None else tempfile.gettempdir()
    length = len(os.fsencode(folder)) + _FORKSERVER_SOCKET_NAME
    if length > SOCKET_PATH_MAX:
        raise TempDirTooLongError(
            f"the temporary folder {folder} is too long for the verification pool's socket "
            f"({length} bytes with its name, Linux allows {SOCKET_PATH_MAX}): set TMPDIR to a "
            f"folder of at most {SOCKET_PATH_MAX - _FORKSERVER_SOCKET_NAME} characters"
        )


def _context() -> mp.context.BaseContext:
    if sys.platform.startswith("linux"):
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["reward_server.service.forkserver_init"])
        return ctx
    return mp.get_context("spawn")


class VerifierPool:
    """``size`` worker processes running ``target(check)``, each check bounded by
    ``timeout_s`` of its worker's CPU time and by ``wall_timeout_s`` of wall-clock time from the
    answer's arrival (default ``WALL_NET_FACTOR`` CPU budgets).

    Use from one event loop: ``await start()``, ``await run(check)``, ``await close()``.
    """

    def __init__(
        self,
        target: Target,
        size: int,
        timeout_s: float,
        *,
        wall_timeout_s: float | None = None,
        memory_mb: int = 0,
        max_tasks: int = 0,
        hang_answer: object = None,
        on_restart: Callable[[str], None] | None = None,
        on_timing: Callable[[float, float, float], None] | None = None,
        on_size: Callable[[int], None] | None = None,
        on_rerun: Callable[[], None] | None = None,
        on_timeout: Callable[[str], None] | None = None,
    ) -> None:
        wall_timeout_s = WALL_NET_FACTOR * timeout_s if wall_timeout_s is None else wall_timeout_s
        if wall_timeout_s < timeout_s:
            raise ValueError(
                f"the wall-clock safety net ({wall_timeout_s} s) is below the CPU budget "
                f"({timeout_s} s): a check could never use its budget; raise the net"
            )
        self._target = target
        self._size = size
        self._timeout_s = timeout_s
        self._wall_timeout_s = wall_timeout_s
        self._memory_mb = memory_mb
        self._max_tasks = max_tasks
        self._hang_answer = hang_answer
        self._on_restart = on_restart or (lambda reason: None)
        # (seconds waiting for a free worker, seconds in the worker, CPU seconds the worker
        # used) of every finished check
        self._on_timing = on_timing or (lambda queued, busy, cpu: None)
        # live worker processes after every start or kill (a gauge: full size means recovered);
        # called under the pool's lock, so it must be quick and never call back into the pool
        self._on_size = on_size or (lambda n: None)
        # a check is run again because its worker died under it
        self._on_rerun = on_rerun or (lambda: None)
        # a check timed out, with its cause (CAUSE_CPU, CAUSE_WALL, CAUSE_QUEUE)
        self._on_timeout = on_timeout or (lambda cause: None)
        self._ctx = _context()
        self._ids = itertools.count()
        self._procs: set[mp.process.BaseProcess] = set()
        self._procs_lock = threading.Lock()
        self._closed = False
        self._stopping = False  # the server is stopping: no worker is replaced any more
        self._queue: FairQueue | None = None
        self._slots: list[asyncio.Task[None]] = []
        self.ready = False

    # ------------------------------------------------------------ lifecycle

    def _spawn(self) -> _Worker:
        """Start one worker and wait until it has warmed up (blocking: run in a thread)."""
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=_worker_main,
            args=(child, self._target, self._hang_answer, self._memory_mb, self._timeout_s),
            daemon=True,
            name="gtpo-rs-verify",
        )
        try:
            with stop_signals_blocked():  # this start may run a new forkserver
                proc.start()
        except (OSError, EOFError) as exc:
            # The forkserver died before it forked this worker (killed, or out of memory): the
            # next start runs a new one, so the caller retries (a RuntimeError, as below).
            parent.close()
            child.close()
            raise RuntimeError(f"verification worker did not start: {exc!r}") from exc
        child.close()
        with self._procs_lock:
            self._procs.add(proc)
            closed = self._closed
            self._on_size(len(self._procs))  # under the lock: see _kill
        try:
            if closed or not parent.poll(_STARTUP_TIMEOUT_S):
                raise RuntimeError("pool closed or start-up too slow")
            parent.recv()  # the "ready" message; EOFError if the worker died while warming up
        except (RuntimeError, EOFError, OSError) as exc:
            self._kill(proc, parent)
            raise RuntimeError(f"verification worker did not start: {exc!r}") from exc
        return _Worker(proc, parent)

    def _kill(self, proc: mp.process.BaseProcess, conn: Connection | None = None) -> None:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        with self._procs_lock:
            self._procs.discard(proc)
            # Reported while counted: workers start and die in several threads at once (all of
            # them after the forkserver dies), and a count reported after the lock could arrive
            # after a newer one and leave the gauge short of a pool that is whole.
            self._on_size(len(self._procs))
        if conn is not None:
            conn.close()

    async def start(self) -> None:
        """Start every worker (in parallel threads) and the dispatch tasks."""
        self._queue = FairQueue()
        if self._ctx.get_start_method() == "forkserver":
            # Start the forkserver from this (the loop's) thread, not from an executor thread:
            # its death signal (forkserver_init.py) follows the thread that forked it.
            from multiprocessing import forkserver

            check_socket_room()
            with stop_signals_blocked():
                forkserver.ensure_running()
        started = await asyncio.gather(
            *(self._start_worker(attempts=_START_ATTEMPTS) for _ in range(self._size)),
            return_exceptions=True,
        )
        if self._stopping:
            # A stop signal came during the start: the server stops without serving, and
            # `close` kills the workers that did start.
            log.info("stopping: the verification pool was not put to work")
            return
        for outcome in started:
            if isinstance(outcome, BaseException):
                raise outcome
        for worker in started:
            self._start_slot(worker)
        self.ready = True
        log.info("verification pool ready: %d workers", self._size)

    def stop_replacing(self) -> None:
        """The server is stopping (a stop signal came; the requests in flight are being
        answered): a worker lost from now on is not replaced, and its slot ends. Its check's
        caller gets ``worker_error`` (no verdict: a retryable 503), or the verdict the loss
        decided. A new worker started now would only be killed moments later by ``close``, and a
        new forkserver could outlive the server. Safe to call from a signal handler."""
        self._stopping = True

    async def close(self) -> None:
        """Stop dispatching, fail queued checks, and kill every worker process."""
        self.ready = False
        with self._procs_lock:
            self._closed = True
        for task in self._slots:
            task.cancel()
        await asyncio.gather(*self._slots, return_exceptions=True)
        self._slots = []
        if self._queue is not None:
            for job in self._queue.drain():
                if not job.result.done():
                    job.result.set_result(PoolResult(False, Reason.WORKER_ERROR))
        with self._procs_lock:
            procs = list(self._procs)
        for proc in procs:
            self._kill(proc)

    # ------------------------------------------------------------ work

    async def run(
        self,
        check: SymbolicCheck,
        *,
        deadline: float | None = None,
        client: Hashable = None,
    ) -> PoolResult:
        """Run one check and wait for it (``submit``, then ``wait``); a timeout or crashed worker
        gives ``equal=False``."""
        return await self.wait(self.submit(check, deadline=deadline, client=client), deadline)

    def submit(
        self, check: SymbolicCheck, *, deadline: float | None = None, client: Hashable = None
    ) -> Job:
        """Queue one check; its ``Job`` runs to its result whoever waits for it (``wait``).

        The check gets ``timeout_s`` of its worker's CPU time, however long it waits for a
        worker or for a CPU. ``deadline`` (``time.perf_counter()``) is the caller's: one CPU
        budget after the answer arrived, as the routes and the scorer compute it (default: one
        budget from now). ``client`` (any hashable: the routes pass the connection's peer) is
        whom the fair queue shares the workers between."""
        if self._queue is None or self._closed:
            raise RuntimeError("verification pool is not running")
        now = time.perf_counter()
        net = self._net(now, deadline)
        job = Job(check, asyncio.get_running_loop().create_future(), now, net, client, left_at=now)
        self._queue.put(job)
        return job

    async def wait(self, job: Job, deadline: float | None = None) -> PoolResult:
        """``job``'s result, or, once this caller's wall-clock net has passed (``wall_timeout_s``
        after its answer arrived: ``deadline`` less one CPU budget), ``wall_timeout`` (the check
        is running) or ``queue_timeout`` (it waits for a worker): neither is the answer's fault
        nor a verdict, and the check goes on for a retry to find (see the module)."""
        now = time.perf_counter()
        net = self._net(now, deadline)
        job.waiters += 1
        try:
            result = await asyncio.wait_for(asyncio.shield(job.result), max(0.0, net - now))
        except asyncio.TimeoutError:
            if job.result.done():
                result = job.result.result()
            elif job.started:
                result = PoolResult(False, Reason.WALL_TIMEOUT, CAUSE_WALL)
            else:
                result = PoolResult(False, Reason.QUEUE_TIMEOUT, CAUSE_QUEUE)
        finally:
            job.waiters -= 1
            job.left_at = time.perf_counter()
        if result.cause in (CAUSE_WALL, CAUSE_QUEUE):
            self._on_timeout(result.cause)  # each caller told "not computed", once
        return result

    def _net(self, now: float, deadline: float | None) -> float:
        arrived = now if deadline is None else deadline - self._timeout_s
        return arrived + self._wall_timeout_s

    def _start_slot(self, worker: _Worker | None) -> None:
        """Dispatch checks to ``worker`` (a new one when None) until the pool closes."""
        task = asyncio.create_task(self._run_slot(worker))
        task.add_done_callback(self._slot_ended)
        self._slots = [t for t in self._slots if not t.done()] + [task]

    def _slot_ended(self, task: asyncio.Task[None]) -> None:
        """A slot ends only when the pool closes. One that fails (a defect: every loss of a
        worker is handled inside it) is logged and another takes its place, so that the pool
        stays whole instead of serving with one worker fewer for the rest of its life."""
        if self._closed or task.cancelled() or task.exception() is None:
            return
        log.error("a verification slot failed; another takes its place", exc_info=task.exception())
        self._start_slot(None)

    async def _run_slot(self, worker: _Worker | None) -> None:
        assert self._queue is not None
        if worker is None:
            worker = await self._start_worker()
        try:
            while True:
                job = await self._next_job(worker)
                if job is None:  # the worker died while idle: replace it before it is needed
                    worker = await self._replace(worker, "worker_error")
                    continue
                if self._abandoned(job):
                    job.result.set_result(PoolResult(False, Reason.QUEUE_TIMEOUT, CAUSE_QUEUE))
                    self._queue.done(job, 0.0)
                    continue  # nobody waited for it within a retry window
                job.started = True
                started = time.perf_counter()
                try:
                    worker = await self._check(worker, job)
                except BaseException:
                    if not job.result.done():  # the pool is closing: never leave a caller waiting
                        job.result.set_result(PoolResult(False, Reason.WORKER_ERROR))
                    raise
                finally:
                    self._queue.done(job, time.perf_counter() - started)
                if self._max_tasks and worker.tasks >= self._max_tasks:
                    worker = await self._replace(worker, "recycle")
        except _Stopping:
            pass  # the server is stopping: this slot ends, the others serve what is left
        finally:
            self._kill(worker.process, worker.conn)

    def _abandoned(self, job: Job) -> bool:
        """A queued check nobody has waited for since a retry window."""
        window = RETRY_WINDOW_FACTOR * self._wall_timeout_s
        return job.waiters == 0 and time.perf_counter() > job.left_at + window

    async def _next_job(self, worker: _Worker) -> Job | None:
        """The next queued check, or None as soon as ``worker`` dies while waiting for one
        (watched through its process sentinel, so a worker killed while idle is replaced at
        once and the pool is back to full size before the next burst of work)."""
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        died: asyncio.Future[None] = loop.create_future()
        sentinel = worker.process.sentinel
        loop.add_reader(sentinel, lambda: died.done() or died.set_result(None))
        get = asyncio.ensure_future(self._queue.get())
        try:
            await asyncio.wait({get, died}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_reader(sentinel)
            if not get.done():
                get.cancel()  # a cancelled get takes nothing from the queue
        return get.result() if get.done() and not get.cancelled() else None

    async def _check(self, worker: _Worker, job: Job) -> _Worker:
        """Answer ``job`` with one check; returns the worker to use next (a replacement when
        ``worker`` was lost)."""
        started = time.perf_counter()
        fut = job.result
        for run in range(1, _MAX_RUNS_WHEN_LOST + 1):
            try:
                result, cpu = await self._ask(worker, job.check, job.deadline)
            except _WorkerLost as lost:
                if lost.cause == CAUSE_CPU:  # a caller whose net passed was counted by ``wait``
                    self._on_timeout(lost.cause)
                # A timed-out check is the answer's doing (its budget) or ran into the safety
                # net: running it again would cost another timeout. A worker that died under a
                # check usually is not (an operator, the OOM killer): run it again while the
                # job's net allows, so that an answer which does kill workers gets no more time
                # than a hung one.
                last = (
                    lost.reason in (Reason.TIMEOUT, Reason.WALL_TIMEOUT)
                    or run == _MAX_RUNS_WHEN_LOST
                    or (time.perf_counter() >= job.deadline and job.waiters == 0)
                )
                if last and not fut.done():  # answered before the restart
                    if run == _MAX_RUNS_WHEN_LOST and lost.reason == Reason.WORKER_ERROR:
                        # Every run lost its worker: the answer kills them, a verdict (0) like
                        # any answer that makes the checker fail, not the machine's state.
                        fut.set_result(PoolResult(False, Reason.CHECK_ERROR, error=WORKER_LOST))
                    else:
                        fut.set_result(PoolResult(False, lost.reason, lost.cause))
                worker = await self._replace(worker, str(lost.reason))
                if last or fut.done():
                    return worker
                self._on_rerun()
                continue
            if not fut.done():
                fut.set_result(result)
            self._on_timing(started - job.queued_at, time.perf_counter() - started, cpu)
            return worker
        return worker

    async def _ask(
        self, worker: _Worker, check: SymbolicCheck, deadline: float
    ) -> tuple[PoolResult, float]:
        """One run of a check on ``worker``: its result and the CPU seconds it used; raises
        ``_WorkerLost`` when the worker ends first (its budget, a crash) or is killed because the
        check hangs: from ``deadline`` on, every half net, it must have used CPU since the last
        look (a check slowed for want of CPU runs on; one that waits for nothing does not), and
        it never runs more than ``HANG_FACTOR`` nets."""
        loop = asyncio.get_running_loop()
        job_id = next(self._ids)
        try:
            worker.conn.send((job_id, check))
        except (OSError, ValueError) as exc:
            raise _WorkerLost(Reason.WORKER_ERROR) from exc
        readable: asyncio.Future[None] = loop.create_future()
        fd = worker.conn.fileno()
        loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
        started = time.perf_counter()
        look_at = deadline
        cpu_seen = cpu_seconds(worker.process.pid)
        try:
            while True:
                try:
                    # The CPU budget is the worker's own (it ends itself); the parent watches
                    # for a check that hangs.
                    await asyncio.wait_for(
                        asyncio.shield(readable), max(0.0, look_at - time.perf_counter())
                    )
                    break
                except asyncio.TimeoutError:
                    cpu = cpu_seconds(worker.process.pid)
                    ran = time.perf_counter() - started
                    stuck = cpu is None or cpu_seen is None or cpu - cpu_seen < _MIN_PROGRESS_S
                    if stuck or ran > HANG_FACTOR * self._wall_timeout_s:
                        raise _WorkerLost(Reason.WALL_TIMEOUT, CAUSE_WALL) from None
                    cpu_seen, look_at = cpu, time.perf_counter() + self._wall_timeout_s / 2
        finally:
            loop.remove_reader(fd)
            if not readable.done():
                readable.cancel()
        try:
            got_id, equal, reason, cpu, error = worker.conn.recv()
        except (EOFError, OSError, ValueError) as exc:
            # It died: at its CPU budget (SIGPROF), or killed (an operator, the OOM killer).
            if await self._exit_code(worker) == -signal.SIGPROF:
                raise _WorkerLost(Reason.TIMEOUT, CAUSE_CPU) from exc
            raise _WorkerLost(Reason.WORKER_ERROR) from exc
        worker.tasks += 1
        if got_id != job_id:  # cannot happen with one job in flight per worker; be safe
            raise _WorkerLost(Reason.WORKER_ERROR)
        return PoolResult(equal, reason, error=error), cpu

    async def _exit_code(self, worker: _Worker) -> int | None:
        """The exit code of a worker whose pipe closed (``-N``: ended by signal N). The kernel
        closes a dying process's files before it can be reaped, so wait for that briefly."""
        await asyncio.get_running_loop().run_in_executor(None, worker.process.join, 5.0)
        return worker.process.exitcode

    async def _replace(self, worker: _Worker, reason: str) -> _Worker:
        """Kill ``worker`` and start a new one; retries until it starts or the pool closes.
        Raises ``_Stopping`` once the server is stopping (its slot then kills ``worker``)."""
        if self._stopping:
            raise _Stopping
        loop = asyncio.get_running_loop()
        if reason != "recycle":
            log.warning("verification worker pid %s replaced: %s", worker.process.pid, reason)
        self._on_restart(reason)
        await loop.run_in_executor(None, self._kill, worker.process, worker.conn)
        return await self._start_worker()

    async def _start_worker(self, attempts: int | None = None) -> _Worker:
        """A new worker, its start tried again 1 s after a failure (the forkserver may have
        died under it; the next start runs a new one) up to ``attempts`` times in all, or until
        the pool closes when ``attempts`` is None. Raises ``_Stopping`` for a failure after a
        stop signal: that forkserver most likely died of the signal to the process group."""
        loop = asyncio.get_running_loop()
        failed = 0
        while True:
            try:
                return await loop.run_in_executor(None, self._spawn)
            except RuntimeError:
                failed += 1
                if self._stopping:
                    raise _Stopping from None
                if self._closed or failed == attempts:
                    raise
                log.exception("could not start a verification worker; retrying")
                await asyncio.sleep(1.0)
