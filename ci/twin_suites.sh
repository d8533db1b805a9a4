# shellcheck shell=bash
# The unit suites of the modules that have a pure-Python twin (the codec with its Avro column
# decoders, the producer's append path, the Schema Registry serdes): what differs between the
# Cython extension and the twins. Sourced by ci/test.sh and ci/pythons.sh;
# KAFKA_CORE_TWIN_SUITES="tests/unit" widens it to the whole unit suite.
# shellcheck disable=SC2206
TWIN_SUITES=(${KAFKA_CORE_TWIN_SUITES:-tests/unit/codec tests/unit/producer tests/unit/schema_registry})
