"""The reliability harness of the reward server: real ``python -m reward_server`` processes on
127.0.0.1, a known item mix, a load driver with fault injection, OpenRLHF's own client through
restarts, and hand-written hostile requests.

Nothing is mocked but vLLM (the OpenRLHF restart run needs a GPU for it: a scripted engine
returns the completions).

1. **Oracle** (`single_request_rewards`): a fresh server scores every distinct item alone, one
   request at a time.
2. **Load, faults, soak** (`run_load`): 64 clients (one keep-alive connection each) send N
   completions one per request, a known mix of correct, wrong, malformed and adversarial
   answers over both scoring routes. From 1/3 to 1/2 of the run, verification workers are
   SIGKILLed by PID every ``kill_every_s`` seconds, then the forkserver that starts them is
   killed; from 1/2 to 2/3, answers that hang a worker forever (the server's test hook,
   ``HANG``) are sent. Every reply is checked against the oracle and the generator's known
   reward, its ``X-Request-ID`` and (``/v1/score``) the echoed response against the request;
   the memory (PSS) of the server and its workers is sampled throughout.
3. **Restart** (`openrlhf_restart`): OpenRLHF 0.11's own ``SingleTurnAgentExecutor.execute``
   scores completions while the server is stopped (SIGTERM) and restarted, then killed
   (SIGKILL) and restarted, on the same port: its 5 retries, 1 s apart, must carry every
   sample to the right reward.
4. **Hostile input**: hand-written cases (`hostile_cases`, `probe`), schemathesis against the
   OpenAPI spec (`fuzz_openapi`), and requests without or with a wrong token against a server
   that requires one (`auth_probes`).

The tests (tests/reward_server/test_rs_reliability.py, test_rs_hostile.py) assert on what these
functions return; benchmarks/reward_server_reliability.py prints the same figures as a table,
and benchmarks/reward_server_load.py starts its servers with `start_server`. Only loopback
traffic; every loop is bounded.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gtpo.local_reward_server import free_port
from reward_server.protocol import Reason
from reward_server.service.pool import cpu_seconds

PROMPT = "<|im_start|>user\nSolve the problem.<|im_end|>\n<|im_start|>assistant\n"
END = "<|im_end|>"
NONCE = "{nonce}"  # replaced by a per-request token inside the reasoning block
HANG = "hang_{gtpo}"  # GTPO_RS_DEBUG_HANG_ANSWER of every test server: a worker given it hangs
RETRIES_503 = 30  # a request answered 503 (verdict not computed in time) is sent again
WORKER_NAME = (
    "gtpo-rs-verify"  # reward_server.service.pool.PROCESS_NAME, as /proc/PID/comm shows it
)
ROUTES = ("/get_reward", "/v1/score")

# Answers that hang or blow up a symbolic parser. Each is paired with one fixed label, so a
# repeated bomb is the same (answer, reference) pair, as a policy repeating it would send.
BOMBS = ["10^{10^{10^{10}}}", "9^{9^{9^{9^{9}}}}", "(10^{10})!", "1\\times 10^{999999999}"]
# Strings that would run code if anything evaluated them; {marker} is a file they would create.
CODE = [
    "__import__('os').system('touch {marker}')",
    "\\boxed{{__import__('os').system('touch {marker}')}}",
    "(lambda: __import__('os').system('touch {marker}'))()",
    "exec(\"open('{marker}', 'w').write('x')\")",
    "eval(\"__import__('os').system('touch {marker}')\")",
    "__import__('subprocess').run(['touch', '{marker}'])",
    "open('{marker}', 'w')",
    "$(touch {marker})",
    "`touch {marker}`",
    "; touch {marker}",
    "\\immediate\\write18{{touch {marker}}}",
    "{{0.__class__.__mro__[1].__subclasses__()}}",
]


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The settings every server here runs with: defaults, plus the test-only hang hook."""
    return {"GTPO_RS_DEBUG_HANG_ANSWER": HANG, **(extra or {})}


# ---------------------------------------------------------------- items


def problem(rng: random.Random) -> tuple[str, list[str], list[str]]:
    """(label, equivalent answer spellings, wrong answers) for one prompt."""
    kind = rng.random()
    if kind < 0.5:  # GSM8K: integer answers, with decorations
        n = rng.randint(2, 50_000)
        label = f"Some reasoning.\n#### {n}"
        right = [str(n), f"{n:,}", f"\\${n}", f"{n}.00", f"\\boxed{{{n}}}", f"{n} dollars"]
        wrong = [str(n + 1), str(n * 10), f"{n / 3:.2f}"]
    elif kind < 0.7:  # MATH: fractions and decimals
        a, b = rng.randint(1, 9), rng.choice([2, 4, 5, 8])
        label = f"so the answer is $\\boxed{{\\frac{{{a}}}{{{b}}}}}$."
        right = [f"\\frac{{{a}}}{{{b}}}", f"{a / b:g}", f"\\dfrac{{{a}}}{{{b}}}", f"{a}/{b}"]
        wrong = [f"\\frac{{{a + 1}}}{{{b}}}", f"{a / b + 0.01:g}"]
    elif kind < 0.9:  # MATH: radicals (these need sympy)
        k = rng.choice([k for k in range(2, 400) if int(k**0.5) ** 2 != k])
        label = f"$\\boxed{{\\frac{{\\sqrt{{{k}}}}}{{{k}}}}}$"
        right = [f"\\frac{{1}}{{\\sqrt{{{k}}}}}", f"\\frac{{\\sqrt{{{k}}}}}{{{k}}}"]
        wrong = [f"\\sqrt{{{k}}}", f"\\frac{{{k}}}{{\\sqrt{{{k + 1}}}}}"]
    else:  # MATH: polynomials (sympy)
        a = rng.randint(2, 300)
        label = f"\\boxed{{x^2+{2 * a}x+{a * a}}}"
        right = [f"(x+{a})^2", f"x^2+{2 * a}x+{a * a}", f"(x+{a})(x+{a})"]
        wrong = [f"(x+{a})^3", f"x^2+{a * a}"]
    return label, right, wrong


@dataclass(frozen=True)
class Item:
    """One completion to score. ``template`` holds ``{nonce}``; ``reward`` is what the
    generator knows the total must be (format + accuracy on the paper's 0..20 scale)."""

    kind: str  # correct | wrong | malformed | adversarial | hang
    route: str
    template: str
    label: str
    reward: float

    def response(self, nonce: str) -> str:
        return self.template.replace(NONCE, nonce)

    def body(self, nonce: str) -> dict[str, list[str]]:
        return {
            "query": [PROMPT + self.response(nonce) + END],
            "prompts": [PROMPT],
            "labels": [self.label],
        }


def _full(answer: str) -> str:
    return f"<reasoning>\nwork {NONCE}\n</reasoning>\n<answer>\n{answer}\n</answer>"


def _malformed(rng: random.Random, answer: str) -> tuple[str, float]:
    """A response with a broken format and its known reward (format only: accuracy is gated)."""
    return rng.choice(
        [
            (f"<reasoning>\nwork {NONCE}, so {answer}\n</reasoning>", 1.0),  # no answer block
            (f"{NONCE} <answer>{answer}</answer>", 1.0),  # no reasoning block
            (f"<reasoning>\nwork {NONCE}\n</reasoning>\n<answer>\n{answer}", 1.5),  # truncated
            (f"<answer>{answer}</answer>\n<reasoning>work {NONCE}</reasoning>", 1.5),  # reversed
            (f"work {NONCE}, the answer is {answer}", 0.0),  # no blocks
            (f"<reasoning>\nwork {NONCE}\n</reasoning>\n<answer> </answer>", 10.0),  # empty
        ]
    )


def _adversarial(rng: random.Random, marker: str) -> tuple[str, str]:
    """(answer, label) of a hostile completion; all score accuracy 0."""
    kind = rng.random()
    if kind < 0.3:
        return rng.choice(BOMBS), "#### 1"
    if kind < 0.5:
        return rng.choice(CODE).format(marker=marker), "#### 0"
    if kind < 0.65:
        depth = rng.choice([50, 500, 5000])
        return "{" * depth + "1" + "}" * depth, "#### 1"
    if kind < 0.75:
        return "\\frac{" * rng.choice([100, 2000]), "#### 1"  # unbalanced
    if kind < 0.85:
        return rng.choice(["1e999999999", "10^{1000000}", "-0" * 400]), "#### 1"
    if kind < 0.95:
        return "\u202e\x00\x07\ufeff" + rng.choice(["\U0001f600", "\u0663", "\x1b[2J"]), "#### 1"
    return "9" * 1_000_000, "#### 1"  # a 1 MB answer


def make_items(
    n: int, seed: int = 0, *, problems: int = 300, hang: int = 0, marker: str = "/nonexistent"
) -> list[Item]:
    """``n`` items drawn from ``problems`` prompts: ~50% correct, ~25% wrong, ~15% malformed,
    ~10% adversarial; 20% go to ``/v1/score``. The middle third (where `run_load` injects its
    faults) asks about ``problems`` other prompts, so that its symbolic checks miss the cache and
    keep the workers busy while they are killed. ``hang`` items (each with its own label, so
    that no cache can answer them) are spread over 1/2 to 2/3 of the run, after the kills."""
    rng = random.Random(seed)
    banks = [[problem(rng) for _ in range(problems)] for _ in range(2)]
    items: list[Item] = []
    for i in range(n - hang):
        middle = (n - hang) // 3 <= i < 2 * (n - hang) // 3
        label, right, wrong = rng.choice(banks[middle])
        route = ROUTES[1] if rng.random() < 0.2 else ROUTES[0]
        draw = rng.random()
        if draw < 0.5:
            items.append(Item("correct", route, _full(rng.choice(right)), label, 20.0))
        elif draw < 0.75:
            items.append(Item("wrong", route, _full(rng.choice(wrong)), label, 10.0))
        elif draw < 0.9:
            template, reward = _malformed(rng, rng.choice(right))
            items.append(Item("malformed", route, template, label, reward))
        else:
            answer, label = _adversarial(rng, marker)
            items.append(Item("adversarial", route, _full(answer), label, 10.0))
    for k in range(hang):
        at = n // 2 + (k * (n // 6)) // max(1, hang)
        items.insert(at, Item("hang", ROUTES[k % 2], _full(HANG), f"#### {k}", 10.0))
    return items


def plain_items(n: int, seed: int = 0) -> list[Item]:
    """The correct, wrong and malformed items of ``make_items(n, seed)``: the restart run's mix,
    where a retry after a restart is the only thing that may go wrong."""
    return [it for it in make_items(n, seed) if it.kind in ("correct", "wrong", "malformed")]


# ---------------------------------------------------------------- processes


def term_with_parent() -> None:
    """In the server child before exec: SIGTERM it if this process dies (no orphan server)."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_server(
    env_extra: dict[str, str],
    port: int | None = None,
    log: Path | None = None,
    cwd: Path | None = None,
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``python -m reward_server`` on 127.0.0.1 (a free port unless given) and wait for
    ``/readyz``; its output goes to ``log`` (appended) or nowhere. ``cwd``: the checkout whose
    ``reward_server`` runs (``-m`` looks in the working directory first; default: this one's
    installed package)."""
    port = port or free_port()
    env = {**os.environ, "GTPO_RS_LOG_LEVEL": "warning", **env_extra}
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "reward_server", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        preexec_fn=term_with_parent if sys.platform.startswith("linux") else None,
        cwd=cwd,
    )
    if log is not None:
        out.close()  # the child holds its own copy
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc)
    except RuntimeError:
        proc.kill()
        raise
    return proc, url


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    """Until ``/readyz`` answers 200; RuntimeError if the server exits first or is not ready
    after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("reward server exited during start-up")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"reward server not ready after {timeout_s:g} s")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (forkserver, verification workers, resource tracker)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.append(child)
                    todo.append(child)
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) that ``pid`` and every live process below it have used."""
    return sum(cpu_seconds(each) or 0.0 for each in [pid, *descendants(pid)])  # 0: ended


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def verification_workers(server_pid: int) -> list[int]:
    return [p for p in descendants(server_pid) if comm(p) == WORKER_NAME]


def forkserver_pid(server_pid: int) -> int | None:
    """The multiprocessing forkserver: the parent of the verification workers."""
    for pid in verification_workers(server_pid):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent != server_pid:
            return parent
    return None


def pss_bytes(pid: int) -> int:
    """Proportional set size: shared pages split among the processes that share them, so the
    sum over the server and its forked workers counts copy-on-write memory once."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    m = re.search(r"^Pss:\s+(\d+) kB", text, re.MULTILINE)
    return int(m.group(1)) * 1024 if m else 0


def memory_bytes(server_pid: int) -> tuple[int, int]:
    """(PSS of the server process, PSS of the server and every process below it)."""
    server = pss_bytes(server_pid)
    return server, server + sum(pss_bytes(p) for p in descendants(server_pid))


def scrape(url: str) -> dict[str, float]:
    """Every sample of ``/metrics`` as {'name{labels}': value}."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


# ---------------------------------------------------------------- oracle


def single_request_rewards(url: str, items: list[Item]) -> dict[tuple[str, str, str], float]:
    """The reward of every distinct (route, template, label), each sent alone, one at a time."""
    import httpx

    oracle: dict[tuple[str, str, str], float] = {}
    with httpx.Client(base_url=url, timeout=60) as client:
        for it in items:
            key = (it.route, it.template, it.label)
            if key in oracle or it.kind == "hang":
                continue
            r = client.post(it.route, json=it.body("oracle"))
            r.raise_for_status()
            data = r.json()
            reward = data["rewards"][0] if it.route == ROUTES[0] else data["results"][0]["reward"]
            oracle[key] = reward
    return oracle


# ---------------------------------------------------------------- load with faults


@dataclass
class LoadReport:
    clients: int
    completions: int
    seconds: float = 0.0
    answered: int = 0
    lost: int = 0  # no HTTP answer at all (connection error, timeout)
    status_5xx: int = 0
    status_other: int = 0  # any non-200 that is not a 5xx
    wrong_reward: int = 0  # differs from the single-request answer or the known reward
    # Correct answers that lost exactly their accuracy (10) once faults began (workers killed,
    # hung checks, the pool recovering). Before the server answered 503 for a verdict it could
    # not compute in time, a check that missed its deadline scored 0 this way; now it must not.
    deadline_losses: int = 0
    # 503s (a verdict not computed in time) sent again after Retry-After, as clients do
    retried: int = 0
    deadline_verdicts: float = 0.0  # /metrics: timeout, queue_timeout, worker_error verdicts
    queue_timeouts: float = 0.0  # /metrics: checks whose deadline passed before a worker was free
    misrouted: int = 0  # X-Request-ID or echoed response of another request
    kills: int = 0  # verification workers SIGKILLed
    forkserver_kills: int = 0
    hangs: int = 0
    hang_reasons: dict[str, int] = field(default_factory=dict)  # verdicts of hangs on /v1/score
    restarts: dict[str, float] = field(default_factory=dict)  # /metrics, by reason
    reruns: float = 0.0  # checks run again after their worker died under them
    workers_expected: int = 0
    workers_after: int = 0  # live workers (by /proc) at the end of the faults
    workers_gauge_after: float = 0.0  # gtpo_rs_verify_workers at the end of the faults
    recovery_s: float = 0.0  # from the last kill (the forkserver's) to a full pool
    recovery_seen: tuple[int, float] = (0, 0.0)  # (live workers, gauge) when that wait ended
    latency_ms: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # p50, p99, n
    memory: list[tuple[float, int, int, int]] = field(default_factory=list)  # t, done, srv, all
    examples: list[str] = field(default_factory=list)  # the first few failures, for the message

    @property
    def failures(self) -> int:
        return self.lost + self.status_5xx + self.status_other + self.wrong_reward + self.misrouted

    def memory_at(self, fraction: float) -> tuple[int, int]:
        """(server PSS, total PSS) of the first sample at or after ``fraction`` of the items."""
        for _, done, server, total in self.memory:
            if done >= fraction * self.completions:
                return server, total
        return self.memory[-1][2], self.memory[-1][3]

    def memory_growth(self, start: float = 0.1) -> tuple[int, int]:
        """Growth of (server PSS, total PSS) from ``start`` of the items to the end."""
        s0, t0 = self.memory_at(start)
        return self.memory[-1][2] - s0, self.memory[-1][3] - t0


def _percentiles(values: list[float]) -> tuple[float, float, int]:
    if not values:
        return 0.0, 0.0, 0
    values = sorted(values)
    pick = lambda q: values[min(len(values) - 1, int(q * len(values)))]  # noqa: E731
    return pick(0.5) * 1e3, pick(0.99) * 1e3, len(values)


def run_load(
    url: str,
    server_pid: int,
    items: list[Item],
    oracle: dict[tuple[str, str, str], float],
    *,
    clients: int = 64,
    kill_every_s: float = 0.1,
    kill_forkserver: bool = True,
    verify_workers: int = 2,
    progress: Callable[[str], None] = lambda line: None,
) -> LoadReport:
    """Drive ``items`` through ``clients`` connections; inject faults in the middle third."""
    import aiohttp

    report = LoadReport(clients=clients, completions=len(items), workers_expected=verify_workers)
    report.hangs = sum(it.kind == "hang" for it in items)
    done = 0
    started_at: list[float] = [0.0] * len(items)
    latency: list[float] = [0.0] * len(items)
    phase_of: list[str] = ["before"] * len(items)
    phase = "before"
    stop_sampling = threading.Event()
    t_start = time.perf_counter()

    def sample_memory() -> None:
        while not stop_sampling.is_set():
            server, total = memory_bytes(server_pid)
            report.memory.append((time.perf_counter() - t_start, done, server, total))
            stop_sampling.wait(0.5)

    def fail(message: str) -> None:
        if len(report.examples) < 5:
            report.examples.append(message)

    def check(i: int, status: int, headers: Any, data: Any) -> None:
        it = items[i]
        nonce = f"n{i}x"
        if status >= 500:
            report.status_5xx += 1
            return fail(f"item {i}: HTTP {status}: {str(data)[:200]}")
        if status != 200:
            report.status_other += 1
            return fail(f"item {i}: HTTP {status}: {str(data)[:200]}")
        if headers.get("x-request-id") != str(i):
            report.misrouted += 1
            return fail(f"item {i}: answer carries X-Request-ID {headers.get('x-request-id')}")
        if it.route == ROUTES[0]:
            reward = data["rewards"][0]
        else:
            result = data["results"][0]
            if result["response"] != it.response(nonce):
                report.misrouted += 1
                return fail(f"item {i}: /v1/score echoed another request's response")
            reward = result["reward"]
            if it.kind == "hang":
                reason = result["reason"]
                report.hang_reasons[reason] = report.hang_reasons.get(reason, 0) + 1
        expected = oracle.get((it.route, it.template, it.label), it.reward)
        lost_accuracy = it.kind == "correct" and reward == expected - 10 == it.reward - 10
        if lost_accuracy and phase_of[i] != "before":  # faults, or the pool recovering after
            report.deadline_losses += 1
            fail(f"item {i} ({it.kind}): accuracy lost to the deadline during faults")
        elif reward != expected or reward != it.reward:
            report.wrong_reward += 1
            fail(
                f"item {i} ({it.kind}, {phase_of[i]}): reward {reward}, alone {expected}, "
                f"known {it.reward}, {it.route} {it.template[:60]!r} label {it.label!r}"
            )

    async def client(session: aiohttp.ClientSession, queue: asyncio.Queue[int]) -> None:
        nonlocal done
        while True:
            try:
                i = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            started_at[i] = time.perf_counter()
            phase_of[i] = phase
            try:
                for attempt in range(RETRIES_503):
                    async with session.post(
                        url + items[i].route,
                        json=items[i].body(f"n{i}x"),
                        headers={"X-Request-ID": str(i)},
                    ) as r:
                        data = await r.json(content_type=None)
                        if r.status == 503 and attempt + 1 < RETRIES_503:
                            wait = float(r.headers.get("Retry-After", "1"))
                        else:
                            latency[i] = time.perf_counter() - started_at[i]
                            report.answered += 1
                            check(i, r.status, r.headers, data)
                            break
                    report.retried += 1
                    await asyncio.sleep(wait)
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
                report.lost += 1
                fail(f"item {i}: no answer ({exc!r})")
            done += 1

    async def pool_whole(dead: frozenset[int] = frozenset()) -> tuple[int, float]:
        """Wait (up to 30 s) until the pool is back to full size, seen from outside and by
        /metrics, not counting the workers in ``dead`` (killed, maybe not gone yet); returns
        (live workers, gauge) as last seen."""
        deadline = time.perf_counter() + 30
        while True:
            live = len(set(verification_workers(server_pid)) - dead)
            gauge = (await asyncio.to_thread(scrape, url)).get("gtpo_rs_verify_workers", 0)
            if (live == gauge == verify_workers) or time.perf_counter() > deadline:
                return live, gauge
            await asyncio.sleep(0.05)

    async def inject_faults() -> None:
        """Kills from 1/3 to 1/2 of the run, the forkserver at 1/2, hangs from 1/2 to 2/3."""
        nonlocal phase
        n = len(items)
        while done < n // 3:
            await asyncio.sleep(0.02)
        phase = "kills"
        progress(f"killing workers from {done} completions")
        rng = random.Random(1)
        while done < n // 2:
            workers = verification_workers(server_pid)
            if workers:
                os.kill(rng.choice(workers), signal.SIGKILL)
                report.kills += 1
            await asyncio.sleep(kill_every_s)
        pid = None
        # The forkserver is found through a live worker's parent; right after a kill there may
        # be none for a moment (the replacement not forked yet), so look again until one shows.
        found_by = time.perf_counter() + 10
        while kill_forkserver and pid is None and time.perf_counter() < found_by:
            pid = forkserver_pid(server_pid)
            if pid is None:
                await asyncio.sleep(0.01)
        # The workers alive now die with the forkserver, a moment after it: until then they
        # would make the pool look whole.
        dying = frozenset(verification_workers(server_pid)) if pid is not None else frozenset()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)  # its workers die with it (PR_SET_PDEATHSIG)
            report.forkserver_kills += 1
        last_kill = time.perf_counter()
        phase = "hangs"
        report.recovery_seen = await pool_whole(dying)
        report.recovery_s = time.perf_counter() - last_kill
        progress(f"kills end at {done} completions; pool whole {report.recovery_s:.2f} s after")
        while done < 2 * n // 3:
            await asyncio.sleep(0.02)
        phase = "after"
        report.workers_after, report.workers_gauge_after = await pool_whole()
        progress(f"hangs end at {done} completions")

    async def main() -> None:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(len(items)):
            queue.put_nowait(i)
        timeout = aiohttp.ClientTimeout(total=120)
        sessions = [
            aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=1))
            for _ in range(clients)
        ]
        try:
            faults = asyncio.create_task(inject_faults())
            await asyncio.gather(*(client(s, queue) for s in sessions))
            await faults
        finally:
            for s in sessions:
                await s.close()

    sampler = threading.Thread(target=sample_memory, daemon=True)
    sampler.start()
    try:
        asyncio.run(main())
    finally:
        stop_sampling.set()
        sampler.join()
    report.seconds = time.perf_counter() - t_start
    metrics = scrape(url)
    report.restarts = {
        m.group(1): v
        for k, v in metrics.items()
        if (m := re.fullmatch(r'gtpo_rs_worker_restarts_total\{reason="(\w+)"\}', k))
    }
    report.reruns = metrics.get("gtpo_rs_verify_reruns_total", 0.0)
    report.queue_timeouts = metrics.get('gtpo_rs_verdicts_total{reason="queue_timeout"}', 0.0)
    report.deadline_verdicts = sum(
        metrics.get(f'gtpo_rs_verdicts_total{{reason="{r}"}}', 0.0)
        for r in ("timeout", "queue_timeout", "worker_error")
    )
    for name in ("before", "kills", "hangs", "after"):
        report.latency_ms[name] = _percentiles(
            [latency[i] for i in range(len(items)) if phase_of[i] == name and latency[i] > 0]
        )
    return report


# ---------------------------------------------------------------- restart under OpenRLHF


# OpenRLHF's client tries a request 5 times, 1 s apart, then drops the sample's reward: a server
# down for longer loses the samples whose tries all fell in the outage.
OPENRLHF_RETRY_WINDOW_S = 4.0


@dataclass
class RestartReport:
    samples: int
    rewarded: int = 0  # execute() returned a reward (not None)
    lost: int = 0  # execute() returned None: its client gave up
    wrong_reward: int = 0  # a reward, not the item's
    client_retries: int = 0  # OpenRLHF's "Request error" log lines
    downtime_s: list[float] = field(default_factory=list)  # SIGTERM, then SIGKILL restart
    seconds: float = 0.0
    examples: list[str] = field(default_factory=list)


def byte_tokenizer(texts: list[str]) -> Any:
    """A real Hugging Face fast tokenizer (byte-level BPE trained here: no hub download) that
    decodes every text back exactly, as OpenRLHF's decode of prompt + completion must."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=[END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=END)


class ScriptedEngine:
    """Stands in for OpenRLHF's vLLM engine (vLLM needs a GPU): ``generate`` returns the token
    ids of a completion written in advance, in the shape ``execute`` reads."""

    def __init__(self, completion_ids: list[int]) -> None:
        self.completion_ids = completion_ids

    async def generate(self, prompt_ids: list[int], params: Any, multi_modal_data: Any = None):
        await asyncio.sleep(0)
        out = SimpleNamespace(token_ids=self.completion_ids, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[out])


def openrlhf_restart(
    items: list[Item],
    *,
    concurrency: int = 64,
    env: dict[str, str] | None = None,
    log: Path | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> RestartReport:
    """Score ``items`` through ``SingleTurnAgentExecutor.execute`` (real OpenRLHF code: tokenize,
    generate, decode prompt + completion, POST with 5 retries, swallow a final failure) while the
    server is stopped and restarted on its port at 1/3 (SIGTERM) and 2/3 (SIGKILL) of the run."""
    from openrlhf.utils import agent

    report = RestartReport(samples=len(items))
    texts = [PROMPT] + [it.response(f"r{i}") + END for i, it in enumerate(items)]
    tokenizer = byte_tokenizer(texts)
    port = free_port()
    env = server_env(env)
    proc, url = start_server(env, port=port, log=log)
    executor = agent.SingleTurnAgentExecutor(remote_rm_url=url + "/get_reward")
    params = SimpleNamespace(max_tokens=4096, logprobs=None)
    rewards: list[Any] = [None] * len(items)
    done = 0

    class CountRetries(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "Request error" in record.getMessage():
                report.client_retries += 1

    # Count OpenRLHF's retry lines instead of printing hundreds of them.
    quieted = list(agent.logger.handlers)
    for h in quieted:
        agent.logger.removeHandler(h)
    handler = CountRetries()
    agent.logger.addHandler(handler)

    async def one(i: int, sem: asyncio.Semaphore) -> None:
        nonlocal done
        it = items[i]
        completion = tokenizer(it.response(f"r{i}") + END, add_special_tokens=False)
        engine = ScriptedEngine(completion["input_ids"])
        async with sem:
            out = await executor.execute(PROMPT, it.label, params, 8192, tokenizer, engine)
        rewards[i] = out["reward"]
        done += 1

    async def restarts() -> None:
        nonlocal proc
        n = len(items)
        for at, sig in ((n // 3, signal.SIGTERM), (2 * n // 3, signal.SIGKILL)):
            while done < at:
                await asyncio.sleep(0.01)
            t0 = time.perf_counter()
            proc.send_signal(sig)
            await asyncio.to_thread(proc.wait, 30)
            proc, _ = await asyncio.to_thread(start_server, env, port, log)
            report.downtime_s.append(time.perf_counter() - t0)
            progress(f"{sig.name} at {done}: back in {report.downtime_s[-1]:.2f} s")

    async def main() -> None:
        sem = asyncio.Semaphore(concurrency)
        restarting = asyncio.create_task(restarts())
        await asyncio.gather(*(one(i, sem) for i in range(len(items))))
        await restarting

    t0 = time.perf_counter()
    try:
        asyncio.run(main())
    finally:
        agent.logger.removeHandler(handler)
        for h in quieted:
            agent.logger.addHandler(h)
        stop_server(proc)
    report.seconds = time.perf_counter() - t0
    for i, (it, got) in enumerate(zip(items, rewards, strict=True)):
        report.rewarded += got is not None
        if got != [it.reward]:
            report.lost += got is None
            report.wrong_reward += got is not None
            if len(report.examples) < 5:
                report.examples.append(f"sample {i} ({it.kind}): reward {got}, known {it.reward}")
    return report


# ---------------------------------------------------------------- hostile input


@dataclass(frozen=True)
class Hostile:
    """One hostile request and what the server must answer: a 4xx whose one-line ``detail``
    contains ``detail``, or a 200 whose items all score accuracy 0 with reward ``reward``
    (``reason``, when given, is the verdict every item must carry)."""

    name: str
    content: Callable[[], Any]  # bytes, or an iterator of chunks (sent chunked)
    status: int
    detail: str = ""
    items: int = 1
    reward: float = 10.0
    reason: Reason | None = None
    method: str = "POST"
    path: str = "/v1/score"


def _json(obj: Any) -> Callable[[], bytes]:
    return lambda: json.dumps(obj).encode()


def _raw(data: bytes) -> Callable[[], bytes]:
    return lambda: data


def _answer(answer: str, label: Any = "#### 1", reasoning: str = "work") -> Callable[[], bytes]:
    response = f"<reasoning>\n{reasoning}\n</reasoning>\n<answer>\n{answer}\n</answer>"
    return _json({"query": [response], "labels": [label]})


def hostile_cases(
    marker: str, max_body_bytes: int = 16 * 1024 * 1024, max_batch: int = 4096
) -> list[Hostile]:
    """The hand-written hostile requests. ``marker`` is a file that the code-like answers would
    create if anything ever evaluated them; the limits are the server's settings."""

    def chunked() -> Any:
        yield b'{"query": ["'
        for _ in range(max_body_bytes // 65536 + 2):
            yield b"x" * 65536
        yield b'"], "labels": ["1"]}'

    nested_label = b'{"query": ["a"], "labels": [' + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"]}"
    deep = b'{"query": ' + b"[" * 100_000 + b"]" * 100_000 + b', "labels": []}'
    bad = "labels[0] must be a string, a number or null"
    cases = [
        # ---- malformed requests: a 4xx with a message, nothing scored
        Hostile("not JSON", _raw(b"hello"), 422, "not valid JSON"),
        Hostile("empty body", _raw(b""), 422, "not valid JSON"),
        Hostile("truncated JSON", _raw(b'{"query": ["a"], "labels": ['), 422, "not valid JSON"),
        Hostile("JSON null", _raw(b"null"), 422, "object"),
        Hostile("JSON array", _raw(b"[1, 2]"), 422, "object"),
        Hostile("query a string", _json({"query": "a", "labels": ["1"]}), 422, "query"),
        Hostile("query item a number", _json({"query": [1], "labels": ["1"]}), 422, "query[0]"),
        Hostile("query item null", _json({"query": [None], "labels": ["1"]}), 422, "query[0]"),
        Hostile("label an object", _json({"query": ["a"], "labels": [{"x": 1}]}), 422, bad),
        Hostile("label a list", _json({"query": ["a"], "labels": [[1]]}), 422, bad),
        Hostile("label a boolean", _json({"query": ["a"], "labels": [True]}), 422, "not bool"),
        Hostile("label NaN", _raw(b'{"query": ["a"], "labels": [NaN]}'), 422, "finite"),
        Hostile("label -Infinity", _raw(b'{"query": ["a"], "labels": [-Infinity]}'), 422, "finite"),
        Hostile(
            "5,000-digit number literal",
            _raw(b'{"query": ["a"], "labels": [' + b"9" * 5000 + b"]}"),
            422,
            "not valid JSON",
        ),
        Hostile("labels missing", _json({"query": ["a"]}), 422, "labels: Field required"),
        Hostile(
            "unequal lengths",
            _json({"query": ["a", "b"], "labels": ["1"]}),
            422,
            "'query' has 2 items but 'labels' has 1",
        ),
        Hostile(
            "prompts of another length",
            _json({"query": ["a"], "prompts": [], "labels": ["1"]}),
            422,
            "'prompts' has 0",
        ),
        Hostile(
            "invalid UTF-8 in a string",
            _raw(b'{"query": ["\xff\xfe"], "labels": ["1"]}'),
            422,
            "not valid JSON",
        ),
        Hostile("invalid UTF-8 body", _raw(b"\xff\xfe\xfd"), 422, "not valid JSON"),
        Hostile(
            "lone surrogate",
            _raw(b'{"query": ["\\ud800"], "labels": ["1"]}'),
            422,
            "not valid JSON",
        ),
        Hostile("100,000 nested arrays", _raw(deep), 422, "recursion limit"),
        Hostile("5,000 nested objects in a label", _raw(nested_label), 422, "recursion limit"),
        Hostile(
            "body over the size limit",
            _raw(b"x" * (max_body_bytes + 1)),
            413,
            "GTPO_RS_MAX_BODY_BYTES",
        ),
        Hostile("chunked body over the size limit", chunked, 413, "GTPO_RS_MAX_BODY_BYTES"),
        Hostile(
            "batch over the item limit",
            _json({"query": ["a"] * (max_batch + 1), "labels": ["1"] * (max_batch + 1)}),
            413,
            "GTPO_RS_MAX_BATCH_SIZE",
        ),
        Hostile("GET on a scoring route", _raw(b""), 405, "Method Not Allowed", method="GET"),
        # ---- accepted: every item answered, accuracy 0, within the timeout
        Hostile("empty lists", _json({"query": [], "prompts": [], "labels": []}), 200, items=0),
        Hostile("1 MB answer", _answer("9" * 1_000_000), 200, reason=Reason.ANSWER_TOO_LONG),
        Hostile("1 MB label", _answer("1", "9" * 1_000_000), 200, reason=Reason.REFERENCE_TOO_LONG),
        Hostile(
            "100,000 <answer> tags",
            _json({"query": ["<answer>" * 100_000], "labels": ["1"]}),
            200,
            reward=0.0,
            reason=Reason.NO_ANSWER_BLOCK,
        ),
        Hostile(
            "50,000 <reasoning> tags",
            _json({"query": ["<reasoning>" * 50_000 + "<answer>1</answer>"], "labels": ["1"]}),
            200,
            reward=1.5,
            reason=Reason.FORMAT_NOT_MET,
        ),
        *(
            Hostile(f"LaTeX bomb {b}", _answer(b), 200)
            for b in [
                *BOMBS,
                "2^{2^{2^{2^{2^{2^{2^{2}}}}}}}",
                "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}^{1000000}",
                "\\sum_{k=1}^{10^{12}} k^{k}",
                "\\int_0^{10^{10}} e^{x^{x}} dx",
            ]
        ),
        Hostile(
            "400 nested braces",
            _answer("{" * 400 + "1" + "}" * 400),
            200,
            reason=Reason.ANSWER_TOO_NESTED,
        ),
        Hostile(
            "5,000 nested braces",
            _answer("{" * 5000 + "1" + "}" * 5000),
            200,
            reason=Reason.ANSWER_TOO_LONG,
        ),
        Hostile(
            "150 unclosed \\frac{", _answer("\\frac{" * 150), 200, reason=Reason.ANSWER_TOO_NESTED
        ),
        Hostile("control and bidi characters", _answer("\u202e\x00\x07\ufeff\x1b[2J1"), 200),
        *(
            Hostile(f"code as answer: {c[:40]}", _answer(c.format(marker=marker), "#### 0"), 200)
            for c in CODE
        ),
        *(
            Hostile(f"code as label: {c[:40]}", _answer("0", c.format(marker=marker)), 200)
            for c in CODE
        ),
    ]
    return cases


@dataclass
class HostileResult:
    name: str
    status: int
    seconds: float
    problem: str  # empty when the answer is what the case requires


def probe(url: str, case: Hostile, timeout_s: float = 60) -> HostileResult:
    """Send one hostile request and check the answer against the case."""
    import httpx

    t0 = time.perf_counter()
    r = httpx.request(
        case.method,
        url + case.path,
        content=case.content(),
        headers={"content-type": "application/json"},
        timeout=timeout_s,
    )
    seconds = time.perf_counter() - t0
    res = HostileResult(case.name, r.status_code, seconds, "")
    if r.status_code != case.status:
        res.problem = f"HTTP {r.status_code} instead of {case.status}: {r.text[:300]}"
    elif "Traceback" in r.text or "application/json" not in r.headers.get("content-type", ""):
        res.problem = f"not a JSON answer: {r.text[:300]}"
    elif case.status != 200:
        detail = r.json().get("detail")
        if not isinstance(detail, str) or case.detail not in detail:
            res.problem = f"detail {detail!r} does not say {case.detail!r}"
    else:
        results = r.json()["results"]
        if len(results) != case.items:
            res.problem = f"{len(results)} results for {case.items} items"
        for item in results:
            if item["accuracy_score"] != 0.0 or item["reason"] == "equivalent":
                res.problem = f"scored correct: {item['reason']}"
            elif item["reward"] != case.reward:
                res.problem = f"reward {item['reward']} instead of {case.reward}"
            elif case.reason is not None and item["reason"] != case.reason:
                res.problem = f"reason {item['reason']} instead of {case.reason}"
    return res


def schemathesis_cli() -> str | None:
    """The schemathesis command of this environment (next to its Python), else on PATH."""
    beside = Path(sys.executable).parent / "schemathesis"
    return str(beside) if beside.exists() else shutil.which("schemathesis")


def fuzz_openapi(url: str, max_examples: int = 300, seed: int = 1) -> tuple[int, int, str]:
    """Run schemathesis against the server's OpenAPI spec with every check but
    ``positive_data_acceptance`` (the spec cannot say "one label per query", so schema-valid
    lists of unequal length are rightly refused). Returns (cases generated, failures, output)."""
    exe = schemathesis_cli()
    if exe is None:
        raise FileNotFoundError("schemathesis is not installed (pip install schemathesis)")
    cmd = [
        exe, "run", url + "/openapi.json",
        "--checks", "all", "--exclude-checks", "positive_data_acceptance",
        "--max-examples", str(max_examples), "--seed", str(seed), "--workers", "1",
        "--max-response-time", "10",
    ]  # fmt: skip
    # One worker: several run in threads, and CPython 3.11 before 3.11.8 raises "AST
    # constructor recursion depth mismatch" when threads call ast.parse at once (gh-106905),
    # which hypothesis does to describe filters; that failed a run with no server fault.
    env = {**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_HOOKS": ""}
    # In a throw-away folder: schemathesis keeps a crash cache (.schemathesis/) in its working
    # directory, which would litter the checkout and replay old cases into later runs.
    with tempfile.TemporaryDirectory(prefix="gtpo-rs-fuzz-") as cwd:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=cwd)
    out = done.stdout + done.stderr
    generated = re.search(r"(\d+) generated", out)
    failed = re.search(r"(\d+) found", out)
    n_generated = int(generated.group(1)) if generated else 0
    failures = int(failed.group(1)) if failed else (0 if done.returncode == 0 else -1)
    return n_generated, failures, out


@dataclass
class AuthReport:
    refused: int = 0  # 401s
    requests: int = 0  # requests without a valid token
    scored: float = 0.0  # items the server counted while they were sent (must be 0)
    healthz_open: bool = False
    accepted_with_token: bool = False


def auth_probes(url: str, token: str) -> AuthReport:
    """Requests without the token, or with a wrong one, against a server that requires
    ``token``: each must be a 401 and score nothing; the probes stay open."""
    import httpx

    body = {"query": ["<reasoning>r</reasoning><answer>4</answer>"], "labels": ["4"]}
    wrong = [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {token}x"},
        {"Authorization": f"Bearer {token[:-1]}"},
        {"Authorization": f"Bearer {token.upper()}"},
        {"Authorization": f"Basic {token}"},
        {"Authorization": token},
        {"X-Api-Key": token},
    ]
    report = AuthReport()
    before = scrape(url).get("gtpo_rs_items_total", 0.0)
    for path in ROUTES:
        for headers in wrong:
            for content in (json.dumps(body).encode(), b"not json"):
                r = httpx.post(url + path, content=content, headers=headers, timeout=30)
                report.requests += 1
                report.refused += r.status_code == 401 and "token" in r.json()["detail"]
        for query in ("?token=", f"?token={token}x", f"?tok={token}"):
            r = httpx.post(url + path + query, json=body, timeout=30)
            report.requests += 1
            report.refused += r.status_code == 401
    report.scored = scrape(url).get("gtpo_rs_items_total", 0.0) - before
    report.healthz_open = httpx.get(url + "/healthz", timeout=10).status_code == 200
    ok = httpx.post(url + ROUTES[0], json=body, headers={"Authorization": f"Bearer {token}"})
    report.accepted_with_token = ok.status_code == 200 and ok.json()["rewards"] == [20.0]
    return report
