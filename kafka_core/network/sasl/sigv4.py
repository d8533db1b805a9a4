"""AWS Signature Version 4 query signing (presigned GET), the one piece of AWS that MSK IAM needs.

Both of MSK's IAM logins sign a ``GET /?Action=kafka-cluster:Connect`` for the service
``kafka-cluster``: AWS_MSK_IAM sends the signed parameters as JSON, OAUTHBEARER sends the whole
presigned URL as the token. Pure ``hmac``/``hashlib`` with the clock passed in, so that the tests
can hold it still and compare with botocore's signer byte for byte.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
from dataclasses import dataclass, field
from urllib.parse import quote

__all__ = ["AwsCredentials", "presign"]

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "kafka-cluster"
ACTION = "kafka-cluster:Connect"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True, slots=True)
class AwsCredentials:
    """An access key pair and, for temporary credentials, the session token (out of ``repr``)."""

    access_key: str
    secret_key: str = field(repr=False)
    token: str | None = field(default=None, repr=False)


def _encode(text: str) -> str:
    return quote(text, safe="-_.~")


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def presign(
    credentials: AwsCredentials,
    *,
    host: str,
    region: str,
    now: datetime.datetime,
    expires_s: int = 900,
    params: dict[str, str] | None = None,
) -> list[tuple[str, str]]:
    """The query parameters of a presigned ``GET https://host/?Action=kafka-cluster:Connect``, in
    botocore's order (the operation's, then the auth parameters, then ``X-Amz-Signature``)."""
    stamp = now.astimezone(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    scope = f"{stamp[:8]}/{region}/{SERVICE}/aws4_request"
    operation = [("Action", ACTION), *(params or {}).items()]
    auth = [
        ("X-Amz-Algorithm", ALGORITHM),
        ("X-Amz-Credential", f"{credentials.access_key}/{scope}"),
        ("X-Amz-Date", stamp),
        ("X-Amz-Expires", str(expires_s)),
        ("X-Amz-SignedHeaders", "host"),
    ]
    if credentials.token is not None:
        auth.append(("X-Amz-Security-Token", credentials.token))
    query = operation + auth
    canonical_query = "&".join(f"{_encode(k)}={_encode(v)}" for k, v in sorted(query))
    canonical_request = "\n".join(["GET", "/", canonical_query, f"host:{host}", "", "host", EMPTY_SHA256])
    string_to_sign = "\n".join(
        [ALGORITHM, stamp, scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
    )
    key = _hmac(("AWS4" + credentials.secret_key).encode(), stamp[:8])
    for part in (region, SERVICE, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    return [*query, ("X-Amz-Signature", signature)]


def query_string(params: list[tuple[str, str]]) -> str:
    return "&".join(f"{_encode(k)}={_encode(v)}" for k, v in params)
