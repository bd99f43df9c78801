"""``python -m spark_ops.cli``: the same as ``mta-spark``."""

import sys

from .entry import main

sys.exit(main())
