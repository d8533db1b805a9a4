"""``python -m kafka_core.cli``: the same as the ``kafka-core`` console script."""

import sys

from kafka_core.cli import main

sys.exit(main())
