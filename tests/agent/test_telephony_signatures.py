"""The carriers' signatures against their own references: Twilio's documented example,
vectors from Plivo's SDK (plivo.utils.signature_v3), JWTs from PyJWT, Ed25519 from
cryptography; each refused when anything in it changes."""

from __future__ import annotations

import base64
import hashlib
import time

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from voicestream.agent.telephony.signatures import (
    StreamTokens,
    plivo_signature,
    plivo_valid,
    telnyx_key_valid,
    telnyx_valid,
    twilio_signature,
    twilio_valid,
    vonage_token,
    vonage_valid,
)

TWILIO_URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
TWILIO_FORM = [("CallSid", "CA1234567890ABCDE"), ("Caller", "+14158675309"), ("Digits", "1234"),
               ("From", "+14158675309"), ("To", "+18005551212")]


def test_twilio_signs_the_url_and_the_sorted_form_as_its_docs_show():
    assert twilio_signature("12345", TWILIO_URL, TWILIO_FORM) == "RSOYDt4T1cUTdK1PDd93/VVr8B8="
    assert twilio_valid("12345", TWILIO_URL, reversed(TWILIO_FORM), "RSOYDt4T1cUTdK1PDd93/VVr8B8=")
    assert not twilio_valid("12346", TWILIO_URL, TWILIO_FORM, "RSOYDt4T1cUTdK1PDd93/VVr8B8=")
    assert not twilio_valid("12345", TWILIO_URL + "&x=1", TWILIO_FORM, "RSOYDt4T1cUTdK1PDd93/VVr8B8=")
    assert not twilio_valid("12345", TWILIO_URL, TWILIO_FORM[1:], "RSOYDt4T1cUTdK1PDd93/VVr8B8=")
    assert not twilio_valid("12345", TWILIO_URL, TWILIO_FORM, None)


def test_plivo_v3_matches_its_sdk():
    """Vectors computed with plivo 4.63's `get_signature_v3(construct_post_url(...))` and
    `construct_get_url`."""
    form = [("To", "123"), ("From", "456")]
    assert plivo_signature("tok", "POST", "https://ex.com/answer?b=2&a=1", "nonce1", form) == (
        "wALyYEywSKOAirlzHYM+mfip7Jp0/ew/zxD2vV2t92Q=")
    assert plivo_signature("tok", "GET", "https://ex.com/answer?b=2&a=1", "nonce1") == (
        "X+/FJjoLWwVw/cPTYF6dq4PkbTXQJGqFh0BD9wEACVI=")
    assert plivo_signature("tok", "POST", "https://ex.com/answer", "nonce1", form) == (
        "lwUu+YVceGDdmKmzwVboadH7/G8feKaFKFYjZYnHQbo=")
    good = "lwUu+YVceGDdmKmzwVboadH7/G8feKaFKFYjZYnHQbo="
    assert plivo_valid("tok", "POST", "https://ex.com/answer", form, f"other,{good}", "nonce1")
    assert not plivo_valid("tok", "POST", "https://ex.com/answer", form, good, "nonce2")
    assert not plivo_valid("tok", "POST", "https://ex.com/answer", form, None, "nonce1")


def test_vonage_accepts_pyjwts_hs256_tokens_and_checks_the_body_hash():
    body = b'{"from": "447700900000"}'
    now = time.time()
    claims = {"iat": int(now), "jti": "x", "payload_hash": hashlib.sha256(body).hexdigest()}
    token = jwt.encode(claims, "a-vonage-signature-secret-32-bytes", algorithm="HS256")
    assert vonage_valid("a-vonage-signature-secret-32-bytes", f"Bearer {token}", body)
    assert vonage_valid("a-vonage-signature-secret-32-bytes", f"Bearer {vonage_token('a-vonage-signature-secret-32-bytes', claims)}", body)
    assert jwt.decode(vonage_token("a-vonage-signature-secret-32-bytes", claims), "a-vonage-signature-secret-32-bytes", algorithms=["HS256"]) == claims
    assert not vonage_valid("other", f"Bearer {token}", body)
    assert not vonage_valid("a-vonage-signature-secret-32-bytes", f"Bearer {token}", body + b" ")
    assert not vonage_valid("a-vonage-signature-secret-32-bytes", token, body)
    old = jwt.encode({**claims, "iat": int(now) - 3600}, "a-vonage-signature-secret-32-bytes", algorithm="HS256")
    assert not vonage_valid("a-vonage-signature-secret-32-bytes", f"Bearer {old}", body)
    assert not vonage_valid("a-vonage-signature-secret-32-bytes", None, body)


def test_telnyx_checks_ed25519_over_the_timestamp_and_body_and_refuses_old_ones():
    private = Ed25519PrivateKey.generate()
    public = base64.b64encode(private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
    assert telnyx_key_valid(public) and not telnyx_key_valid("abc")
    body = b"CallSid=v3%3Ac1&From=%2B1"
    stamp = str(int(time.time()))
    signature = base64.b64encode(private.sign(stamp.encode() + b"|" + body)).decode()
    assert telnyx_valid(public, body, signature, stamp)
    assert not telnyx_valid(public, body + b"&x=1", signature, stamp)
    assert not telnyx_valid(public, body, signature, str(int(stamp) + 1))
    old = str(int(time.time()) - 400)
    old_signature = base64.b64encode(private.sign(old.encode() + b"|" + body)).decode()
    assert not telnyx_valid(public, body, old_signature, old)
    assert not telnyx_valid(public, body, None, stamp)
    assert not telnyx_valid(public, body, "not base64!", stamp)


def test_stream_tokens_are_good_for_their_carrier_until_they_expire():
    tokens = StreamTokens(lifetime_s=60)
    token = tokens.mint("plivo", now=1000)
    assert tokens.valid("plivo", token, now=1059)
    assert not tokens.valid("plivo", token, now=1061)
    assert not tokens.valid("vonage", token, now=1001)
    assert not StreamTokens().valid("plivo", token, now=1001)
    assert not tokens.valid("plivo", None) and not tokens.valid("plivo", "x.y")
