"""Reliability of the reward server under load, faults and hostile input, with a table of figures.

Runs the reliability harness (tests/reward_server/reliability_harness.py, whose docstring says
what each stage does) on real ``python -m reward_server`` processes on 127.0.0.1: an oracle run,
N completions from 64 clients while workers are killed and answers hang, OpenRLHF's own client
through server restarts, hand-written hostile requests, schemathesis, and token probes.

    python benchmarks/reward_server_reliability.py              # 24,000 completions, 64 clients
    python benchmarks/reward_server_reliability.py --n 5000 --skip-fuzz

The slow tests (tests/reward_server/test_rs_reliability.py) call the same functions and assert
on what they return. Only loopback traffic; every loop is bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# The harness lives with the tests (shared harnesses live in tests/, benchmarks import them); a
# benchmark runs as a script, so the harness's folder goes on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reward_server"))
from reliability_harness import (
    OPENRLHF_RETRY_WINDOW_S,
    AuthReport,
    HostileResult,
    LoadReport,
    RestartReport,
    auth_probes,
    fuzz_openapi,
    hostile_cases,
    make_items,
    openrlhf_restart,
    plain_items,
    probe,
    run_load,
    schemathesis_cli,
    server_env,
    single_request_rewards,
    start_server,
    stop_server,
)


def restart_verdict(restart: RestartReport, target_s: float) -> tuple[list[str], str | None]:
    """What the restart run got wrong, and a note when OpenRLHF's client dropped rewards because
    an outage outlasted its retry window. A reward lost while the server was back within that
    window, or a wrong one, is the server's fault; one lost to a longer outage is the restart's
    time, a target (``target_s``) that a busy machine cannot judge."""
    outage = max(restart.downtime_s, default=0.0)
    beyond_window = outage > OPENRLHF_RETRY_WINDOW_S
    problems = []
    if restart.wrong_reward or (restart.lost and not beyond_window):
        problems += restart.examples
    if outage > target_s:
        problems.append(f"a restart took {outage:.2f} s, over the {target_s:g} s target")
    note = None
    if beyond_window:
        note = (
            f"the server was down {outage:.2f} s, longer than OpenRLHF's retry window "
            f"({OPENRLHF_RETRY_WINDOW_S:g} s: 5 tries 1 s apart): its client dropped "
            f"{restart.lost} samples' rewards (gtpo-openrlhf's own client waits "
            "--gtpo.reward_timeout)"
        )
    return problems, note


def _mb(n: float) -> str:
    return f"{n / 2**20:+.1f} MB"


def print_table(
    load: LoadReport,
    restart: RestartReport | None,
    hostile: list[HostileResult],
    fuzz: tuple[int, int] | None,
    auth: AuthReport | None,
    timeout_s: float,
) -> None:
    rows: list[tuple[str, str, str]] = []
    rows.append(
        (
            "load held",
            f"{load.clients} clients, {load.completions:,} completions in {load.seconds:.1f} s "
            f"({load.completions / load.seconds:.0f}/s), both routes",
            f"{load.answered:,} answered",
        )
    )
    s0, t0 = load.memory_at(0.1)
    s_grow, t_grow = load.memory_growth(0.1)
    peak = max(m[3] for m in load.memory)
    rows.append(
        (
            "soak: memory (PSS)",
            f"server {s0 / 2**20:.0f} MB, server+workers {t0 / 2**20:.0f} MB at 10% of the run; "
            f"peak {peak / 2**20:.0f} MB; {len(load.memory)} samples",
            f"growth from 10% to the end: server {_mb(s_grow)}, server+workers {_mb(t_grow)}",
        )
    )
    restarts = ", ".join(f"{k} {v:.0f}" for k, v in sorted(load.restarts.items())) or "none"
    rows.append(
        (
            "faults: workers killed by PID",
            f"{load.kills} SIGKILLs from 1/3 to 1/2 of the run, then {load.forkserver_kills} of "
            f"the forkserver (all workers die with it); {load.reruns:.0f} checks re-run",
            f"pool whole {load.recovery_s:.2f} s after the last kill; at the end "
            f"{load.workers_after}/{load.workers_expected} live (gauge "
            f"{load.workers_gauge_after:.0f}); /metrics restarts: {restarts}",
        )
    )
    reasons = ", ".join(f"{v} {k}" for k, v in sorted(load.hang_reasons.items()))
    rows.append(
        (
            "faults: hung verifications",
            f"{load.hangs} answers that never return (test hook) from 1/2 to 2/3 of the run, "
            f"timeout {timeout_s:g} s",
            f"all scored accuracy 0; verdicts of those sent to /v1/score: {reasons}",
        )
    )
    if restart is not None:
        down = " and ".join(f"{d:.2f} s" for d in restart.downtime_s)
        rows.append(
            (
                "faults: server stop/restart",
                f"OpenRLHF execute(), {restart.samples:,} samples; SIGTERM then SIGKILL, "
                f"back on the same port in {down}",
                f"{restart.rewarded:,} rewarded, {restart.client_retries} client retries, "
                f"{restart.lost} dropped by the client, {restart.wrong_reward} wrong",
            )
        )
    failed = [h for h in hostile if h.problem]
    slowest = max((h.seconds for h in hostile), default=0.0)
    rows.append(
        (
            "hostile: hand-written",
            f"{len(hostile)} cases (malformed, oversize, nesting, 1 MB, LaTeX bombs, code)",
            f"{len(hostile) - len(failed)} handled, slowest {slowest:.2f} s",
        )
    )
    if fuzz is not None:
        rows.append(("hostile: schemathesis", f"{fuzz[0]:,} generated cases", f"{fuzz[1]} failed"))
    if auth is not None:
        rows.append(
            (
                "auth",
                f"{auth.requests} requests without a valid token",
                f"{auth.refused} refused (401), {auth.scored:.0f} items scored, /healthz "
                f"{'open' if auth.healthz_open else 'CLOSED'}",
            )
        )
    lost = load.failures
    if restart is not None:
        lost += restart.wrong_reward
        lost += restart.lost if max(restart.downtime_s) <= OPENRLHF_RETRY_WINDOW_S else 0
    rows.append(
        (
            "lost or wrong responses",
            f"lost {load.lost}, 5xx {load.status_5xx}, other non-200 {load.status_other}, "
            f"wrong reward {load.wrong_reward}, misrouted {load.misrouted}",
            f"total {lost} (must be 0); correct answers whose accuracy was lost to the "
            f"per-answer deadline while workers were killed: {load.deadline_losses} (must be 0: "
            f"{load.retried} answers not computed in time were 503s, sent again)",
        )
    )
    lat = load.latency_ms
    rows.append(
        (
            "latency p50 / p99",
            f"before faults {lat['before'][0]:.0f} / {lat['before'][1]:.0f} ms; while workers "
            f"are killed {lat['kills'][0]:.0f} / {lat['kills'][1]:.0f} ms",
            f"while hangs are cut {lat['hangs'][0]:.0f} / {lat['hangs'][1]:.0f} ms; after "
            f"{lat['after'][0]:.0f} / {lat['after'][1]:.0f} ms",
        )
    )
    width = max(len(r[0]) for r in rows)
    for name, what, result in rows:
        print(f"{name:<{width}}  {what}\n{'':<{width}}  -> {result}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=24_000, help="completions in the load run")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--hang", type=int, default=12, help="hanging answers in the middle third")
    ap.add_argument("--kill-every", type=float, default=0.1, help="seconds between kills")
    ap.add_argument("--restart-samples", type=int, default=3000)
    ap.add_argument(
        "--restart-target-s", type=float, default=OPENRLHF_RETRY_WINDOW_S,
        help="the longest restart accepted (default: OpenRLHF's retry window, %(default)g s; "
        "inf on a shared machine, where the time is not the server's)",
    )  # fmt: skip
    ap.add_argument("--fuzz-examples", type=int, default=300)
    ap.add_argument("--skip-fuzz", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    workers, timeout_s = 2, 2.0
    env = server_env({"GTPO_RS_VERIFY_WORKERS": str(workers)})
    scratch = Path(tempfile.mkdtemp(prefix="gtpo-rs-reliability-"))
    marker = scratch / "code-ran"
    log = scratch / "servers.log"
    say = lambda line: print(f"  [{time.strftime('%H:%M:%S')}] {line}", flush=True)  # noqa: E731
    print(f"{os.cpu_count()} CPU cores, {workers} verification workers, timeout {timeout_s:g} s")

    items = make_items(args.n, args.seed, hang=args.hang, marker=str(marker))
    proc, url = start_server(env, log=log)
    try:
        t0 = time.perf_counter()
        oracle = single_request_rewards(url, items)
        say(
            f"oracle: {len(oracle)} distinct items scored alone in {time.perf_counter() - t0:.0f} s"
        )
    finally:
        stop_server(proc)

    proc, url = start_server(env, log=log)
    try:
        load = run_load(
            url,
            proc.pid,
            items,
            oracle,
            clients=args.clients,
            kill_every_s=args.kill_every,
            verify_workers=workers,
            progress=say,
        )
        say(f"load: {load.completions} completions in {load.seconds:.0f} s")
        hostile = [probe(url, c) for c in hostile_cases(str(marker))]
        fuzz = None
        if not args.skip_fuzz and schemathesis_cli() is not None:
            generated, failures, _ = fuzz_openapi(url, args.fuzz_examples, args.seed + 1)
            fuzz = (generated, failures)
    finally:
        stop_server(proc)

    restart = None
    try:
        restart_items = plain_items(args.restart_samples, args.seed + 2)
        restart = openrlhf_restart(restart_items, env=env, log=log, progress=say)
    except ImportError as exc:
        say(f"OpenRLHF restart run skipped: {exc}")

    proc, url = start_server({**env, "GTPO_RS_API_TOKEN": "s3cret-token"}, log=log)
    try:
        auth = auth_probes(url, "s3cret-token")
    finally:
        stop_server(proc)

    print()
    print_table(load, restart, hostile, fuzz, auth, timeout_s)
    problems = load.examples + [f"{h.name}: {h.problem}" for h in hostile if h.problem]
    if restart is not None:
        restart_problems, note = restart_verdict(restart, args.restart_target_s)
        problems += restart_problems
        if note:
            print("note:", note)
    if marker.exists():
        problems.append("a code-like answer was executed: the marker file exists")
    for p in problems:
        print("FAILED:", p)
    if args.json:
        figures = {"load": load.__dict__, "restart": restart.__dict__ if restart else None}
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    shutil.rmtree(scratch, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
