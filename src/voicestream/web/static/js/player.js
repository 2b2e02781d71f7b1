// The one audio player of the pages: pcm16 chunks in, gapless sound out through an
// AudioWorklet, tapped by an AnalyserNode (the level meter, and the tests' ear).

const STOP_ANSWER_MS = 1000;

export class PcmPlayer {
  /** Must be called from a user gesture (a click), or the browser keeps the context mute.
   * `startBufferMs`: how much audio a stream queues before its first sample plays (0: none). */
  static async create({ inputRate = 24000, startBufferMs = 0 } = {}) {
    const context = new AudioContext({ latencyHint: "interactive" });
    await context.audioWorklet.addModule(new URL("./pcm-worklet.js", import.meta.url));
    const node = new AudioWorkletNode(context, "pcm-player", {
      numberOfInputs: 0, outputChannelCount: [1], processorOptions: { inputRate, startBufferMs },
    });
    const analyser = new AnalyserNode(context, { fftSize: 2048 });
    node.connect(analyser).connect(context.destination);
    return new PcmPlayer(context, node, analyser, inputRate);
  }

  constructor(context, node, analyser, inputRate) {
    this.context = context;
    this.node = node;
    this.analyser = analyser;
    this.listeners = new Map();
    this.oddByte = null;
    this.clearing = []; // what each stop waits for: the worklet's answers come in order
    node.port.onmessage = (event) => {
      if (event.data.type === "cleared") this.clearing.shift()?.(event.data.played / inputRate);
      // a position posted before the worklet took the clear: the clear's answer counts that audio
      else if (event.data.type === "position" && this.clearing.length) return;
      else this.emit(event.data);
    };
  }

  /** `callback(message)` for "started" (`queuedSeconds` of audio queued when it started,
   * `ended` if the stream's end had come), "tag", "position" (`tag`, `seconds` into that tag's
   * audio, as played; none between a `stop` and the worklet's answer to it, as those describe
   * audio from before the stop), "stall-start", "stall-end", "drained". */
  on(type, callback) {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), callback]);
  }

  emit(message) {
    for (const callback of this.listeners.get(message.type) ?? []) callback(message);
  }

  async resume() {
    if (this.context.state !== "running") await this.context.resume();
  }

  /** Queues little-endian pcm16 `bytes` (a Uint8Array); `tag` marks what it speaks. */
  push(bytes, tag = null) {
    let data = bytes;
    if (this.oddByte !== null) {
      data = new Uint8Array(bytes.length + 1);
      data[0] = this.oddByte;
      data.set(bytes, 1);
      this.oddByte = null;
    }
    const even = data.length - (data.length % 2);
    if (even < data.length) this.oddByte = data[even];
    const view = new DataView(data.buffer, data.byteOffset, even);
    const samples = new Float32Array(even / 2);
    for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(2 * i, true) / 32768;
    if (samples.length) this.node.port.postMessage({ type: "push", samples, tag }, [samples.buffer]);
  }

  /** No more audio will come for now: running dry is the end, not a stall. */
  end() {
    this.node.port.postMessage({ type: "end" });
  }

  /** Silence at once and forget what is queued (barge-in, a new answer). Resolves to the
   * seconds of audio played since the previous stop, as the worklet counted them (what the
   * listener heard), or null if it did not answer within a second. */
  stop() {
    this.oddByte = null;
    const cleared = new Promise((resolve) => {
      const timer = setTimeout(() => resolve(null), STOP_ANSWER_MS);
      this.clearing.push((seconds) => {
        clearTimeout(timer);
        resolve(seconds);
      });
    });
    this.node.port.postMessage({ type: "clear" });
    return cleared;
  }

  /** Root mean square of the samples the analyser holds now (0 when silent). */
  level() {
    const samples = new Float32Array(this.analyser.fftSize);
    this.analyser.getFloatTimeDomainData(samples);
    let sum = 0;
    for (const sample of samples) sum += sample * sample;
    return Math.sqrt(sum / samples.length);
  }
}

export function base64Bytes(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
