"""Spark's source and sink take OAUTHBEARER as Spark's Kafka connector does: Java's names with the
``kafka.`` prefix. The options reach the clients (and the workers, pickled) with the secret masked."""

from __future__ import annotations

import pickle

from kafka_core.spark.options import parse_sink, parse_source

SECRET = "spark-oauth-s3cret"
OAUTH = {
    "kafka.bootstrap.servers": "h:1",
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "OAUTHBEARER",
    "kafka.sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/token",
    "kafka.sasl.oauthbearer.client.credentials.client.id": "spark-job",
    "kafka.sasl.oauthbearer.client.credentials.client.secret": SECRET,
    "kafka.sasl.oauthbearer.scope": "kafka",
}
EXPECTED = {
    "sasl_mechanism": "OAUTHBEARER",
    "sasl_oauth_token_endpoint_url": "https://idp.example.com/token",
    "sasl_oauth_client_id": "spark-job",
    "sasl_oauth_client_secret": SECRET,
    "sasl_oauth_scope": "kafka",
}


def test_the_source_and_the_sink_map_javas_oauth_names() -> None:
    source = parse_source({**OAUTH, "subscribe": "t"}, streaming=False)
    sink = parse_sink({**OAUTH, "topic": "t"})
    for client in (source.client, sink.producer):
        assert {k: client[k] for k in EXPECTED} == EXPECTED
        assert SECRET not in repr(client)
        again = pickle.loads(pickle.dumps(client))  # as the options travel to Spark's workers
        assert again["sasl_oauth_client_secret"] == SECRET and SECRET not in repr(again)


def test_the_jaas_form_too() -> None:
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'clientId="spark-job" clientSecret="{SECRET}" scope="kafka";'
    )
    options = {k: v for k, v in OAUTH.items() if "client.credentials" not in k and "scope" not in k}
    source = parse_source({**options, "kafka.sasl.jaas.config": jaas, "subscribe": "t"}, streaming=True)
    assert {k: source.client[k] for k in EXPECTED} == EXPECTED
