"""A lean SESv2 SendEmail: boto3's resolution and botocore's validator, serializer, signer, HTTP
session and parser, without the per-call machinery of a boto3 client around them.

Most of the worker's CPU for a boto3 send_email went to what a client does around the request (its
event hooks, endpoint rules evaluated per call, retry and checksum bookkeeping, user-agent assembly,
the response's many handlers; docs/performance.md, "The lean SES client"). Everything that decides where a
request goes, what it carries, who signs it and what a failure means stays botocore's own:

- region, endpoint URL (AWS_ENDPOINT_URL_SESV2 / AWS_ENDPOINT_URL / the regional or FIPS default),
  TLS verification (verify, AWS_CA_BUNDLE, REQUESTS_CA_BUNDLE), proxies, timeouts and pool size are
  resolved once, by a boto3 sesv2 client made with the same settings, and taken from it;
- the arguments are validated and serialized by botocore's rest-json serializer from the model, so a
  malformed request fails as ParamValidationError before it leaves, and blobs go out base64;
- credentials come from boto3's chain, frozen per request so refreshable ones refresh, and every
  request is signed by botocore's SigV4Auth;
- the request goes out on the urllib3 connection pool of that boto3 client's own URLLib3Session
  (retries off), and each transport failure is raised as the botocore exception URLLib3Session
  raises for it, so email_outbox.ses.classify reads both clients' failures alike (the tests in
  tests/worker/test_lean_client.py and test_ses_tls.py fault both clients the same ways);
- the answer is parsed by botocore's rest-json parser; a non-2xx becomes the ClientError boto3 raises.
"""

from __future__ import annotations

import socket
from typing import Any, cast

import boto3
import botocore
from botocore import exceptions as bx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, prepare_request_dict
from botocore.httpsession import URLLib3Session, mask_proxy_url
from botocore.parsers import create_parser
from botocore.serialize import create_serializer
from urllib3 import HTTPResponse
from urllib3 import exceptions as ux

OPERATION = "SendEmail"


class LeanSesClient:
    """send_email(**kwargs) as boto3's sesv2 client takes it, answering its dict or raising its errors."""

    def __init__(self, session: boto3.session.Session, client: Any) -> None:
        """`client`: a sesv2 client made from `session`; its resolved settings become this client's."""
        self.boto3_client = client
        # The sender reads the service model to see which content members the pinned botocore has.
        self.meta = client.meta
        self._session = session
        self._operation = client.meta.service_model.operation_model(OPERATION)
        self._endpoint_url = client.meta.endpoint_url
        self._signing_name = client.meta.service_model.signing_name
        self._region = client.meta.region_name
        self._user_agent = f"email-outbox-lean Botocore/{botocore.__version__}"
        self._serializer = create_serializer("rest-json", include_validation=True)
        self._parser = create_parser("rest-json")
        self._connect(client._endpoint.http_session)

    def _connect(self, http: Any) -> None:
        """The connection pool boto3's own HTTP session would use for SendEmail's URL, set up the way
        its send() sets it up: the proxy for that URL (HTTPS_PROXY, NO_PROXY, the client's proxies),
        the verify (AWS_CA_BUNDLE, the client's verify), timeouts, pool size and socket options.
        Resolved once, where URLLib3Session.send redoes it per request (about 60 us of ~450 per send);
        its private parts are pinned by tests/worker/test_lean_client.py, not by the stubs."""
        if not isinstance(http, URLLib3Session):
            raise TypeError(f"the sesv2 client's HTTP session is a {type(http).__name__}")
        # SendEmail's URL has no parameters in it: one URL for every request.
        stub: dict[str, Any] = {"url_path": self._operation.http["requestUri"], "query_string": {}}
        prepare_request_dict(stub, self._endpoint_url)
        self._url: str = stub["url"]
        private = cast(Any, http)
        self._proxy_url: str | None = private._proxy_config.proxy_url_for(self._url)
        self._manager = private._get_connection_manager(self._url, self._proxy_url)
        self._target: str = private._get_request_target(self._url, self._proxy_url)
        # Bound here, so a botocore that moved them fails the worker's start, not every send.
        self._setup_ssl_cert = private._setup_ssl_cert
        self._verify = private._verify

    def send_email(self, **request: Any) -> dict[str, Any]:
        request_dict = self._serializer.serialize_to_request(request, self._operation)
        request_dict["headers"]["User-Agent"] = self._user_agent
        aws_request = AWSRequest("POST", self._url, request_dict["headers"], request_dict["body"])
        # Looked up per request: a refreshable chain (instance role, SSO) hands out fresh keys here.
        credentials = self._session.get_credentials()
        if credentials is None:
            raise bx.NoCredentialsError()  # what boto3's signer raises when the chain found none
        SigV4Auth(credentials.get_frozen_credentials(), self._signing_name, self._region).add_auth(
            aws_request
        )
        response = self._send(request_dict["body"], dict(aws_request.headers.items()))
        parsed: dict[str, Any] = self._parser.parse(
            {"status_code": response.status, "headers": response.headers, "body": response.data},
            self._operation.output_shape,
        )
        if response.status >= 300:
            raise bx.ClientError(parsed, OPERATION)  # type: ignore[arg-type]
        return parsed

    def _send(self, body: bytes, headers: dict[str, str]) -> HTTPResponse:
        """One POST, the whole answer read; urllib3's failures raised as the botocore exceptions
        URLLib3Session.send raises for them, so classify sees what it would see from boto3."""
        url = self._url
        try:
            # Per request, as URLLib3Session does: the manager may have replaced the pool since.
            pool = self._manager.connection_from_url(url)
            self._setup_ssl_cert(pool, url, self._verify)
            response: HTTPResponse = pool.urlopen(
                "POST", self._target, body=body, headers=headers, retries=False, assert_same_host=False,
                preload_content=True, decode_content=False, enforce_content_length=False,
            )  # fmt: skip
            return response
        except ux.SSLError as e:
            raise bx.SSLError(endpoint_url=url, error=e) from e
        except (ux.NewConnectionError, socket.gaierror) as e:
            raise bx.EndpointConnectionError(endpoint_url=url, error=e) from e
        except ux.ProxyError as e:
            raise bx.ProxyConnectionError(proxy_url=mask_proxy_url(self._proxy_url or ""), error=e) from e
        except ux.ConnectTimeoutError as e:
            raise bx.ConnectTimeoutError(endpoint_url=url, error=e) from e
        except ux.ReadTimeoutError as e:
            raise bx.ReadTimeoutError(endpoint_url=url, error=e) from e
        except ux.ProtocolError as e:
            raise bx.ConnectionClosedError(error=e, endpoint_url=url) from e
        except Exception as e:
            raise bx.HTTPClientError(error=e) from e

    def get_account(self) -> dict[str, Any]:
        """GetAccount is rare (once a minute at most, by one replica): boto3 answers it."""
        answer: dict[str, Any] = self.boto3_client.get_account()
        return answer
