"""DingTalk's OpenAPI apart from sending: the access token, readbacks, the staff directory.

One ``httpx.AsyncClient`` and one cached token serve all of it; ``DingTalkTransport``
(``agent.dingtalk.transport``) builds delivery on top.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

import httpx

from agent.clock import Clock
from agent.contracts import Channel, Origin
from agent.dingtalk.http_pool import EXEMPT, OutboundTransport, Place

# The old OpenAPI answers with HTTP 200 and an errcode. These say "no such user / not in
# your scope" (worth remembering); these say the token is bad (fetch a new one). Anything
# else — throttling, a busy system — is transient.
DIRECTORY_SAYS_NO = frozenset({60121, 60011, 50002, 60003})
TOKEN_ERRCODES = frozenset({40014, 42001, 40001})

TOKEN_MARGIN_S = 300.0  # refresh tokens five minutes early, as the SDK does


@dataclass(frozen=True)
class TransportConfig:
    openapi_base_url: str
    client_id: str | None
    client_secret: str | None
    robot_code: str | None
    connect_timeout_s: float
    read_timeout_s: float
    send_retries: int
    max_retry_after_s: float
    webhook_expiry_margin_s: float
    # Session webhooks are contacted only on these origins (scheme://host[:port]); the
    # setting's default is DingTalk's own, so a config that forgets them is only too strict.
    webhook_origins: tuple[str, ...]
    max_connections: int
    proxy: str | None
    directory_base_url: str | None  # the oapi host for user details
    directory_timeout_s: float
    oapi_base_url: str  # the old-style host (oapi.dingtalk.com): media upload, user details
    token_wait_s: float = 0.0  # a send's wait for a token DingTalk will not give yet

    @property
    def has_openapi_credentials(self) -> bool:
        return bool(self.client_id and self.client_secret and self.robot_code)


class TokenError(Exception):
    """No usable access token (the credentials or the token endpoint)."""


class DirectoryError(Exception):
    """A user-detail lookup that did not give an answer (the caller falls back).

    ``definite`` when the directory answered and said no (unknown user, no permission):
    asking again soon will not help. Timeouts and 5xx are not definite.
    """

    def __init__(self, message: str, definite: bool = False) -> None:
        super().__init__(message)
        self.definite = definite


class DownloadError(Exception):
    """A file of a message that could not be had; the message is the reason, in words.

    ``refused`` when DingTalk answered and said no (an expired or invalid download code, no
    permission): the person can send the file again. Otherwise the fault was on the way
    (a timeout, a connection, a file over the size cap).
    """

    def __init__(self, message: str, refused: bool = False, problem: str = "failed") -> None:
        super().__init__(message)
        self.problem = "refused" if refused else problem


def json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        value = response.json()
    except (json.JSONDecodeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


_HEADERS = {"Accept": "application/json", "User-Agent": "dta"}


class DingTalkAPI:
    """The HTTP client, the token, and the OpenAPI calls that are not deliveries."""

    def __init__(
        self, config: TransportConfig, clock: Clock, client: httpx.AsyncClient | None = None
    ) -> None:
        self.config = config
        self.clock = clock
        # Waiting for a place is bounded for lookups and downloads (they have a fallback);
        # a send holds its place before it starts (``reserve_place``) and never meets it.
        self._timeout = httpx.Timeout(
            config.read_timeout_s, connect=config.connect_timeout_s, pool=config.connect_timeout_s
        )
        # JSON calls go straight to our own transport (``post_json``); a client handed in
        # (tests, a caller's own transport) is used as it is.
        self._direct: OutboundTransport | None = None
        if client is None:
            self._direct = OutboundTransport(config.max_connections, config.proxy)
            client = httpx.AsyncClient(
                timeout=self._timeout, transport=self._direct, trust_env=False
            )
        self._client = client
        self._token: str | None = None
        self._token_expires_at = 0.0
        # The one token request in flight, shared by every caller that needs a token now.
        self._token_fetch: asyncio.Task[str] | None = None
        # The directory's URL with the current token as its query (see ``_with_token``).
        self._token_url: tuple[str, str, httpx.URL] | None = None

    def _with_token(self, url: str, token: str) -> httpx.URL:
        """``url?access_token=token``, built once per token: httpx's URL building costs
        more than the rest of the request object, on every first message of a sender."""
        if self._token_url is None or self._token_url[:2] != (url, token):
            self._token_url = (url, token, httpx.URL(url, params={"access_token": token}))
        return self._token_url[2]

    async def post(
        self,
        url: str | httpx.URL,
        body: object,
        headers: dict[str, str] | None = None,
        *,
        params: dict[str, str] | None = None,
        timeout_s: float | None = None,
        place: Place | None = None,
    ) -> httpx.Response:
        """POST ``body`` as JSON; the whole answer is read. httpx's errors as they come.
        ``place``: sent on a reserved place (``reserve_place``), or ``EXEMPT`` from the
        places."""
        timeout = self._timeout if timeout_s is None else httpx.Timeout(timeout_s)
        if self._direct is None:
            return await self._client.post(
                url, json=body, headers=headers, params=params, timeout=timeout
            )
        sent = {**_HEADERS, **headers} if headers else _HEADERS
        return await self._direct.post_json(url, body, sent, timeout, params, place)

    async def reserve_place(self) -> Place:
        """A place in the connection pool for one send, waited for as long as it takes
        (``agent.dingtalk.http_pool``); with a client handed in, there is none to hold."""
        if self._direct is None:
            return Place(None)
        return await self._direct.reserve()

    @property
    def http(self) -> httpx.AsyncClient:
        """The one client, for OpenAPI families kept in their own modules (agent/cards/api.py)."""
        return self._client

    async def aclose(self) -> None:
        fetch, self._token_fetch = self._token_fetch, None
        if fetch is not None and not fetch.done():
            fetch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await fetch
        await self._client.aclose()

    # ------------------------------------------------------------------ token

    async def access_token(self) -> str:
        """The cached token, or a fresh one from a single request shared by all who ask.

        When the token expires under load, every concurrent send asks at once; one fetch
        serves them all (DingTalk throttles the token endpoint too). A failed fetch fails
        every caller waiting on it, and the next call starts a new one. A caller that is
        cancelled leaves the fetch running for the others (``shield``).
        """
        if self._token and self.clock.now() < self._token_expires_at:
            return self._token
        fetch = self._token_fetch
        if fetch is None or fetch.done():
            fetch = self._token_fetch = asyncio.create_task(self._fetch_token())
        return await asyncio.shield(fetch)

    async def _fetch_token(self) -> str:
        now = self.clock.now()
        cfg = self.config
        response = await self.post(
            f"{cfg.openapi_base_url}/v1.0/oauth2/accessToken",
            {"appKey": cfg.client_id, "appSecret": cfg.client_secret},
            place=EXEMPT,  # every send waits on it: it never queues behind them
        )
        data = json_object(response)
        token = data.get("accessToken")
        if response.status_code != 200 or not isinstance(token, str):
            # The body may echo what we sent; report only the status and DingTalk's code.
            raise TokenError(f"token request answered {response.status_code} {data.get('code')}")
        try:
            lifetime = float(data.get("expireIn", 7200))
        except (TypeError, ValueError):
            lifetime = 7200.0  # an odd answer about the lifetime is no reason to fail
        self._token = token
        self._token_expires_at = now + lifetime - TOKEN_MARGIN_S
        return token

    def forget_token(self) -> None:
        self._token = None

    async def readback(self, target: Origin, channel: Channel, key: str) -> str | None:
        """Ask DingTalk whether it has the message sent under ``key`` (a processQueryKey).

        Returns its send status (e.g. "SUCCESS") when the platform knows the message, None
        when it does not or cannot say. Only OpenAPI sends have a key; webhooks have none.
        """
        base, robot = self.config.openapi_base_url, self.config.robot_code
        try:
            headers = {"x-acs-dingtalk-access-token": await self.access_token()}
            if channel is Channel.OPENAPI_OTO:
                response = await self._client.get(
                    f"{base}/v1.0/robot/oToMessages/readStatus",
                    params={"robotCode": robot, "processQueryKey": key},
                    headers=headers,
                )
            elif channel is Channel.OPENAPI_GROUP:
                response = await self.post(
                    f"{base}/v1.0/robot/groupMessages/query",
                    {
                        "robotCode": robot,
                        "openConversationId": target.conversation_id,
                        "processQueryKey": key,
                    },
                    headers=headers,
                )
            else:
                return None
        except (httpx.HTTPError, TokenError):
            return None
        status = json_object(response).get("sendStatus")
        return status if response.status_code == 200 and isinstance(status, str) else None

    async def download_url(self, download_code: str) -> str:
        """DingTalk's short-lived URL for a received file: ``messageFiles/download`` with the
        message's downloadCode and our robotCode (never the code itself used as a URL)."""
        cfg = self.config
        if not cfg.has_openapi_credentials:
            raise DownloadError("no OpenAPI credentials to download with")
        try:
            token = await self.access_token()
            response = await self.post(
                f"{cfg.openapi_base_url}/v1.0/robot/messageFiles/download",
                {"downloadCode": download_code, "robotCode": cfg.robot_code},
                {"x-acs-dingtalk-access-token": token},
            )
        except TokenError as exc:
            raise DownloadError(f"no access token ({exc})") from None
        except httpx.HTTPError as exc:
            raise DownloadError(f"the download API did not answer ({type(exc).__name__})") from None
        data = json_object(response)
        url = data.get("downloadUrl")
        if response.status_code == 200 and isinstance(url, str) and url.startswith("http"):
            return url
        code = str(data.get("code") or data.get("errcode") or "")[:80]
        raise DownloadError(
            f"DingTalk refused the download code (HTTP {response.status_code} {code})".strip(),
            refused=400 <= response.status_code < 500,
        )

    async def download_bytes(
        self, url: str, max_bytes: int, timeout_s: float
    ) -> tuple[bytes, str | None]:
        """The bytes behind a download URL, at most ``max_bytes`` (DownloadError beyond).

        Streamed, so a file over the cap costs at most the cap: a declared length over it is
        refused before reading, an undeclared one is cut off as it passes the cap.
        """
        try:
            async with self._client.stream("GET", url, timeout=timeout_s) as response:
                if response.status_code != 200:
                    raise DownloadError(
                        f"the download URL answered HTTP {response.status_code}",
                        refused=response.status_code in (403, 404, 410),
                    )
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise DownloadError(
                        f"the file is {int(declared)} bytes, over {max_bytes}", problem="too_large"
                    )
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise DownloadError(
                            f"the file is over {max_bytes} bytes", problem="too_large"
                        )
                    chunks.append(chunk)
                return b"".join(chunks), response.headers.get("content-type")
        except httpx.TimeoutException:
            raise DownloadError(
                f"the download took longer than {timeout_s:g}s", problem="timeout"
            ) from None
        except httpx.HTTPError as exc:
            raise DownloadError(f"the download failed ({type(exc).__name__})") from None

    async def user_detail(self, user_id: str) -> dict[str, Any]:
        """The staff directory's entry for ``user_id`` (raises DirectoryError when not had)."""
        if not (self.config.has_openapi_credentials and self.config.directory_base_url):
            raise DirectoryError("no OpenAPI credentials")
        try:
            token = await self.access_token()
            response = await self.post(
                self._with_token(f"{self.config.directory_base_url}/topapi/v2/user/get", token),
                {"userid": user_id, "language": "zh_CN"},
                timeout_s=self.config.directory_timeout_s,
            )
        except (httpx.HTTPError, TokenError) as exc:
            raise DirectoryError(type(exc).__name__) from None
        data = json_object(response)
        result = data.get("result")
        if response.status_code != 200 or data.get("errcode") != 0 or not isinstance(result, dict):
            errcode = data.get("errcode")
            if errcode in TOKEN_ERRCODES:
                self.forget_token()  # the next lookup fetches a fresh one
            raise DirectoryError(
                f"answered {response.status_code} errcode {errcode}",
                definite=response.status_code == 200 and errcode in DIRECTORY_SAYS_NO,
            )
        return result
