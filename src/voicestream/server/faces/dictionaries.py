"""Pronunciation dictionaries and phonemes over HTTP, as the vendors' clients send them.

- ElevenLabs: ``POST /v1/pronunciation-dictionaries/add-from-file`` (multipart: ``name``,
  ``file`` a PLS lexicon, ``description``), ``POST .../add-from-rules`` (JSON rules, alias or
  IPA phoneme), ``GET /v1/pronunciation-dictionaries/`` (list) and ``GET .../{id}/`` (get, with
  its rules); a request names them with ``pronunciation_dictionary_locators``
  (`voicestream.protocol.elevenlabs`).
- Cartesia: ``POST /pronunciation-dicts/`` (``name``, ``items``), ``GET /pronunciation-dicts/``
  (cursor pages), ``GET`` and ``DELETE /pronunciation-dicts/{id}``; a request names one with
  ``pronunciation_dict_id``.
- Kokoro-FastAPI: ``POST /dev/phonemize`` (``{"text", "language"}`` to ``{"phonemes", "tokens"}``,
  with the server's lexicons and the text's markup applied: what the model would receive) and
  ``POST /dev/generate_from_phonemes`` (``{"phonemes", "voice", "speed"}`` to a WAV).

The dictionaries themselves are the core's (`voicestream.speech.dictionaries`): kept on disk,
bounded in count and size. Errors are the server's ``{"error": {code, message}}``; an id no
dictionary has is 404.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message

from voicestream.protocol import ErrorCode, ProtocolError, SpeechFault, load_json_object
from voicestream.protocol.dictionaries import (
    Rule,
    StoredDictionary,
    cartesia_dictionary,
    elevenlabs_added,
    elevenlabs_dictionary,
    elevenlabs_metadata,
    parse_cartesia_dictionary,
    parse_elevenlabs_rules,
    parse_phonemes,
    parse_phonemize,
    phonemes_as_ssml,
)
from voicestream.server.streaming import (
    audio_body,
    error_response,
    fault_response,
    read_body,
    start_stream,
    stream_response,
)
from voicestream.speech.core import Output, SpeechCore, Voice
from voicestream.speech.dictionaries import Dictionary, DictionaryError
from voicestream.text.lexicon import Entry


def _stored(dictionary: Dictionary) -> StoredDictionary:
    """The dictionary for the formatters; each rule says whether only its own case matches
    (the lexicon's rule for an entry that did not say)."""
    rules = [Rule(e.grapheme, e.ipa, e.alias, e.case_sensitive) for e in dictionary.entries]
    return StoredDictionary(dictionary.id, dictionary.name, dictionary.version_id, dictionary.created_at,
                            dictionary.description, rules)


def _entries(rules: list[Rule]) -> list[Entry]:
    return [Entry(rule.grapheme, rule.ipa, rule.alias, None, rule.exact_case) for rule in rules]


def _refused(error: DictionaryError) -> Response:
    if error.missing:
        return error_response(ErrorCode.INVALID_MESSAGE, error.message, 404)
    return error_response(ErrorCode.INVALID_MARKUP, error.message, 400)


async def _json(request: Request, service: SpeechCore) -> dict:
    return load_json_object(await read_body(request, service.settings.max_body_bytes))


Format = Callable[[StoredDictionary], dict[str, Any]]


async def _add(
    request: Request, make: Callable[[SpeechCore, bytes, Request], Awaitable[Dictionary]], answer: Format
) -> Response:
    """A dictionary made by ``make`` from the body (bounded by ``--max-body-bytes``), answered
    as ``answer`` writes it."""
    service: SpeechCore = request.app.state.service
    try:
        added = await make(service, await read_body(request, service.settings.max_body_bytes), request)
    except SpeechFault as fault:
        return fault_response(service, fault)
    except DictionaryError as error:
        return _refused(error)
    return JSONResponse(answer(_stored(added)))


async def _get(request: Request, answer: Format) -> Response:
    service: SpeechCore = request.app.state.service
    try:
        return JSONResponse(answer(_stored(service.dictionaries.get(request.path_params["dictionary_id"]))))
    except DictionaryError as error:
        return _refused(error)


# --- ElevenLabs ------------------------------------------------------------------------------


async def _from_file(service: SpeechCore, body: bytes, request: Request) -> Dictionary:
    """The multipart form, read from the body already bounded."""

    async def replay() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async with Request(request.scope, replay).form(max_files=1, max_fields=8) as form:
        name, upload, description = form.get("name"), form.get("file"), form.get("description")
        if not isinstance(name, str) or not name.strip():
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, "add-from-file needs a name field")
        if not isinstance(upload, UploadFile):
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, "add-from-file needs a file field: a PLS lexicon")
        document = await upload.read()
    return service.dictionaries.add_pls(name, document, description if isinstance(description, str) else "")


async def elevenlabs_add_from_file(request: Request) -> Response:
    return await _add(request, _from_file, elevenlabs_added)


async def _from_rules(service: SpeechCore, body: bytes, _request: Request) -> Dictionary:
    name, description, rules = parse_elevenlabs_rules(load_json_object(body))
    return service.dictionaries.add_entries(name, _entries(rules), len(body), description)


async def elevenlabs_add_from_rules(request: Request) -> Response:
    return await _add(request, _from_rules, elevenlabs_added)


async def elevenlabs_list(request: Request) -> Response:
    service: SpeechCore = request.app.state.service
    listed = [elevenlabs_metadata(_stored(d)) for d in service.dictionaries.list()]
    return JSONResponse({"pronunciation_dictionaries": listed, "next_cursor": None, "has_more": False})


async def elevenlabs_get(request: Request) -> Response:
    return await _get(request, elevenlabs_dictionary)


# --- Cartesia --------------------------------------------------------------------------------


async def _from_items(service: SpeechCore, body: bytes, _request: Request) -> Dictionary:
    name, rules = parse_cartesia_dictionary(load_json_object(body))
    return service.dictionaries.add_entries(name, _entries(rules), len(body))


async def cartesia_create(request: Request) -> Response:
    return await _add(request, _from_items, cartesia_dictionary)


async def cartesia_list(request: Request) -> Response:
    """A cursor page (``limit``, ``starting_after``, ``ending_before``), as the SDK pages them."""
    service: SpeechCore = request.app.state.service
    listed = service.dictionaries.list()
    ids = [d.id for d in listed]
    query = request.query_params
    if (after := query.get("starting_after")) in ids:
        listed = listed[ids.index(after) + 1 :]
    elif (before := query.get("ending_before")) in ids:
        listed = listed[: ids.index(before)]
    try:
        limit = min(100, max(1, int(query.get("limit", "20"))))
    except ValueError:
        return error_response(ErrorCode.INVALID_MESSAGE, "limit must be a number from 1 to 100")
    page = listed[-limit:] if "ending_before" in query else listed[:limit]
    return JSONResponse({"data": [cartesia_dictionary(_stored(d)) for d in page], "has_more": len(page) < len(listed)})


async def cartesia_get(request: Request) -> Response:
    return await _get(request, cartesia_dictionary)


async def cartesia_delete(request: Request) -> Response:
    service: SpeechCore = request.app.state.service
    try:
        service.dictionaries.remove(request.path_params["dictionary_id"])
    except DictionaryError as error:
        return _refused(error)
    return Response(status_code=204)


# --- Kokoro-FastAPI ----------------------------------------------------------------------------


async def phonemize(request: Request) -> Response:
    service: SpeechCore = request.app.state.service
    try:
        text, language = parse_phonemize(await _json(request, service))
        phonemes, tokens = await service.phonemize(text, language)
    except SpeechFault as fault:
        return fault_response(service, fault)
    return JSONResponse({"phonemes": phonemes, "tokens": tokens})


async def generate_from_phonemes(request: Request) -> Response:
    service: SpeechCore = request.app.state.service
    try:
        body = parse_phonemes(await _json(request, service))
        stream = start_stream(service, phonemes_as_ssml(body.phonemes), Voice(body.voice, body.speed, None),
                              Output("wav", 24000), "phonemes", "phonemes")
    except SpeechFault as fault:
        return fault_response(service, fault)
    return stream_response(service, stream, audio_body(stream), stream.encoder.content_type)
