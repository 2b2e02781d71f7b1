"""The voice catalog: names to language and gender, language codes, blend syntax."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicestream.protocol import (
    LANGUAGES,
    ErrorCode,
    ProtocolError,
    describe_voice,
    parse_agent_request,
    parse_client_message,
    parse_openai_request,
    parse_post_request,
    parse_voice,
    resolve_language,
    voice_catalog,
)


@pytest.mark.parametrize(("name", "language", "gender"), [
    ("af_heart", "en-us", "female"),
    ("bm_george", "en-gb", "male"),
    ("ef_dora", "es", "female"),
    ("ff_siwis", "fr-fr", "female"),
    ("hm_omega", "hi", "male"),
    ("im_nicola", "it", "male"),
    ("jf_alpha", "ja", "female"),
    ("pm_alex", "pt-br", "male"),
    ("zf_xiaoxiao", "zh", "female"),
    ("custom", None, None),
    ("qx_unknown", None, None),
])
def test_a_voice_name_says_its_language_and_gender(name: str, language: str | None, gender: str | None) -> None:
    info = describe_voice(name)
    assert (info.language, info.gender) == (language, gender)


def test_the_catalog_groups_voices_by_language() -> None:
    names = ["zf_xiaobei", "af_sky", "custom", "ef_dora", "af_bella", "bm_lewis"]
    assert [info.name for info in voice_catalog(names)] == [
        "af_bella", "af_sky", "bm_lewis", "ef_dora", "zf_xiaobei", "custom",
    ]


@pytest.mark.parametrize(("written", "code"), [
    ("es", "es"), ("EN", "en-us"), ("en_GB", "en-gb"), ("fr", "fr-fr"), ("pt-BR", "pt-br"),
    ("zh-CN", "zh"), ("ja", "ja"), ("hi", "hi"), ("it", "it"),
])
def test_language_codes_are_forgiven_case_and_short_forms(written: str, code: str) -> None:
    assert resolve_language(written) == code


@pytest.mark.parametrize("written", ["de", "klingon", "", "en-au"])
def test_an_unknown_language_is_unsupported_language(written: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        resolve_language(written)
    assert caught.value.code is ErrorCode.UNSUPPORTED_LANGUAGE
    assert "es" in caught.value.message


def test_a_plain_name_is_a_blend_of_one() -> None:
    blend = parse_voice("af_heart")
    assert (blend.names, blend.weights, blend.is_single) == (("af_heart",), (1.0,), True)


def test_equal_and_weighted_blends_are_normalized() -> None:
    assert parse_voice("af_bella+af_sky").weights == (0.5, 0.5)
    blend = parse_voice(" af_bella(2) + af_sky( 1 ) ")
    assert blend.names == ("af_bella", "af_sky")
    assert blend.weights == pytest.approx((2 / 3, 1 / 3))
    assert blend.language == "en-us"


@pytest.mark.parametrize("spec", [
    "af_bella+", "+af_sky", "af_bella(0)+af_sky", "af_bella(-1)+af_sky", "af_bella(x)+af_sky",
    "af_bella(inf)+af_sky", "af_bella+af_bella", "af_bella((2))", "af_bella+ef_dora", "af bella+af_sky",
])
def test_a_bad_blend_is_invalid_voice_blend(spec: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_voice(spec)
    assert caught.value.code is ErrorCode.INVALID_VOICE_BLEND


def test_a_blend_across_languages_names_them() -> None:
    with pytest.raises(ProtocolError, match="different languages \\(en-us, es\\)"):
        parse_voice("af_bella+ef_dora")


@given(st.lists(st.tuples(st.sampled_from(["af_bella", "af_sky", "af_heart", "af_nova"]),
                          st.floats(0.01, 100)), min_size=1, max_size=4, unique_by=lambda p: p[0]))
def test_blend_weights_always_sum_to_one_in_their_proportions(parts: list[tuple[str, float]]) -> None:
    spec = "+".join(f"{name}({weight!r})" for name, weight in parts)
    blend = parse_voice(spec)
    assert blend.names == tuple(name for name, _ in parts)
    assert sum(blend.weights) == pytest.approx(1.0)
    total = sum(weight for _, weight in parts)
    assert blend.weights == pytest.approx(tuple(weight / total for _, weight in parts))


def test_every_language_has_its_own_letter() -> None:
    assert len({language.letter for language in LANGUAGES.values()}) == len(LANGUAGES)


@pytest.mark.parametrize(("parse", "text_field"), [
    (parse_client_message, "text"), (parse_post_request, "text"),
    (parse_openai_request, "input"), (parse_agent_request, "prompt"),
])
def test_every_request_takes_lang_normalized(parse, text_field: str) -> None:
    assert parse(f'{{"{text_field}":"Hola.","lang":"ES"}}').lang == "es"
    assert parse(f'{{"{text_field}":"Hola."}}').lang is None
    for bad in ('"tlh"', "3", '["es"]'):
        with pytest.raises(ProtocolError) as caught:
            parse(f'{{"{text_field}":"Hola.","lang":{bad}}}')
        assert caught.value.code is ErrorCode.UNSUPPORTED_LANGUAGE
        assert "en-us" in caught.value.message
