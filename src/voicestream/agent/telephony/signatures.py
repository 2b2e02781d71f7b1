"""How each carrier signs what it sends the agent, checked without I/O; every comparison in
constant time (`hmac.compare_digest`).

- **Twilio** (`X-Twilio-Signature`): base64 of HMAC-SHA1, keyed with the account's auth
  token, over the full URL followed by each form field's name and value, sorted by name. The
  media stream's WebSocket handshake is signed the same way over its ``wss://`` URL.
- **Telnyx** (`telnyx-signature-ed25519`, `telnyx-timestamp`): Ed25519 over
  ``timestamp|body`` with the account's key pair; the public key (base64) is configured here.
  A timestamp more than `MAX_AGE_S` from now is refused (a replay).
- **Plivo** (`X-Plivo-Signature-V3`, `X-Plivo-Signature-V3-Nonce`): base64 of HMAC-SHA256,
  keyed with the auth token, over the URL (query sorted), then for a POST the form fields
  (name and value, sorted), a dot and the nonce; as Plivo's own SDK builds it. The header may
  hold several signatures, comma-separated.
- **Vonage** (`Authorization: Bearer JWT`): a JWT signed HS256 with the account's signature
  secret; its ``payload_hash`` claim, where present, is the SHA-256 of the body.

The carriers other than Twilio do not sign their media streams' handshakes: the agent puts a
short-lived `StreamTokens` token in the stream URL of the answer the carrier fetched (a
signed request), and the stream must come back with it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MAX_AGE_S = 300.0
"""A Telnyx timestamp or a Vonage token this far from now is refused."""
STREAM_TOKEN_S = 120.0
"""How long a stream URL the agent answered with stays good."""


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def _equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


# --- Twilio ---------------------------------------------------------------------------------


def twilio_signature(auth_token: str, url: str, form: Iterable[tuple[str, str]] = ()) -> str:
    """What Twilio puts in `X-Twilio-Signature` for a request to `url` with `form`'s fields."""
    data = url + "".join(name + value for name, value in sorted(form))
    return _b64(hmac.new(auth_token.encode(), data.encode(), hashlib.sha1).digest())


def twilio_valid(auth_token: str, url: str, form: Iterable[tuple[str, str]], signature: str | None) -> bool:
    return bool(signature) and _equal(twilio_signature(auth_token, url, form), signature or "")


# --- Telnyx ---------------------------------------------------------------------------------


def telnyx_valid(
    public_key: str, body: bytes, signature: str | None, timestamp: str | None, now: float | None = None
) -> bool:
    """Whether `signature` (base64) is the Telnyx key's Ed25519 signature of
    ``timestamp|body``, with `timestamp` (seconds) within `MAX_AGE_S` of `now`."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if not signature or not timestamp:
        return False
    try:
        stamped = float(timestamp)
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key, validate=True))
        signed = base64.b64decode(signature, validate=True)
    except (ValueError, binascii.Error):
        return False
    if abs((time.time() if now is None else now) - stamped) > MAX_AGE_S:
        return False
    try:
        key.verify(signed, timestamp.encode() + b"|" + body)
    except InvalidSignature:
        return False
    return True


def telnyx_key_valid(public_key: str) -> bool:
    """Whether `public_key` is an Ed25519 public key in base64 (a startup check)."""
    try:
        return len(base64.b64decode(public_key, validate=True)) == 32
    except (ValueError, binascii.Error):
        return False


# --- Plivo ----------------------------------------------------------------------------------


def _plivo_url(url: str, query: list[tuple[str, str]], with_post_fields: bool) -> str:
    parts = urlsplit(url)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    fields = sorted([*query, *parse_qsl(parts.query, keep_blank_values=True)])
    joined = "&".join(f"{name}={value}" for name, value in fields)
    if joined or with_post_fields:
        base += "?" + joined
    if joined and with_post_fields:
        base += "."
    return base


def plivo_signature(
    auth_token: str, method: str, url: str, nonce: str, form: Iterable[tuple[str, str]] = ()
) -> str:
    """What Plivo puts in `X-Plivo-Signature-V3` for a request to `url` (a POST with
    `form`'s fields, or a GET), with `nonce` from `X-Plivo-Signature-V3-Nonce`."""
    fields = sorted(form)
    if method.upper() == "GET":
        base = _plivo_url(url, fields, with_post_fields=False)
    else:
        base = _plivo_url(url, [], with_post_fields=bool(fields))
        base += "".join(name + value for name, value in fields)
    signed = hmac.new(auth_token.encode(), f"{base}.{nonce}".encode(), hashlib.sha256).digest()
    return _b64(signed)


def plivo_valid(
    auth_token: str, method: str, url: str, form: Iterable[tuple[str, str]],
    signature: str | None, nonce: str | None,
) -> bool:
    if not signature or not nonce:
        return False
    expected = plivo_signature(auth_token, method, url, nonce, form)
    return any(_equal(expected, candidate.strip()) for candidate in signature.split(","))


# --- Vonage ---------------------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def vonage_token(secret: str, claims: dict[str, object]) -> str:
    """A JWT signed HS256 with `secret`, as Vonage signs its webhooks."""
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps(claims).encode())
    signed = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signed)}"


def vonage_valid(secret: str, authorization: str | None, body: bytes, now: float | None = None) -> bool:
    """Whether `authorization` is ``Bearer JWT`` with a JWT signed HS256 with `secret`, not
    issued more than `MAX_AGE_S` ago, whose ``payload_hash`` (when present) matches `body`."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token.count(".") != 2:
        return False
    header, payload, signature = token.strip().split(".")
    expected = _b64url(hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest())
    if not _equal(expected, signature):
        return False
    try:
        algorithm = json.loads(_unb64url(header)).get("alg")
        claims = json.loads(_unb64url(payload))
    except (ValueError, binascii.Error, AttributeError):
        return False
    if algorithm != "HS256" or not isinstance(claims, dict):
        return False
    issued = claims.get("iat")
    if isinstance(issued, int | float) and abs((time.time() if now is None else now) - issued) > MAX_AGE_S:
        return False
    digest = claims.get("payload_hash")
    return digest is None or (isinstance(digest, str) and _equal(hashlib.sha256(body).hexdigest(), digest))


# --- the agent's own stream tokens ------------------------------------------------------------


class StreamTokens:
    """Short-lived tokens for media-stream URLs: minted for a signed webhook's answer and
    checked when the stream connects. The key is this process's own (random at start), so a
    stream must reach the agent that answered its webhook."""

    def __init__(self, key: bytes | None = None, lifetime_s: float = STREAM_TOKEN_S) -> None:
        self._key = key or secrets.token_bytes(32)
        self.lifetime_s = lifetime_s

    def mint(self, carrier: str, now: float | None = None) -> str:
        expires = int((time.time() if now is None else now) + self.lifetime_s)
        return f"{expires}.{self._sign(carrier, expires)}"

    def valid(self, carrier: str, token: str | None, now: float | None = None) -> bool:
        expires_text, _, signature = (token or "").partition(".")
        if not expires_text.isdigit() or not signature:
            return False
        if int(expires_text) < (time.time() if now is None else now):
            return False
        return _equal(self._sign(carrier, int(expires_text)), signature)

    def _sign(self, carrier: str, expires: int) -> str:
        return _b64url(hmac.new(self._key, f"{carrier}|{expires}".encode(), hashlib.sha256).digest())
