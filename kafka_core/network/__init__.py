"""Broker connections: framing, pipelining, TLS, SASL, backoff."""

from kafka_core.network.backoff import Backoff
from kafka_core.network.connection import KAFKA4_MIN_VERSIONS, BrokerConnection
from kafka_core.network.tls import build_ssl_context

__all__ = ["KAFKA4_MIN_VERSIONS", "Backoff", "BrokerConnection", "build_ssl_context"]
