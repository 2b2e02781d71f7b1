// AudioWorklet processor: plays queued mono PCM chunks back to back, resampled from the
// stream's rate to the AudioContext's by linear interpolation that reads across chunk joins,
// so that joins are continuous (no gap, no click). It tells the page when the first sample
// plays, when a chunk with a new tag (a sentence, a request) starts, when it runs dry before
// the stream ended (a stall) and for how long, and when everything has played. Its position
// (input samples played since the last clear) is the page's clock for what the listener heard:
// a clear answers with it, and while it plays it reports, every POSITION_FRAMES output frames,
// how far into the current tag's audio it is (the word to highlight).
// Its start buffer (`startBufferMs`, 0: none) holds back the first sample of a stream, and the
// first after a clear, until that much input is queued or the stream's end was received: a
// cushion against a stall right after the start, paid for in first-sound latency.

const POSITION_FRAMES = 1024; // about 21 ms at 48 kHz

class PcmPlayerProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.inputRate = options.processorOptions.inputRate;
    this.step = this.inputRate / sampleRate;
    this.startSamples = Math.ceil(((options.processorOptions.startBufferMs ?? 0) * this.inputRate) / 1000);
    this.reset();
    this.port.onmessage = (event) => this.receive(event.data);
  }

  reset() {
    this.chunks = [];
    this.position = 0;
    this.consumed = 0; // input samples of the chunks already played through
    this.tag = null;
    this.tagStart = 0; // input samples played when the current tag's audio began
    this.sincePosition = 0;
    this.started = false;
    this.ended = false;
    this.drained = false;
    this.stallFrames = null;
  }

  receive(message) {
    if (message.type === "push") {
      this.chunks.push({ samples: message.samples, tag: message.tag });
      this.drained = false;
    } else if (message.type === "end") {
      this.ended = true;
    } else if (message.type === "clear") {
      this.port.postMessage({ type: "cleared", played: this.played() });
      this.reset();
    }
  }

  /** Input samples queued and not yet played. */
  queued() {
    let samples = -Math.floor(this.position);
    for (const chunk of this.chunks) samples += chunk.samples.length;
    return samples;
  }

  /** Whether the stream may play: it has started, or its start buffer is full, or it ended. */
  ready() {
    return this.started || this.ended || (this.chunks.length > 0 && this.queued() >= this.startSamples);
  }

  process(_inputs, outputs) {
    const output = outputs[0][0];
    if (!this.ready()) {
      output.fill(0);
      return true;
    }
    const playing = this.chunks.length > 0;
    for (let frame = 0; frame < output.length; frame++) {
      output[frame] = this.chunks.length ? this.nextSample() : this.silence();
    }
    this.sincePosition += output.length;
    if (playing && this.sincePosition >= POSITION_FRAMES) {
      this.sincePosition = 0;
      this.port.postMessage({ type: "position", tag: this.tag, seconds: (this.played() - this.tagStart) / this.inputRate });
    }
    return true;
  }

  /** Input samples played since the last clear. */
  played() {
    return this.consumed + Math.floor(this.position);
  }

  nextSample() {
    const chunk = this.chunks[0];
    if (this.stallFrames !== null) {
      this.port.postMessage({ type: "stall-end", seconds: this.stallFrames / sampleRate });
      this.stallFrames = null;
    }
    if (!this.started) {
      this.started = true;
      this.port.postMessage({ type: "started", queuedSeconds: this.queued() / this.inputRate, ended: this.ended });
    }
    if (chunk.tag !== this.tag) {
      this.tag = chunk.tag;
      this.tagStart = this.played();
      this.port.postMessage({ type: "tag", tag: chunk.tag });
    }
    const samples = chunk.samples;
    const index = Math.floor(this.position);
    const fraction = this.position - index;
    const next = index + 1 < samples.length
      ? samples[index + 1]
      : (this.chunks.length > 1 ? this.chunks[1].samples[0] : samples[index]);
    const value = samples[index] + (next - samples[index]) * fraction;
    this.position += this.step;
    while (this.chunks.length && this.position >= this.chunks[0].samples.length) {
      this.position -= this.chunks[0].samples.length;
      this.consumed += this.chunks[0].samples.length;
      this.chunks.shift();
    }
    return value;
  }

  silence() {
    if (!this.started) return 0;
    if (this.ended) {
      if (!this.drained) {
        this.drained = true;
        this.port.postMessage({ type: "drained" });
      }
    } else if (this.stallFrames === null) {
      this.stallFrames = 1;
      this.port.postMessage({ type: "stall-start" });
    } else {
      this.stallFrames += 1;
    }
    return 0;
  }
}

registerProcessor("pcm-player", PcmPlayerProcessor);
