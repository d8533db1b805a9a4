"""SASL/AWS_MSK_IAM, Amazon MSK's own IAM mechanism (as ``software.amazon.msk:aws-msk-iam-auth``):
one client message, a JSON object of SigV4 presigned parameters for ``kafka-cluster:Connect`` on
the broker's host, and one server message, ``{"version": ..., "request-id": ...}``.

Settings (``sasl_options``): ``region`` (required), ``credentials`` (a callable returning
:class:`~kafka_core.network.sasl.sigv4.AwsCredentials`; the client builds one from botocore's
provider chain, see :mod:`kafka_core.auth.aws`). Getting credentials may mean an HTTP call (the
instance metadata service, STS), so it runs on a worker thread.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Callable
from typing import Any

from kafka_core._version import __version__
from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError, KafkaError
from kafka_core.network.sasl.mechanism import MechanismContext, SaslMechanism, register_mechanism
from kafka_core.network.sasl.settings import SaslSettings
from kafka_core.network.sasl.sigv4 import ACTION, AwsCredentials, presign

__all__ = ["PAYLOAD_VERSION", "AwsMskIamMechanism", "payload"]

PAYLOAD_VERSION = "2020_10_22"
USER_AGENT = f"kafka-core/{__version__}"


def payload(
    credentials: AwsCredentials,
    *,
    host: str,
    region: str,
    now: datetime.datetime,
    user_agent: str = USER_AGENT,
) -> bytes:
    """The client message: the presigned parameters, lower-cased, beside version, host and agent."""
    signed = dict(presign(credentials, host=host, region=region, now=now))
    fields: dict[str, str] = {
        "version": PAYLOAD_VERSION,
        "host": host,
        "user-agent": user_agent,
        "action": ACTION,
        "x-amz-algorithm": signed["X-Amz-Algorithm"],
        "x-amz-credential": signed["X-Amz-Credential"],
        "x-amz-date": signed["X-Amz-Date"],
    }
    if credentials.token is not None:
        fields["x-amz-security-token"] = credentials.token
    fields["x-amz-signedheaders"] = signed["X-Amz-SignedHeaders"]
    fields["x-amz-expires"] = signed["X-Amz-Expires"]
    fields["x-amz-signature"] = signed["X-Amz-Signature"]
    return json.dumps(fields, separators=(",", ":")).encode()


class AwsMskIamMechanism(SaslMechanism):
    name = "AWS_MSK_IAM"

    def __init__(
        self,
        host: str,
        region: str,
        credentials: Callable[[], AwsCredentials],
        clock: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        self._host = host
        self._region = region
        self._credentials = credentials
        self._clock = clock or (lambda: datetime.datetime.now(datetime.UTC))
        self._state = 0
        self.request_id: str | None = None  # the broker's id of this login, for AWS support cases

    def __repr__(self) -> str:
        return f"<AwsMskIamMechanism {self._host} {self._region} state={self._state}>"

    async def evaluate(self, challenge: bytes | None) -> bytes | None:
        if self._state == 0:
            try:
                credentials = await asyncio.to_thread(self._credentials)
            except KafkaError:
                raise
            except Exception as exc:
                raise KafkaAuthenticationError(
                    f"AWS_MSK_IAM: no AWS credentials ({type(exc).__name__}: {exc})"
                ) from exc
            self._state = 1
            return payload(credentials, host=self._host, region=self._region, now=self._clock())
        if self._state == 1:
            self._state = 2
            self.request_id = _server_reply(challenge or b"")
            return None
        return None

    def step(self, challenge: bytes | None) -> bytes | None:
        raise TypeError("AWS_MSK_IAM may wait for credentials: use `await evaluate()`")

    @property
    def complete(self) -> bool:
        return self._state == 2


def _server_reply(data: bytes) -> str:
    try:
        reply: Any = json.loads(data)
    except ValueError:
        reply = None
    if not isinstance(reply, dict) or reply.get("version") != PAYLOAD_VERSION or "request-id" not in reply:
        raise KafkaAuthenticationError(f"AWS_MSK_IAM: unexpected server reply {data[:200]!r}")
    return str(reply["request-id"])


def _validate(settings: SaslSettings) -> None:
    if not settings.option("region"):
        raise KafkaConfigError("SASL AWS_MSK_IAM needs the cluster's region: sasl_options={'region': ...}")
    if not callable(settings.option("credentials")):
        raise KafkaConfigError("SASL AWS_MSK_IAM needs a credentials source (kafka_core.auth.aws)")


def _create(settings: SaslSettings, context: MechanismContext) -> SaslMechanism:
    return AwsMskIamMechanism(context.host, settings.option("region"), settings.option("credentials"))


register_mechanism("AWS_MSK_IAM", _create, _validate)
