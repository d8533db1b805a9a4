"""``python -m kafka_core.devbroker``: the documented command, run by
:mod:`kafka_core.devtools.brokers.__main__`."""

import sys

from kafka_core.devtools.brokers.__main__ import main

sys.exit(main())
