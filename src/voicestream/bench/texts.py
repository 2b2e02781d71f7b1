"""The inputs every measurement uses, so that docs/BENCHMARKS.md and the tests speak of the same texts."""

FIRST_SENTENCE = "Voice agents should start speaking as soon as they can."
ONE_SENTENCE = "The meeting has moved to Thursday afternoon, so please bring the quarterly figures."
"""One sentence, about as long as the 77 characters that kokoro-onnx was first measured with."""
LONE_SENTENCE = "Streaming speech lets an agent start talking before it has finished thinking."
"""One sentence with no clause mark: the first cut can only fall before a break word ("before")."""
BLOCK = (  # 4 sentences, 267 characters, like the reference's measured block
    "Voice agents should start speaking as soon as they can. Waiting for the whole paragraph "
    "wastes seconds that the listener notices at once. Streaming each sentence keeps the "
    "conversation natural and quick. The rest of the answer follows while the first part is playing."
)
REFERENCE_SENTENCES = (
    ("Hello there.", 73_200, 1.525),
    ("This is a post deployment check.", 108_000, 2.250),
    ("It has three sentences.", 98_400, 2.050),
)
"""The reference deployment's three-sentence check: text, bytes of pcm16, seconds."""

RTF_INPUTS = {
    "short": "Hello there.",
    "medium": "The meeting has moved to Thursday afternoon. Please bring the quarterly figures and your questions.",
    "long": (
        "Kokoro is a small text to speech model with eighty two million parameters. "
        "It runs comfortably on a laptop processor, and even faster on a graphics card. "
        "This paragraph is long enough to be split into several pieces. "
        "Each piece is rendered on its own and streamed to the listener at once. "
        "The real time factor tells how many seconds of computing one second of speech costs. "
        "Lower is better, and anything under one keeps up with a live conversation."
    ),
}
MONOLOGUE = " ".join(
    f"Chapter {n} follows the travellers along the river. They pass the mills and the old "
    "stone bridges, until night falls over the valley." for n in range(1, 9)
)
AGENT_PROMPT = "Explain how a rainbow forms."
"""The prompt of ``voicestream bench e2e``'s modes: the local LLM answers it in several sentences."""
LONG_OPENING_PROMPTS = (
    "What is a black hole?",
    "How do airplanes fly?",
    "How does the internet work?",
    "Explain how vaccines work.",
    "What is machine learning?",
    "How do volcanoes erupt?",
)
"""Prompts the local LLM (seeded as in ``voicestream bench e2e``) answers with an opening
sentence of 17 to 25 words: latency mode against sentence mode."""
LATENCY_ANSWER = (
    "When the opening sentence of a spoken answer is long, the listener should still hear its first "
    "words almost at once instead of waiting for the whole sentence to be rendered. "
    "The rest of the answer follows sentence by sentence. Nobody waits for the whole paragraph."
)
"""An answer that opens with a long sentence: ``bench transport`` compares latency mode and sentence mode on it."""
LOAD_TEXT = (
    "Thanks for calling. Your order left the warehouse this morning and should arrive on Thursday. "
    "Is there anything else I can help with?"
)
"""What every session of ``bench load`` speaks, again and again: a short reply of three sentences."""
ENCODING_CLIPS = (
    "Hello there.",
    "This is a post deployment check.",
    "It has three sentences.",
    "The meeting moved to Thursday at 3 pm.",
    "Please call me back before noon.",
    "Your order number is 12.",
    "The train leaves from platform 4.",
    "It will be sunny and warm tomorrow.",
    "Turn left at the second light.",
    "The library closes at 8 tonight.",
    "She bought 2 apples and a pear.",
    "We need a bigger boat.",
    "The battery is almost empty.",
    "Dinner is ready in ten minutes.",
    "Can you hear me clearly now?",
    "The package arrived this morning.",
    "Remember to water the plants.",
    "My flight lands at half past six.",
    "The river is higher than last year.",
    "Please speak a little more slowly.",
    "The museum is free on Sundays.",
    "He scored 3 goals in the final.",
    "Keep the receipt for your records.",
    "Thank you, and have a nice day.",
)
"""The 24 clips of ``bench encoding``: short sentences like the reference's, some with digits."""

WORD_SENTENCES = {  # plain words (no numbers or symbols): the cut test compares words as heard
    "en-us": (
        "af_heart",
        (
            "The old man walked slowly down the narrow street. "
            "His daughter waited near the station with a basket of apples."
        ),
    ),
    "en-gb": ("bf_emma", "The children played in the garden until the evening. Their mother called them home for supper."),
    "es": ("ef_dora", "El perro corre por el parque todas las mañanas. Me gusta leer libros en la biblioteca."),
    "fr-fr": ("ff_siwis", "Le chat dort tranquillement sur le canapé. Nous allons au marché ce matin."),
    "it": ("if_sara", "Il treno per Roma parte domani mattina. Mia sorella lavora in un piccolo negozio."),
    "pt-br": ("pf_dora", "O menino gosta de jogar futebol na praia. A comida da minha avó é muito gostosa."),
    "hi": ("hf_alpha", "मेरा नाम राम है और मैं दिल्ली में रहता हूँ। आज मौसम बहुत अच्छा है।"),
    "ja": ("jf_alpha", "今日はとても良い天気ですね。駅まで歩いて行きましょう。"),
    "zh": ("zf_xiaoxiao", "今天天气很好，我们一起去公园散步吧。明天会下雨。"),
}
