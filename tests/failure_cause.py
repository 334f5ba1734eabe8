"""The line of a failed run's log that says why it failed, for the first line of an assertion.

pytest's short summary (and the slow stage's list of tests that did not pass) shows only the
first line of a failure's message. A run's log ends in a traceback whose last frames name no
cause ('File ".../train_ppo_ray.py", line 188, in train'), so the summary said nothing. The
cause is the last line that names an exception (Ray chains them: the last is the innermost),
or, when none does (a process killed by a signal), the log's last line.
"""

from __future__ import annotations

import re

# 'ValueError: ...', 'ray.exceptions.OutOfMemoryError: ...', 'RayTaskError(AssertionError): ...',
# 'torch.OutOfMemoryError: ...', 'KeyboardInterrupt', 'SystemExit: 2'
_EXCEPTION = re.compile(
    r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)(?:\([\w.]+\))?(?::|$)"
)


def cause(log: str) -> str:
    """The last line of `log` that names an exception, else its last non-blank line, stripped;
    '(empty log)' when it has none."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        if _EXCEPTION.match(line):
            return line
    return lines[-1] if lines else "(empty log)"
