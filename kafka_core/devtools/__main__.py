"""``python -m kafka_core.devtools broker|bench ...``: what ``kafka-core broker|bench`` runs."""

import sys

from kafka_core.devtools.commands import main

sys.exit(main())
