"""``python -m spark_ops.cli``: the same as ``mta-spark``."""

import sys

from .app import main

sys.exit(main())
