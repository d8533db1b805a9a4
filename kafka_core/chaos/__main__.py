"""``python -m kafka_core.chaos run ...``: the same as the ``kafka-core-chaos`` command."""

import sys

from kafka_core.chaos.cli import main

sys.exit(main())
