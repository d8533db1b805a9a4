"""Java-style configs carry credentials: no error about them may echo them (a review finding:
an unparseable sasl.jaas.config came back whole, password included, in the KafkaConfigError)."""

from __future__ import annotations

import pytest

from kafka_core.config import translate
from kafka_core.errors import KafkaConfigError

PASSWORD = "hunter2-jaas-Pw"


@pytest.mark.parametrize(
    "jaas",
    [
        f'PlainLoginModule required username="alice" pasword="{PASSWORD}";',  # a typo: no password=
        f'username="alice" password="{PASSWORD}"',  # no login module
        f'com.example.OtherLoginModule required username="alice" password="{PASSWORD}";',
    ],
)
def test_an_unparseable_jaas_config_is_refused_without_echoing_it(jaas: str) -> None:
    with pytest.raises(KafkaConfigError, match=r"sasl\.jaas\.config") as info:
        translate({"sasl.jaas.config": jaas}, "client")
    assert PASSWORD not in str(info.value) and "not shown" in str(info.value)


def test_secrets_from_a_config_stay_out_of_repr() -> None:
    kwargs = translate(
        {
            "sasl.password": PASSWORD,
            "sasl.oauthbearer.client.secret": PASSWORD + "2",
        },
        "client",
    )
    assert PASSWORD not in repr(kwargs)
    assert kwargs["sasl_password"] == PASSWORD and kwargs["sasl_oauth_client_secret"] == PASSWORD + "2"


def test_a_client_with_oauth_settings_keeps_no_readable_secret() -> None:
    from kafka_core.aio import KafkaClient

    client = KafkaClient(
        "127.0.0.1:1",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_endpoint_url="https://idp.invalid/token",
        sasl_oauth_client_id="svc",
        sasl_oauth_client_secret=PASSWORD,
    )
    settings = vars(client)["_sasl"]
    shown = repr(vars(client)) + repr(settings) + repr(settings.token_provider)
    shown += repr(vars(settings.token_provider)) + repr(vars(settings.token_provider.provider))
    assert PASSWORD not in shown
