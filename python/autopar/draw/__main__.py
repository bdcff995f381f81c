"""python3 -m autopar.draw REPORT.json -o plan.html (see autopar.draw)."""

import sys

from .cli import main

sys.exit(main(prog="python3 -m autopar.draw"))
