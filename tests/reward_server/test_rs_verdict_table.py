"""Every verdict shows in review: this server's verdict on every corpus row and on a fixed
generated set is checked in (``verdicts.tsv``, ``verdict_table.py``); a change that moves one
fails here until the table is written again in the same commit."""

from __future__ import annotations

import verdict_table as table  # tests/reward_server/, on sys.path (conftest.py)

WRITE = "python benchmarks/verdict_table.py --write"


def test_the_table_holds_every_row_and_every_verdict() -> None:
    cases = table.all_cases()
    rows = table.read()
    written = [(row["corpus"], int(row["row"]), row["digest"]) for row in rows]
    assert written == table.identities(cases), f"the corpora changed: run {WRITE}"
    assert [row["expected"] for row in rows] == [str(case.expected) for case in cases]
    server = table.server_verdicts(cases)
    moved = [
        f"{row['corpus']} #{row['row']} {row['answer']} | {row['reference']}: "
        f"{row['server']} -> {now}"
        for row, now in zip(rows, server, strict=True)
        if row["server"] != now
    ]
    assert not moved, f"{len(moved)} verdicts moved (run {WRITE}):\n" + "\n".join(moved[:40])
