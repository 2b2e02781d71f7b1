"""kokoro-onnx's `create_stream`, timed in a Python of its own (``bench library``).

The dev group pins kokoro-onnx below 0.5 (its phonemizer fork fits ours), and one venv
holds one version, so ``bench library`` runs any other release through this script under
``uv run --no-project --with kokoro-onnx==X``. It imports nothing of voicestream but
``audio/audible.py``, loaded by path (that file needs numpy only). Protocol: argv is the
model and voices files; each stdin line is a JSON string to speak; each stdout line is
``{"first_audio_s": .., "first_sound_s": ..}``, counted from the call.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import json
import sys
import time
from pathlib import Path

_spec = importlib.util.spec_from_file_location("audible", Path(__file__).parents[1] / "audio" / "audible.py")
assert _spec is not None and _spec.loader is not None
audible = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(audible)

VOICE = "af_heart"


async def _time(kokoro, text: str) -> dict[str, float | None]:
    sound = None
    started = time.perf_counter()
    stream = kokoro.create_stream(text, VOICE, lang="en-us")
    try:
        async for samples, rate in stream:
            sound = sound or audible.FirstSound(rate)
            if sound.feed(time.perf_counter() - started, samples) is not None:
                break
    finally:
        await stream.aclose()
    return {"first_audio_s": sound and sound.first_audio_s, "first_sound_s": sound and sound.heard_s}


def main() -> None:
    from kokoro_onnx import Kokoro

    kokoro = Kokoro(sys.argv[1], sys.argv[2])
    print(json.dumps({"version": importlib.metadata.version("kokoro-onnx")}), flush=True)
    for line in sys.stdin:
        print(json.dumps(asyncio.run(_time(kokoro, json.loads(line)))), flush=True)


if __name__ == "__main__":
    main()
