"""The verdict table of the reward server (``tests/reward_server/verdicts.tsv``): every corpus
row and a fixed generated set, with this server's verdict and math-verify's.

    python benchmarks/verdict_table.py           # what moved against the checked-in table
    python benchmarks/verdict_table.py --write   # write the table (commit it with the change)

The default stage (``test_rs_verdict_table.py``) fails on any of this server's verdicts that
differs from the table, so a change that moves verdicts updates it in the same commit and its
diff says what moved. Nothing goes over the network.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reward_server"))
import verdict_table as table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write the table")
    args = parser.parse_args()
    cases = table.all_cases()
    server = table.server_verdicts(cases)
    if args.write:
        math_verify = table.math_verify_verdicts(cases)
        table.TABLE.write_text(table.render(cases, server, math_verify), encoding="utf-8")
        print(f"wrote {len(cases)} rows to {table.TABLE}")
        print(Counter(case.corpus for case in cases))
        return
    rows = table.read()
    moved = [
        f"{row['corpus']} #{row['row']} {row['answer']} | {row['reference']}: "
        f"{row['server']} -> {now}"
        for row, now in zip(rows, server, strict=False)
        if row["server"] != now
    ]
    print(f"{len(cases)} rows, {len(moved)} verdicts moved")
    print("\n".join(moved))


if __name__ == "__main__":
    main()
