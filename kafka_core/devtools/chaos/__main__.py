"""``python -m kafka_core.devtools.chaos run ...``: the chaos harness's command (:mod:`.cli`)."""

import sys

from kafka_core.devtools.chaos.cli import main

sys.exit(main())
