"""Log volume bounded per cause: a client can make the same thing happen thousands of times a
second (reset connections, send prompts that are not in their queries), and a line each time
floods the log and holds the event loop while it is written. The metrics count every one; the
log says each cause once per interval, with how many it left out since."""

from __future__ import annotations

import logging
import threading
import time

# One line per cause at most this often.
LOG_INTERVAL_S = 60.0


class Throttled:
    """``warning(cause, message, *args)`` logs at most one line per ``cause`` every
    ``interval_s`` seconds, the first at once; a line after a quiet spell says how many of its
    cause were not logged since the last one. Thread-safe (the reading threads log too)."""

    def __init__(self, logger: logging.Logger, interval_s: float = LOG_INTERVAL_S) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._last: dict[str, float] = {}
        self._skipped: dict[str, int] = {}
        self._lock = threading.Lock()

    def warning(self, cause: str, message: str, *args: object) -> None:
        self.log(logging.WARNING, cause, message, *args)

    def log(self, level: int, cause: str, message: str, *args: object) -> None:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(cause)
            if last is not None and now - last < self.interval_s:
                self._skipped[cause] = self._skipped.get(cause, 0) + 1
                return
            self._last[cause] = now
            skipped = self._skipped.pop(cause, 0)
        if skipped:
            message += " (%d more since the last such line, not logged)"
            args = (*args, skipped)
        elif last is None:
            message += f" (further ones: one line every {self.interval_s:g} s at most)"
        self.logger.log(level, message, *args)
