"""``python -m kafka_core.devtools.pipeline [--events N] ...``: the main job (:mod:`.job`)."""

import sys

from kafka_core.devtools.pipeline.job import main

sys.exit(main())
