"""Every documented command runs as written, after the substitution table (slow stage).

One test per page: its blocks in page order, in one shell session (tests/documented/runner.py).
A page whose command no longer runs fails here, naming the command, its substitutions and the
end of its output. deployment.md's Docker commands run in the Docker suites
(tests/docker/test_docker_stack.py; in CI, the slow stage's Docker part).
"""

from __future__ import annotations

import pytest
from documented import pages
from documented.runner import page_session

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

DOCKER_PAGES = {"docs/deployment.md"}
PAGES = [str(p.relative_to(pages.ROOT)) for p in pages.pages()]


# What a command's output must show beyond its exit status, and must not show: (which
# commands, what they print, what they never print).
SHOWS = [
    # It trained a step (a resume: the step after its checkpoint, below).
    (lambda argv: "gtpo-openrlhf" in argv and not {"--ckpt.load_enable", "--dry-run"} & set(argv),
     ["Global step 1"], []),
    # A run other runs cover (substitutions.COVERED): its plan, every check passed.
    (lambda argv: "gtpo-openrlhf" in argv and "--dry-run" in argv,
     ["every check passed", "nothing started"], []),
    # A resume continues after its checkpoint, with H_ini from it, never measured again.
    (lambda argv: "--ckpt.load_enable" in argv,
     ["H_ini = ", "nats restored from the checkpoint", "Global step 2"],
     ["Global step 1", "nats measured on"]),
    (lambda argv: argv[:2] == ["gtpo", "eval"], ["pass@1"], []),
]  # fmt: skip


@pytest.mark.parametrize("page", [p for p in PAGES if p not in DOCKER_PAGES])
def test_the_page_runs_as_written(page, docs_run, capsys):
    blocks = pages.blocks(pages.ROOT / page)
    ran = []
    with capsys.disabled(), page_session(docs_run, page) as session:
        print(f"\n== {page}")
        for block in blocks:
            ran += session.run_block(block)
    for run in ran:
        for applies, shown, never in SHOWS:
            if applies(run.sub.argv):
                output = run.output
                missing = [text for text in shown if text not in output]
                assert not missing, f"{run.sub.command.where} printed none of {missing}"
                wrong = [text for text in never if text in output]
                assert not wrong, f"{run.sub.command.where} printed {wrong}"
