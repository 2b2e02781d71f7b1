"""Voice discovery: ``GET /voices`` and the listing routes OpenAI-compatible clients call.

``GET /v1/audio/voices`` answers in two shapes at once: ``voices`` as a list of names (what
other Kokoro servers answer and their clients read) and ``data`` as OpenAI-style objects
with language and gender.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from voicestream.protocol import voice_catalog
from voicestream.speech.core import SpeechCore

MODEL_IDS = ("kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
"""Model names the speech route accepts; every one is Kokoro-82M (``model`` is ignored)."""


def _catalog(request: Request) -> list[dict[str, str | None]]:
    service: SpeechCore = request.app.state.service
    return [info.to_dict() for info in voice_catalog(service.engine.voices)]


async def list_voices(request: Request) -> Response:
    return JSONResponse({"voices": _catalog(request)})


async def list_openai_voices(request: Request) -> Response:
    voices = _catalog(request)
    data = [{"id": voice["name"], "object": "voice", **voice} for voice in voices]
    return JSONResponse({"object": "list", "data": data, "voices": [voice["name"] for voice in voices]})


async def list_models(_request: Request) -> Response:
    data = [{"id": name, "object": "model", "created": 0, "owned_by": "voicestream"} for name in MODEL_IDS]
    return JSONResponse({"object": "list", "data": data})
