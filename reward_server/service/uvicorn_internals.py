"""uvicorn's internals the reward server's connection limits build on, declared once and checked
when ``gtpo-reward-server`` starts.

``connections.LimitedHttpProtocol`` subclasses uvicorn's private ``HttpToolsProtocol``: it
overrides its parser callbacks and flow-control hooks and reads what uvicorn's ``__init__`` and
``connection_made`` set on the instance. A release that renamed one of them would not fail: an
override of a method uvicorn no longer calls is silently never called, and the limit it holds
(a header cap, a deadline, the client-gone wrapper) is off. So the server checks, before it
serves, that the installed uvicorn is in the range it was tested with and still has each name,
and refuses to start otherwise, with the range to install.
"""

from __future__ import annotations

import importlib
import inspect
import re
from importlib import metadata

# The releases tested: MINIMUM <= version < BELOW (pyproject.toml pins the same range; a test
# checks that they agree).
MINIMUM = (0, 54)
BELOW = (0, 55)
PIN = "uvicorn>=0.54,<0.55"

MODULE = "uvicorn.protocols.http.httptools_impl"
# The names ``LimitedHttpProtocol`` overrides, calls through ``super()`` or imports.
REQUIRED = (
    "STATUS_LINE",
    "HttpToolsProtocol",
    "HttpToolsProtocol.connection_made",
    "HttpToolsProtocol.connection_lost",
    "HttpToolsProtocol.data_received",
    "HttpToolsProtocol.on_headers_complete",
    "HttpToolsProtocol.on_body",
    "HttpToolsProtocol.on_message_complete",
    "HttpToolsProtocol.on_response_complete",
    "HttpToolsProtocol.pause_writing",
    "HttpToolsProtocol.resume_writing",
    "HttpToolsProtocol._start_asgi_task",
)
# What it reads on its instances that uvicorn sets in its methods (``self.name = …``).
INSTANCE = ("loop", "limit_concurrency", "server_state", "cycle", "transport", "flow")


class UvicornIncompatibleError(RuntimeError):
    """The installed uvicorn lacks what the connection limits build on."""


def supported() -> str:
    return f">={'.'.join(map(str, MINIMUM))},<{'.'.join(map(str, BELOW))}"


def release(version: str) -> tuple[int, ...]:
    """(major, minor) of a version string: "0.54.0" -> (0, 54)."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2])


def _resolve(dotted: str) -> object | None:
    value: object | None = importlib.import_module(MODULE)
    for part in dotted.split("."):
        value = getattr(value, part, None)
    return value


def missing() -> list[str]:
    """Every declared name the installed uvicorn does not have."""
    gone = [name for name in REQUIRED if _resolve(name) is None]
    protocol = _resolve("HttpToolsProtocol")
    if protocol is not None:
        source = inspect.getsource(protocol)
        gone += [
            f"HttpToolsProtocol().{name}"
            for name in INSTANCE
            if not re.search(rf"self\.{name}\s*(:[^=\n]*)?=", source)  # annotated or not
        ]
    return gone


def check_uvicorn(version: str | None = None) -> str:
    """Raise UvicornIncompatibleError unless a tested uvicorn with every declared internal is
    installed. Returns the version."""
    version = version or metadata.version("uvicorn")
    if not MINIMUM <= release(version) < BELOW:
        raise UvicornIncompatibleError(
            f"tested with uvicorn {supported()}, found {version}: the server's "
            f"connection limits extend uvicorn's private HTTP protocol. Install `pip install "
            f"'{PIN}'`."
        )
    gone = missing()
    if gone:
        raise UvicornIncompatibleError(
            f"uvicorn {version} lacks what the reward server's connection limits extend: "
            f"{', '.join(gone)} ({MODULE}). Install `pip install '{PIN}'`."
        )
    return version
