"""``python3 -m bench.accuracy``: see bench/accuracy/run.py."""

import sys

from bench.accuracy.run import main

sys.exit(main())
