"""``python -m gtpo.demo`` is ``gtpo demo``."""

import sys

from gtpo.cli import main

if __name__ == "__main__":
    main(["demo", *sys.argv[1:]])
