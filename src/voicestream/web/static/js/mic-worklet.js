// AudioWorklet processor: the microphone for Hands-free. Its first channel is resampled from
// the AudioContext's rate to `targetRate` (24 kHz, what the Realtime API's audio/pcm is) by
// averaging each output sample's span of input (a box filter: 48 kHz -> 24 kHz averages pairs,
// which keeps what lies above 12 kHz from folding back into the voice), converted to
// pcm16 (an Int16Array: little-endian on every platform browsers run on) and posted to the
// page every `chunkMs` as one transferable ArrayBuffer.
// The page sends it on as input_audio_buffer.append. Resampling here, not by opening the
// context at 24 kHz, because not every browser connects a microphone to a context of another rate.

class MicCaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const { targetRate, chunkMs } = options.processorOptions;
    this.step = sampleRate / targetRate; // input samples per output sample
    this.phase = 0; // input samples into the output sample being averaged
    this.sum = 0;
    this.chunkSamples = Math.round((targetRate * chunkMs) / 1000);
    this.chunk = new Int16Array(this.chunkSamples);
    this.filled = 0;
    this.running = true;
    this.port.onmessage = (event) => {
      if (event.data.type === "stop") this.running = false;
    };
  }

  process(inputs) {
    const channel = inputs[0][0];
    if (channel) {
      for (const sample of channel) this.take(sample);
    }
    return this.running;
  }

  /** One input sample, spread over the output samples whose spans it covers. */
  take(sample) {
    let left = 1;
    while (left > 0) {
      const part = Math.min(left, this.step - this.phase);
      this.sum += sample * part;
      this.phase += part;
      left -= part;
      if (this.phase >= this.step - 1e-9) {
        this.emit(this.sum / this.step);
        this.sum = 0;
        this.phase = 0;
      }
    }
  }

  emit(value) {
    const clipped = Math.max(-1, Math.min(1, value));
    this.chunk[this.filled++] = clipped < 0 ? clipped * 32768 : clipped * 32767;
    if (this.filled === this.chunkSamples) {
      const pcm = this.chunk.buffer;
      this.port.postMessage({ type: "audio", pcm }, [pcm]); // detaches it: a fresh chunk follows
      this.chunk = new Int16Array(this.chunkSamples);
      this.filled = 0;
    }
  }
}

registerProcessor("mic-capture", MicCaptureProcessor);
