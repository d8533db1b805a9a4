"""AWS MSK IAM, both ways MSK takes it, checked byte for byte against AWS's own code with fixed
credentials and a fixed clock: our SigV4 presigning against botocore's signer, our OAUTHBEARER
token against aws-msk-iam-sasl-signer-python's, and the AWS_MSK_IAM exchange against an in-test
endpoint that verifies the signature with botocore. (No MSK, and no validator of these tokens,
runs here: what MSK itself accepts is not tested.)"""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any
from unittest import mock
from urllib.parse import parse_qsl, urlsplit

import botocore.auth
import pytest
from aws_msk_iam_sasl_signer import MSKAuthTokenProvider as signer
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from fakes.sasl_broker import SaslBroker
from fakes.timing import aio

from kafka_core.aio import KafkaClient
from kafka_core.auth import AwsCredentials, MskIamTokenProvider, aws_credentials_source
from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError
from kafka_core.network.sasl.aws_msk_iam import payload
from kafka_core.network.sasl.sigv4 import presign, query_string

pytestmark = pytest.mark.timeout(60)

NOW = datetime.datetime(2026, 11, 28, 11, 35, 7, tzinfo=datetime.UTC)
ACCESS = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SESSION = "FQoGZXIvYXdzEXAMPLE/+=token"
SIGNER_AGENT = "aws-msk-iam-sasl-signer-python/1.0.2"


def frozen_clock() -> Any:
    return mock.patch.object(botocore.auth, "get_current_datetime", return_value=NOW.replace(tzinfo=None))


def botocore_presigned(host: str, region: str, token: str | None) -> str:
    """botocore's SigV4QueryAuth on the request MSK's clients sign."""
    request = AWSRequest(method="GET", url=f"https://{host}/", params={"Action": "kafka-cluster:Connect"})
    with frozen_clock():
        botocore.auth.SigV4QueryAuth(
            Credentials(ACCESS, SECRET, token), "kafka-cluster", region, expires=900
        ).add_auth(request)
    return request.prepare().url


@pytest.mark.parametrize("token", [None, SESSION])
@pytest.mark.parametrize(
    ("host", "region"),
    [("kafka.us-east-1.amazonaws.com", "us-east-1"), ("b-1.c.x.kafka.eu-west-1.amazonaws.com", "eu-west-1")],
)
def test_our_sigv4_presigning_is_botocores_byte_for_byte(host: str, region: str, token: str | None) -> None:
    ours = presign(AwsCredentials(ACCESS, SECRET, token), host=host, region=region, now=NOW)
    assert f"https://{host}/?{query_string(ours)}" == botocore_presigned(host, region, token)


@pytest.mark.parametrize("token", [None, SESSION])
def test_our_msk_oauthbearer_token_is_the_aws_signers_byte_for_byte(token: str | None) -> None:
    with frozen_clock():
        theirs, their_expiry_ms = signer.__dict__["__construct_auth_token"](
            "eu-central-1", Credentials(ACCESS, SECRET, token)
        )
    provider = MskIamTokenProvider(
        "eu-central-1",
        credentials=lambda: AwsCredentials(ACCESS, SECRET, token),
        user_agent=SIGNER_AGENT,
        clock=lambda: NOW,
    )
    ours = provider()
    assert ours.value == theirs
    assert ours.issued_at == NOW.timestamp()
    assert ours.expires_at == (their_expiry_ms / 1000 if token is None else NOW.timestamp() + 600)
    assert SECRET not in repr(ours) and SECRET not in repr(provider)


def test_the_aws_msk_iam_payload_carries_botocores_signature_for_the_broker_host() -> None:
    host = "b-2.cluster.abc123.c4.kafka.eu-west-1.amazonaws.com"
    sent = json.loads(
        payload(AwsCredentials(ACCESS, SECRET, SESSION), host=host, region="eu-west-1", now=NOW)
    )
    expected = dict(parse_qsl(urlsplit(botocore_presigned(host, "eu-west-1", SESSION)).query))
    assert sent == {
        "version": "2020_10_22",
        "host": host,
        "user-agent": sent["user-agent"],
        "action": "kafka-cluster:Connect",
        "x-amz-algorithm": "AWS4-HMAC-SHA256",
        "x-amz-credential": expected["X-Amz-Credential"],
        "x-amz-date": "20261128T113507Z",
        "x-amz-security-token": SESSION,
        "x-amz-signedheaders": "host",
        "x-amz-expires": "900",
        "x-amz-signature": expected["X-Amz-Signature"],
    }
    assert sent["user-agent"].startswith("kafka-core/")


def verify_aws_msk_iam(mechanism: str, message: bytes) -> str | None:
    """What MSK checks, as far as it can be checked here: the signature, recomputed by botocore
    with the real secret for the access key the payload names, over the signed date."""
    sent = json.loads(message)
    if sent["x-amz-credential"].split("/", 1)[0] != ACCESS:
        return "unknown access key"
    signed_at = datetime.datetime.strptime(sent["x-amz-date"], "%Y%m%dT%H%M%SZ")
    request = AWSRequest(method="GET", url=f"https://{sent['host']}/", params={"Action": sent["action"]})
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=signed_at):
        botocore.auth.SigV4QueryAuth(
            Credentials(ACCESS, SECRET, sent.get("x-amz-security-token")),
            "kafka-cluster",
            "eu-west-1",
            expires=900,
        ).add_auth(request)
    expected = dict(parse_qsl(urlsplit(request.prepare().url).query))["X-Amz-Signature"]
    return None if expected == sent["x-amz-signature"] else "Access denied: signature mismatch"


@aio
async def test_the_aws_msk_iam_exchange_with_credentials_from_botocores_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    async with SaslBroker(verify_aws_msk_iam, mechanisms=("AWS_MSK_IAM",)) as broker:
        broker.reply = lambda mechanism, message: b'{"version":"2020_10_22","request-id":"r-1"}'
        async with KafkaClient(
            broker.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="AWS_MSK_IAM"
        ) as client:
            assert (await client.metadata([])).brokers
        assert [login.refused for login in broker.logins] == [None]
        assert json.loads(broker.logins[0].message)["host"] == "127.0.0.1"

        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-" + SECRET)
        client = KafkaClient(
            broker.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="AWS_MSK_IAM"
        )
        with pytest.raises(
            KafkaAuthenticationError, match=r"SASL AWS_MSK_IAM .* failed: .*signature mismatch"
        ) as info:
            await client.start()
        await client.close()
        assert SECRET not in str(info.value) and SESSION not in str(info.value)


@aio
async def test_msk_oauthbearer_tokens_log_in_where_they_verify() -> None:
    def verify(mechanism: str, message: bytes) -> str | None:
        token = message.split(b"auth=Bearer ", 1)[1].split(b"\x01", 1)[0].decode()
        url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        params = dict(parse_qsl(urlsplit(url).query))
        ok = (
            params["X-Amz-Signature"]
            == dict(parse_qsl(urlsplit(botocore_presigned(urlsplit(url).netloc, "eu-west-1", None)).query))[
                "X-Amz-Signature"
            ]
        )
        return None if ok else "signature mismatch"

    provider = MskIamTokenProvider(
        "eu-west-1", credentials=lambda: AwsCredentials(ACCESS, SECRET), clock=lambda: NOW
    )
    async with SaslBroker(verify, mechanisms=("OAUTHBEARER",)) as broker:
        async with KafkaClient(
            broker.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=provider,
        ) as client:
            assert (await client.metadata([])).brokers
        assert [login.refused for login in broker.logins] == [None]


def test_credentials_from_a_profile(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "credentials"
    path.write_text(f"[msk]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = {SECRET}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(path))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    credentials = aws_credentials_source(profile="msk")()
    assert (credentials.access_key, credentials.secret_key, credentials.token) == (
        "AKIDPROFILE",
        SECRET,
        None,
    )
    assert SECRET not in repr(credentials)


def test_aws_msk_iam_needs_a_region_and_knows_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(KafkaConfigError, match="region"):
        KafkaClient("127.0.0.1:1", security_protocol="SASL_SSL", sasl_mechanism="AWS_MSK_IAM")
    with pytest.raises(KafkaConfigError, match="rol_arn"):
        KafkaClient(
            "127.0.0.1:1",
            security_protocol="SASL_SSL",
            sasl_mechanism="AWS_MSK_IAM",
            sasl_options={"region": "eu-west-1", "rol_arn": "x"},
        )


def test_javas_msk_config_through_translate() -> None:
    from kafka_core.config import translate

    kwargs = translate(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "AWS_MSK_IAM",
            "sasl.jaas.config": 'software.amazon.msk.auth.iam.IAMLoginModule required awsProfileName="msk" '
            'awsRoleArn="arn:aws:iam::123456789012:role/r";',
            "sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
        },
        "client",
    )
    assert kwargs["sasl_mechanism"] == "AWS_MSK_IAM"
    assert kwargs["sasl_options"] == {"profile": "msk", "role_arn": "arn:aws:iam::123456789012:role/r"}
