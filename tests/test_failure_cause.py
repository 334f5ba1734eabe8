"""tests/failure_cause.py: the first line of a failed run's assertion names its cause."""

from failure_cause import cause
from hypothesis import given
from hypothesis import strategies as st

RAY_LOG = """\
(PPOTrainer pid=123) step 1
Traceback (most recent call last):
  File "/x/openrlhf/cli/train_ppo_ray.py", line 188, in train
    ray.get(ppo_trainer.fit.remote())
ray.exceptions.RayTaskError(RuntimeError): ray::PPOTrainer.fit() (pid=77, ip=127.0.0.1)
  File "/x/openrlhf/utils/agent.py", line 360, in _post_request
    raise RuntimeError(
RuntimeError: Request error for 5 times, returning None. Please check the API server.
(raylet) [2026-11-29 10:01:02] some later chatter
"""


def test_the_innermost_exception_of_a_ray_chain_is_the_cause():
    assert cause(RAY_LOG) == (
        "RuntimeError: Request error for 5 times, returning None. Please check the API server."
    )


def test_dotted_and_parenthesised_exception_names_are_causes():
    assert cause("a\nray.exceptions.OutOfMemoryError: Task was killed\nb") == (
        "ray.exceptions.OutOfMemoryError: Task was killed"
    )
    assert cause("KeyboardInterrupt\n") == "KeyboardInterrupt"


def test_a_log_that_names_no_exception_gives_its_last_line():
    assert cause("starting\n  Killed  \n\n") == "Killed"
    assert cause("") == "(empty log)"


def test_frames_and_code_lines_are_never_the_cause():
    assert cause('  File "a.py", line 3, in f\n    raise_error()\n') == "raise_error()"


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)))
def test_the_cause_is_one_stripped_line_of_the_log(lines):
    log = "\n".join(lines)
    found = cause(log)
    assert "\n" not in found
    assert found == "(empty log)" or found in [line.strip() for line in log.splitlines()]
