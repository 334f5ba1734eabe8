"""Runs the documented commands of a page as a reader would, after the substitution table.

One user follows the docs: every page works in one copy of the repository (the commands are
written for a clone), so a page finds what an earlier one made; the first `pip install` on any
page creates the user's virtual environment (a fresh one, not CI's), and every later command of
every page runs in it; a command whose substituted form already ran is not run again. A page
runs in one shell session: the environment with the page's exports and the processes it starts
in the background. A server started in the foreground (a reader opens another terminal for the
next line) runs in the background, and the next line waits until it answers.

Single-node training commands find a Ray head started for the page with logical GPUs (a GPU
node's `ray.init()` finds its GPUs itself). A block whose comments name nodes ("# head node",
"# every other node") runs in two network namespaces joined by a veth pair
(tests/openrlhf/test_orl_two_nodes.py), each command on the node its comment names.

Every command prints what it ran, each substitution and its time; `Report` keeps them, and the
session fixture prints them as one table at the end (documented-commands.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import failure_cause
import memory_gate
from documented import pages as docs
from documented.substitutions import (
    LAUNCHER,
    Context,
    Substituted,
    not_run,
    run_by_test,
    substitute,
)

MARK = "GTPO_DOCS_SESSION"  # in every process a page starts: how the page's end finds them
COMMAND_TIMEOUT = 1200
SERVER_WAIT = 180
# Hosts of the two-node blocks: what the reader substitutes for the variables the page leaves
# to them.
NODE_PLACES = {"head": "head", "other node": "worker", "anywhere": "worker"}


class CommandFailed(AssertionError):
    pass


@dataclass
class Ran:
    sub: Substituted
    returncode: int
    seconds: float
    log: Path
    stage: str = ""
    peak_gib: float | None = None  # a training run's measured peak (memory_gate.GroupPeak)

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Report:
    """Every command of the docs: what ran, with its changes and time, or why it did not."""

    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # where, stage, time, what

    def add(self, where: str, stage: str, time_: str, what: str) -> None:
        self.rows.append((where, stage, time_, what))

    def slowest(self, n: int = 10) -> str:
        """The `n` commands that took longest, slowest first, with their times."""
        timed = [(float(t.removesuffix(" s")), w) for w, _, t, _ in self.rows if t.endswith(" s")]
        timed.sort(reverse=True)
        total = sum(seconds for seconds, _ in timed)
        lines = [f"{seconds:6.0f} s  {where}" for seconds, where in timed[:n]]
        head = f"{len(timed)} commands ran in {total / 60:.1f} min; the slowest:"
        return "\n".join([head, *lines])

    def markdown(self) -> str:
        lines = ["| command | stage | time | what ran |", "| --- | --- | --- | --- |"]
        lines += [f"| {w} | {s} | {t} | {x} |" for w, s, t, x in self.rows]
        return "\n".join(lines) + "\n"


USER_TORCH_EXTENSIONS = Path.home() / ".cache" / "torch_extensions" / "gtpo-documented-venv"


@dataclass
class UserEnvironment:
    """The reader's virtual environment, made by the first documented `pip install`."""

    root: Path
    made: bool = False

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def make(self) -> None:
        if not self.made:
            subprocess.run([sys.executable, "-m", "venv", str(self.root)], check=True)
            self.made = True


class DocsRun:
    """One CI run of the docs, as one user follows them: one clone of the repository as the
    working directory of every page, the user's environment, the tiny model, what ran."""

    def __init__(self, root: Path, tiny_model: Path, stage: str) -> None:
        self.root = root
        self.tiny_model = tiny_model
        self.stage = stage
        self.workdir = root / "clone"
        _copy_repository(self.workdir)
        self.user = UserEnvironment(root / "user-venv")
        self.ran: dict[tuple, Ran] = {}  # substituted argv and env → its run
        self.by_where: dict[str, Ran] = {}
        self.report = Report()

    def page(self, page: str) -> Session:
        return Session(self, page)

    def release(self) -> None:
        """Remove the user's environment and the clone (about 6 GB, both made again by a next
        run); the logs and the report stay, so a failed run keeps what explains it."""
        shutil.rmtree(self.user.root, ignore_errors=True)
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.user.made = False

    def run_one(self, page: str, text: str) -> Ran:
        """The documented command of `page` whose text holds `text`, run now in a session of its
        own (a test that reads what one documented command made; the page's own run later finds
        it ran). Its page's exports before it apply."""
        commands = [c for b in docs.blocks(docs.ROOT / page) for c in b.commands]
        (command,) = [c for c in commands if text in c.text]
        with page_session(self, page) as session:
            for earlier in commands[: commands.index(command)]:
                if earlier.argv[0] == "export":
                    session.run(earlier)
            ran = session.run(command)
        assert ran is not None, command.where
        return ran


class Session:
    """One page, as one shell."""

    def __init__(self, run: DocsRun, page: str) -> None:
        self.docs_run = run
        self.page = page
        self.id = uuid.uuid4().hex[:8]
        self.workdir = run.workdir
        self.logs = run.root / "logs" / page.replace("/", "_").removesuffix(".md")
        self.logs.mkdir(parents=True, exist_ok=True)
        self.env: dict[str, str] = {**os.environ, MARK: self.id}
        self.env.pop("VIRTUAL_ENV", None)
        if self.env.pop("GTPO_TEST_SET_HF_HUB_OFFLINE", None):  # tests/conftest.py's setting,
            self.env.pop("HF_HUB_OFFLINE", None)  # not the reader's
        self.ray_address: str | None = None
        self.background: list[tuple[Substituted, subprocess.Popen]] = []
        self.context = Context(tiny_model=run.tiny_model, workdir=self.workdir)
        if run.user.made:
            self._activate()

    # -- running ------------------------------------------------------------------------------

    def run_block(self, block: docs.Block) -> list[Ran]:
        if block.language == "python":
            return [self._python(block)]
        runnable = [c for c in block.commands if c.argv[0] != "export" and not not_run(c)]
        if not runnable:  # only what a GPU runs, and the exports it would read: reported
            for command in block.commands:
                if command.argv[0] != "export":
                    self.run(command)
            return []
        if any(_node(c.place) for c in block.commands):
            return self._two_nodes(block)
        return [r for c in block.commands if (r := self.run(c)) is not None]

    def run(self, command: docs.Command, place_env: dict[str, str] | None = None,
            wrap: list[str] | None = None) -> Ran | None:  # fmt: skip
        """Run one command (None: an export, or a command that does not run here)."""
        env = {**self.env, **(place_env or {})}
        reason = not_run(command)
        if reason:
            self.docs_run.report.add(command.where, "-", "-", f"not run: {reason}")
            return None
        argv = [docs.expand(t, env, command.where) for t in command.argv]
        if argv[0] == "export":
            sub = substitute(command, argv, self.context)
            if sub.notes:
                print(sub.report(), flush=True)
            target = place_env if place_env is not None else self.env
            for assignment in sub.argv[1:]:
                name, _, value = assignment.partition("=")
                target[name] = value
            return None
        if argv[0] == "cd":
            self.workdir = (self.workdir / argv[1]).resolve()
            return None
        if argv[0] == "pip":
            self.docs_run.user.make()
            self._activate()
            env = {**env, **self._activated()}
        sub = substitute(command, argv, self.context)
        test = run_by_test(sub.argv)
        if test is not None:
            print(f"{command.where}: run by {test}")
            self.docs_run.report.add(command.where, "-", "-", f"run by {test}")
            return None
        env.update({k: v for k, v in command.env})
        env = _merge_env(env, sub.env)
        if sub.ray_head:  # substitutions' table
            self._ray_head(env)  # its workers inherit the command's environment
            env["RAY_ADDRESS"] = self.ray_address or ""
        key = (tuple(sub.argv), tuple(sorted(sub.env.items())), tuple(wrap or ()))
        if key in self.docs_run.ran and not command.background:
            earlier = self.docs_run.ran[key]
            there = earlier.sub.command.where
            print(f"{command.where}: the same command ran at {there}")
            self.docs_run.report.add(command.where, "-", "-", f"same as {there}")
            self.docs_run.by_where[command.where] = earlier
            return earlier
        print(sub.report(), flush=True)
        for first in sub.first:
            self._execute(first, env, self.logs / f"{command.line}-first.log", sub)
        if command.background or _is_server(sub.argv):
            return self._start_background(sub, env, wrap)
        started = time.monotonic()
        log = self.logs / f"{command.line}-{sub.argv[0].replace('/', '_')}.log"
        need = _declared_gib(sub.argv)
        # Its peak, beside what it declared: every process of the page while it runs (its
        # actors live in the page's Ray head; the page's reward server counts too, as it does
        # beside the other part's runs). Not for containers, which are no process of ours.
        peaks: list[float] = []
        peak = (need, command.where, peaks) if need and Path(sub.argv[0]).name == LAUNCHER else None
        with _memory_gate(need, command.where):
            code = self._execute([*(wrap or []), *sub.argv], env, log, sub, False, peak)
        seconds = time.monotonic() - started
        ran = Ran(sub, code, seconds, log, self.docs_run.stage, peaks[0] if peaks else None)
        self._record(ran, key)
        if code != 0:
            raise CommandFailed(
                f"{command.where} exited {code}: {failure_cause.cause(ran.output)}\n"
                f"{sub.report()}\n--- its output, last lines\n{ran.output[-6000:]}"
            )
        self._check_output(ran)
        return ran

    def _record(self, ran: Ran, key: tuple | None = None) -> None:
        command = ran.sub.command
        if key is not None:
            self.docs_run.ran[key] = ran
        self.docs_run.by_where[command.where] = ran
        changes = "; ".join(f"{k}: {c}" for k, c, _ in ran.sub.notes) or "as written"
        took = f"{ran.seconds:.0f} s"
        if ran.peak_gib is not None:
            took += f", the page's processes {ran.peak_gib:.1f} GiB at its peak"
        self.docs_run.report.add(command.where, ran.stage, took, changes)
        print(f"    ran in {took}, exit {ran.returncode}", flush=True)

    def _execute(self, argv: list[str], env: dict[str, str], log: Path, sub: Substituted,
                 check: bool = True,
                 peak: tuple[float, str, list[float]] | None = None) -> int:  # fmt: skip
        """Run ``argv`` in its own session to its end; its exit status. ``peak``: (declared
        GiB, what, a list to append the measured peak to), a peak above the declaration
        listed at the slow stage's end (memory_gate.OVERRUNS)."""
        self._check_background()
        with log.open("a") as sink:
            proc = subprocess.Popen(
                argv, cwd=self.workdir, env=env, stdout=sink, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
            group = None if peak is None else memory_gate.GroupPeak(proc.pid, (MARK, self.id))
            try:
                code = proc.wait(timeout=COMMAND_TIMEOUT)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise CommandFailed(
                    f"{sub.command.where}: {' '.join(argv[:3])} did not end in "
                    f"{COMMAND_TIMEOUT} s\n{log.read_text()[-4000:]}"
                ) from None
            finally:
                if group is not None and peak is not None:
                    declared, what, peaks = peak
                    peaks.append(group.stop(declared, what))
        if check and code != 0:
            raise CommandFailed(
                f"{sub.command.where}: {' '.join(argv)} (run first) exited {code}: "
                f"{failure_cause.cause(log.read_text())}\n{log.read_text()[-4000:]}"
            )
        return code

    def _check_output(self, ran: Ran) -> None:
        """A command whose documented output is JSON prints that JSON."""
        documented = ran.sub.command.output
        if not documented:
            return
        expected = json.loads(" ".join(documented))
        got = json.loads(ran.output.strip().splitlines()[-1])
        if got != expected:
            raise CommandFailed(f"{ran.sub.command.where} printed {got}, the page shows {expected}")

    # -- servers ------------------------------------------------------------------------------

    def _start_background(self, sub: Substituted, env: dict[str, str],
                          wrap: list[str] | None) -> Ran:  # fmt: skip
        if _is_server(sub.argv):
            self._stop_server_on(_flag(sub.argv, "--port") or "8000", sub)
        log = self.logs / f"{sub.command.line}-{sub.argv[0]}.log"
        sink = log.open("w")
        proc = subprocess.Popen(
            [*(wrap or []), *sub.argv], cwd=self.workdir, env=env, stdout=sink,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self.background.append((sub, proc))
        started = time.monotonic()
        if _is_server(sub.argv):
            self._wait_ready(sub, proc, log, wrap)
        ran = Ran(sub, 0, time.monotonic() - started, log, self.docs_run.stage)
        self.docs_run.by_where[sub.command.where] = ran
        changes = "; ".join(f"{k}: {c}" for k, c, _ in sub.notes)
        self.docs_run.report.add(
            sub.command.where, ran.stage, f"{ran.seconds:.0f} s",
            "in the background" + (f"; {changes}" if changes else ""),
        )  # fmt: skip
        return ran

    def _wait_ready(self, sub: Substituted, proc: subprocess.Popen, log: Path,
                    wrap: list[str] | None) -> None:  # fmt: skip
        port = _flag(sub.argv, "--port") or "8000"
        host = _flag(sub.argv, "--host") or "127.0.0.1"
        host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        url = f"http://{host}:{port}/readyz"
        deadline = time.monotonic() + SERVER_WAIT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise CommandFailed(f"{sub.command.where} ended with {proc.returncode}:\n"
                                    f"{log.read_text()[-4000:]}")  # fmt: skip
            check = f"import urllib.request; urllib.request.urlopen({url!r}, timeout=2)"
            probe = [sys.executable, "-c", check]
            if subprocess.run([*(wrap or []), *probe], capture_output=True).returncode == 0:
                return
            time.sleep(1)
        raise CommandFailed(f"{sub.command.where}: {url} did not answer in {SERVER_WAIT} s\n"
                            f"{log.read_text()[-4000:]}")  # fmt: skip

    def _stop_server_on(self, port: str, sub: Substituted) -> None:
        """A reader who starts a server on a port the page's earlier server holds stops that
        one first (Ctrl-C in its terminal)."""
        for earlier, proc in list(self.background):
            if _is_server(earlier.argv) and (_flag(earlier.argv, "--port") or "8000") == port:
                print(f"    (stops the server of {earlier.command.where} first: same port)")
                _kill_group(proc)
                self.background.remove((earlier, proc))

    def _check_background(self) -> None:
        for sub, proc in self.background:
            if proc.poll() not in (None, 0) and _is_server(sub.argv):
                raise CommandFailed(
                    f"{sub.command.where} (in the background) ended with {proc.returncode}"
                )

    # -- Ray ----------------------------------------------------------------------------------

    def _ray_head(self, env: dict[str, str]) -> None:
        """A Ray head on 127.0.0.1 with the page's logical GPUs, started once per page with the
        first training command's environment (Ray's workers inherit the head's)."""
        if self.ray_address:
            return
        port = _free_port()
        temp = Path("/tmp") / f"gtpo-docs-{self.id}"
        argv = ["ray", "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                "--num-gpus", str(self.context.gpus_per_node), "--num-cpus", "8",
                "--include-dashboard", "false", "--object-store-memory", "400000000",
                "--temp-dir", str(temp)]  # fmt: skip
        print(f"    gpus   Ray: {' '.join(argv)}   (a GPU node's Ray finds its GPUs itself)")
        done = subprocess.run(argv, env=env, cwd=self.workdir, capture_output=True, text=True,
                              timeout=180)  # fmt: skip
        if done.returncode != 0:
            raise CommandFailed(f"ray start: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        self.ray_address = f"127.0.0.1:{port}"

    # -- python blocks -----------------------------------------------------------------------

    def _python(self, block: docs.Block) -> Ran:
        from documented.substitutions import substitute_python

        command = docs.Command(block.page, block.line, ("python", f"block-{block.line}.py"))
        code, sub = substitute_python(block, command, self.context)
        script = self.workdir / f"block-{block.line}.py"
        script.write_text(code)
        print(sub.report(), flush=True)
        log = self.logs / f"{block.line}-python.log"
        env = _merge_env({**self.env, **self._activated()}, sub.env)
        started = time.monotonic()
        user = self.docs_run.user
        python = str(user.bin / "python") if user.made else sys.executable
        code_ = self._execute([python, script.name], env, log, sub, check=False)
        ran = Ran(sub, code_, time.monotonic() - started, log, self.docs_run.stage)
        self._record(ran)
        if code_ != 0:
            raise CommandFailed(f"{block.where} (python) exited {code_}:\n{ran.output[-6000:]}")
        return ran

    # -- two nodes ----------------------------------------------------------------------------

    def _two_nodes(self, block: docs.Block) -> list[Ran]:
        from namespaces import two_namespaces

        out = []
        # Set for one machine by tests/openrlhf/conftest.py: with it Ray refuses a second node.
        self.env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        shared = self.workdir / "shared"
        shared.mkdir(exist_ok=True)
        self.context.shared = shared
        self.context.ray_temp = Path(tempfile.mkdtemp(prefix="gtpo-ray-", dir="/tmp"))
        try:
            with two_namespaces() as net:
                out = self._on_two_nodes(block, net, shared)
                self.close()
        finally:
            self.context.shared = None  # the page's later commands run on one node again
            shutil.rmtree(self.context.ray_temp, ignore_errors=True)
        return out

    def _on_two_nodes(self, block: docs.Block, net, shared: Path) -> list[Ran]:
        """Each command of the block on the node its comment names, as a shell there runs it."""
        out = []
        per_node = {"head": {"HEAD_IP": net.head_ip}, "worker": {"HEAD_IP": net.head_ip}}
        print(f"    hosts  $HEAD_IP → {net.head_ip}; the other node {net.worker_ip}; "
              f"/shared → {shared}   (two network namespaces on this machine)")  # fmt: skip
        for command in block.commands:
            node = _node(command.place) or "head"
            ran = self.run(command, place_env=per_node[node], wrap=net.wrap(node))
            if ran is not None:
                out.append(ran)
        return out

    # -- environment --------------------------------------------------------------------------

    def _activated(self) -> dict[str, str]:
        user = self.docs_run.user
        if not user.made:
            return {}
        return {
            "VIRTUAL_ENV": str(user.root),
            "PATH": f"{user.bin}{os.pathsep}{self.env['PATH']}",
            # DeepSpeed's CPU ops JIT-built into a folder of this environment's own: in the
            # shared default (~/.cache/torch_extensions) this venv's builds and the test suites'
            # venv's, whose include paths differ, rebuilt each other's at every run side by
            # side (1-3 min each, slow stage). Where it is kept does not change what is built.
            "TORCH_EXTENSIONS_DIR": str(USER_TORCH_EXTENSIONS),
        }

    def _activate(self) -> None:
        self.env.update(self._activated())

    def close(self) -> None:
        """End every process the page started (its servers, Ray, vLLM engines)."""
        for _, proc in self.background:
            _kill_group(proc)
        self.background.clear()
        _kill_marked(MARK, self.id)
        self.ray_address = None


def _merge_env(env: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    out = dict(env)
    for name, value in extra.items():
        if name == "PYTHONPATH" and out.get("PYTHONPATH"):
            value = os.pathsep.join([value, out["PYTHONPATH"]])
        out[name] = value
    return out


# A documented training run's peak: 8.9 GiB measured for a first run, whose DeepSpeed ops are
# JIT-built for the user's environment by two compilers of 1.9 GiB each (one rank, one engine).
TRAINING_RUN_GIB = 9.0


# `docker compose up` with the demo: the quick tiny-model demo in its container beside the
# reward server's. The same two outside Docker (`gtpo demo --quick`, which starts its server)
# peaked at 1.6 GiB; the containers are no process of ours, so tests/memory_gate.GroupPeak
# cannot measure them, and the declaration leaves room for the engine and the image builds.
COMPOSE_DEMO_GIB = 3.0


def _declared_gib(argv: list[str]) -> float | None:
    """The peak a command holds gigabytes for: a training command (`gtpo-openrlhf`, also
    through `ray job submit`; `docker compose up`); None for any other."""
    if any(Path(t).name == LAUNCHER for t in argv) and "--dry-run" not in argv:
        return TRAINING_RUN_GIB
    if argv[:2] == ["docker", "compose"] and "up" in argv:
        return COMPOSE_DEMO_GIB
    return None


def _memory_gate(need_gib: float | None, where: str) -> contextlib.AbstractContextManager:
    """A command that holds gigabytes (``_declared_gib``) starts when its peak fits beside the
    training runs of the slow stage's other part (tests/memory_gate.py)."""
    if need_gib is None:
        return contextlib.nullcontext()
    return memory_gate.admitted(need_gib, where)


def _is_server(argv: list[str]) -> bool:
    return argv[0] == "gtpo-reward-server" or argv[:3] == [sys.executable, "-m", "reward_server"]


def _node(place: str) -> str | None:
    for words, node in NODE_PLACES.items():
        if words in place:
            return node
    return None


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def _kill_marked(name: str, value: str) -> None:
    """SIGKILL every process whose environment holds NAME=VALUE: what a page started, Ray's
    daemons and workers and vLLM's engines included, however they detached."""
    import psutil

    needle = f"{name}={value}".encode()
    for _ in range(3):
        found = []
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
                if needle in environ.split(b"\0"):
                    found.append(proc)
        if not found:
            return
        for proc in found:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(found, timeout=10)


def _copy_repository(target: Path) -> None:
    """The tracked files of this checkout (and its untracked, not ignored ones): a clone."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=docs.ROOT, capture_output=True, check=True,
    )  # fmt: skip
    for name in listed.stdout.decode().split("\0"):
        if not name:
            continue
        source = docs.ROOT / name
        if not source.is_file():
            continue
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)


@contextlib.contextmanager
def page_session(run: DocsRun, page: str) -> Iterator[Session]:
    session = run.page(page)
    try:
        yield session
    finally:
        session.close()
