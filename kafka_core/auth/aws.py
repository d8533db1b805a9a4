"""AWS MSK IAM: credentials from botocore's provider chain (extra ``aws``), and the OAUTHBEARER
token MSK takes, a SigV4-presigned ``kafka-cluster:Connect`` URL (what
``aws-msk-iam-sasl-signer-python`` makes), for either of MSK's two IAM logins.

Nothing here was checked against MSK itself (nothing here can validate its tokens): the signatures
are checked byte for byte against botocore's own signer and the AWS signer package, with fixed
credentials and clock (tests/unit/auth/test_aws_msk_iam.py).
"""

from __future__ import annotations

import base64
import datetime
import threading
from collections.abc import Callable
from typing import Any

from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError
from kafka_core.network.sasl import OAuthBearerToken
from kafka_core.network.sasl.aws_msk_iam import USER_AGENT
from kafka_core.network.sasl.sigv4 import AwsCredentials, presign, query_string

__all__ = ["MskIamTokenProvider", "aws_credentials_source"]

TOKEN_EXPIRES_S = 900
# Temporary credentials may end sooner than the token's 15 minutes: botocore hands them out with
# at least 10 minutes left, so a token made from them is refreshed as if it lived that long.
TEMPORARY_TOKEN_LIFETIME_S = 600
DEFAULT_ROLE_SESSION = "kafka-core"


def _botocore() -> Any:
    try:
        import botocore.session
    except ImportError:
        raise KafkaConfigError("AWS MSK IAM needs botocore: pip install 'kafka-core[aws]'") from None
    return botocore.session


def aws_credentials_source(
    *,
    profile: str | None = None,
    role_arn: str | None = None,
    role_session_name: str = DEFAULT_ROLE_SESSION,
    sts_region: str | None = None,
) -> Callable[[], AwsCredentials]:
    """A callable giving current credentials: botocore's default chain (environment, shared files,
    SSO, web identity, container and instance metadata), a named ``profile``, or a role assumed
    from those with STS (refreshed by botocore before it expires). Blocking: call it off the loop."""
    session_module = _botocore()
    lock = threading.Lock()  # guards `state`: the botocore session and the assumed role's credentials
    state: dict[str, Any] = {}

    def base_session() -> Any:
        if "session" not in state:
            state["session"] = session_module.Session(profile=profile)
        return state["session"]

    def load() -> AwsCredentials:
        with lock:
            session = base_session()
            if role_arn is not None:
                credentials = _assumed_role(session, state, role_arn, role_session_name, sts_region)
            else:
                credentials = session.get_credentials()
            if credentials is None:
                raise KafkaAuthenticationError(
                    "AWS MSK IAM: botocore found no AWS credentials (environment, ~/.aws, SSO, "
                    "web identity, container or instance metadata)"
                )
            frozen = credentials.get_frozen_credentials()
            return AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token)

    return load


def _assumed_role(session: Any, state: dict[str, Any], role_arn: str, name: str, region: str | None) -> Any:
    """botocore's own refreshing credentials for ``role_arn`` (AssumeRoleProvider's fetcher)."""
    if "role" not in state:
        from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials

        fetcher = AssumeRoleCredentialFetcher(
            client_creator=lambda *a, **kw: session.create_client(*a, **{"region_name": region, **kw}),
            source_credentials=session.get_credentials(),
            role_arn=role_arn,
            extra_args={"RoleSessionName": name},
        )
        state["role"] = DeferredRefreshableCredentials(
            method="assume-role", refresh_using=fetcher.fetch_credentials
        )
    return state["role"]


class MskIamTokenProvider:
    """``provider()`` -> an OAUTHBEARER token for Amazon MSK: the base64url (unpadded) presigned
    ``https://kafka.<region>.amazonaws.com/?Action=kafka-cluster:Connect...`` URL, valid 15 min.

    Use as ``sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=MskIamTokenProvider("eu-west-1")``.
    Credentials as :func:`aws_credentials_source` (``profile``, ``role_arn``...), or a callable of
    your own returning ``AwsCredentials`` (``credentials=``)."""

    def __init__(
        self,
        region: str,
        *,
        profile: str | None = None,
        role_arn: str | None = None,
        role_session_name: str = DEFAULT_ROLE_SESSION,
        sts_region: str | None = None,
        credentials: Callable[[], AwsCredentials] | None = None,
        user_agent: str = USER_AGENT,
        clock: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        if not region:
            raise KafkaConfigError("MskIamTokenProvider needs the cluster's region")
        self.region = region
        self.user_agent = user_agent
        self._credentials = credentials or aws_credentials_source(
            profile=profile, role_arn=role_arn, role_session_name=role_session_name, sts_region=sts_region
        )
        self._clock = clock or (lambda: datetime.datetime.now(datetime.UTC))
        # Clients with the same settings share one token (kafka_core.auth.shared_token_cache).
        self.cache_key = (
            None if credentials is not None else ("msk-iam", region, profile, role_arn, sts_region)
        )

    def __repr__(self) -> str:
        return f"<MskIamTokenProvider {self.region}>"

    def __call__(self) -> OAuthBearerToken:
        credentials = self._credentials()
        now = self._clock()
        host = f"kafka.{self.region}.amazonaws.com"
        params = presign(credentials, host=host, region=self.region, now=now, expires_s=TOKEN_EXPIRES_S)
        url = f"https://{host}/?{query_string([*params, ('User-Agent', self.user_agent)])}"
        token = base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
        signed_at = now.replace(microsecond=0).timestamp()
        lifetime = TOKEN_EXPIRES_S if credentials.token is None else TEMPORARY_TOKEN_LIFETIME_S
        return OAuthBearerToken(
            token, signed_at + lifetime, principal=credentials.access_key, issued_at=signed_at
        )
