"""Console script ``gtpo-reward-server`` (also ``python -m reward_server``)."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import shutil
import signal
import tempfile

import uvicorn

from reward_server.service.app import SUPERVISOR_PID
from reward_server.service.connections import LimitedHttpProtocol
from reward_server.service.pool import STOP_SIGNALS, TempDirTooLongError, check_socket_room
from reward_server.service.settings import Settings
from reward_server.service.uvicorn_internals import UvicornIncompatibleError, check_uvicorn

log = logging.getLogger("reward_server")


def main(argv: list[str] | None = None) -> None:
    """Serve the reward service with uvicorn. Flags override ``GTPO_RS_HOST/PORT/WORKERS``."""
    defaults = Settings()
    parser = argparse.ArgumentParser(
        prog="gtpo-reward-server",
        description="GTPO math reward server (OpenRLHF remote reward protocol). Every setting "
        "is also read from GTPO_RS_<NAME> environment variables.",
    )
    parser.add_argument("--host", default=defaults.host, help="interface (default %(default)s)")
    parser.add_argument(
        "--port", type=int, default=defaults.port, help="port (default %(default)s)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=defaults.workers,
        help="uvicorn worker processes, each with its own verification pool (default %(default)s)",
    )
    parser.add_argument(
        "--verify-workers",
        type=int,
        default=None,
        help="verification processes per server process (default: GTPO_RS_VERIFY_WORKERS or "
        "the number of cores)",
    )
    parser.add_argument("--log-level", default=defaults.log_level, help="default %(default)s")
    args = parser.parse_args(argv)
    # The connection limits extend uvicorn's private protocol: the release must have it. The
    # verification pool's forkserver needs a socket path under TMPDIR.
    try:
        check_uvicorn()
        check_socket_room()
    except (UvicornIncompatibleError, TempDirTooLongError) as exc:
        parser.exit(2, f"gtpo-reward-server: {exc}\n")

    # The app factory reads GTPO_RS_* in each uvicorn worker process: pass flags that way.
    os.environ["GTPO_RS_HOST"] = args.host
    os.environ["GTPO_RS_PORT"] = str(args.port)
    os.environ["GTPO_RS_WORKERS"] = str(args.workers)
    os.environ["GTPO_RS_LOG_LEVEL"] = args.log_level
    if args.verify_workers is not None:
        os.environ["GTPO_RS_VERIFY_WORKERS"] = str(args.verify_workers)
    settings = Settings()  # fail early, with pydantic's message, on a bad environment
    if settings.api_token is None and not loopback(args.host):
        logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
        log.warning(
            "serving %s without a token: anyone who reaches this address can score and load "
            "the server; set GTPO_RS_API_TOKEN (its clients send it as Authorization: Bearer)",
            args.host,
        )

    # Several uvicorn workers each count their own requests; prometheus_client's multiprocess
    # mode makes every worker write its samples to a shared folder and /metrics sum them, so a
    # scrape reports the whole server whichever worker answers it.
    metrics_dir = None
    if args.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        metrics_dir = tempfile.mkdtemp(prefix="gtpo-rs-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    # Several uvicorn workers end with their supervisor (app.end_with_supervisor).
    if args.workers > 1:
        os.environ[SUPERVISOR_PID] = str(os.getpid())
    else:
        os.environ.pop(SUPERVISOR_PID, None)
    _stop_with_status_0()
    try:
        _serve(args)
    finally:
        os.environ.pop(SUPERVISOR_PID, None)
        if metrics_dir is not None:
            os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
            shutil.rmtree(metrics_dir, ignore_errors=True)


def loopback(host: str) -> bool:
    """Whether ``host`` is only reachable from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: whatever it resolves to


# Beyond the wall-clock net, time for the answers to be built and sent on a busy machine: with
# the graceful stop equal to the net (10 s), a batch in flight beside a training run was cut by
# uvicorn before its net had answered it.
GRACE_BEYOND_NET_S = 5.0


def _stop_with_status_0() -> None:
    """End with status 0 after a graceful stop on SIGTERM or SIGINT, with one process or several.

    uvicorn's supervisor of several workers exits 0; a single uvicorn process re-raises the
    signal once it has shut down, under the handler found before it started: Python's default
    would end it with 143 (SIGTERM) or a KeyboardInterrupt traceback (SIGINT). A supervisor
    (systemd, Slurm, Kubernetes) would then report the same clean stop differently by the
    number of workers."""

    def stopped(signum: int, frame: object) -> None:
        raise SystemExit(0)

    for stop in STOP_SIGNALS:
        signal.signal(stop, stopped)


def _serve(args: argparse.Namespace) -> None:
    settings = Settings()
    uvicorn.run(
        "reward_server.service.app:app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level.lower(),
        # Requests in flight at a stop signal are answered by their checks' wall-clock net at
        # the latest (a verdict, or a 503 to retry): the graceful stop waits that long, and more.
        timeout_graceful_shutdown=settings.verify_wall_timeout_s + GRACE_BEYOND_NET_S,
        timeout_keep_alive=settings.keep_alive_s,
        access_log=settings.access_log,
        http=LimitedHttpProtocol,  # header, body and send deadlines, header and connection caps
    )


if __name__ == "__main__":
    main()
