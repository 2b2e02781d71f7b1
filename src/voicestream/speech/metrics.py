"""Prometheus metrics of one server; each app gets its own registry so tests stay independent."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
_RTF_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 5.0)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.time_to_first_audio = Histogram(
            "voicestream_time_to_first_audio_seconds",
            "From a request's arrival to its first audio byte leaving the server.",
            ["route"], buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        self.real_time_factor = Histogram(
            "voicestream_real_time_factor",
            "Model time divided by audio duration, per completed request.",
            buckets=_RTF_BUCKETS, registry=self.registry,
        )
        self.active_sessions = Gauge(
            "voicestream_active_sessions", "Open bidirectional sessions.", registry=self.registry
        )
        self.queue_depth = Gauge(
            "voicestream_queue_depth", "Requests accepted whose audio is not sent yet.", registry=self.registry
        )
        self.buffered_bytes = Gauge(
            "voicestream_buffered_audio_bytes",
            "Rendered audio not sent yet, all requests together (bytes as encoded).", registry=self.registry,
        )
        self.peak_listener_bytes = Gauge(
            "voicestream_peak_listener_buffered_bytes",
            "The most rendered, unsent audio one session or response has held (bytes).",
            registry=self.registry,
        )
        self.requests_ended = Counter(
            "voicestream_requests_ended_total", "Requests ended, by how (done, cancelled, failed).",
            ["state"], registry=self.registry,
        )
        self.rendering_pieces = Gauge(
            "voicestream_rendering_pieces", "Pieces the engine is rendering right now.", registry=self.registry
        )
        self.moved_pieces = Gauge(
            "voicestream_moved_pieces",
            "Windowed pieces left after a part for the scheduling policy to place on another "
            "worker (their listener's slack changed), since the server started.", registry=self.registry,
        )
        self.stopped_runs = Gauge(
            "voicestream_stopped_runs",
            "Pieces whose model run was stopped mid-run because their request ended (a cancel, "
            "a client gone), since the server started.", registry=self.registry,
        )
        self.interrupted_runs = Gauge(
            "voicestream_interrupted_runs",
            "Model runs stopped mid-run, and made again after a wait, because a more urgent "
            "request's first words claimed the cores, since the process started.", registry=self.registry,
        )
        self.sessions_closed = Counter(
            "voicestream_sessions_closed_total", "Sessions the server closed, by close code.", ["code"],
            registry=self.registry,
        )
        self.requests = Counter(
            "voicestream_requests_total", "Requests accepted, by route.", ["route"], registry=self.registry
        )
        self.rendered_audio = Gauge(
            "voicestream_rendered_audio_seconds",
            "Audio the model has rendered since the server started (seconds).", registry=self.registry,
        )
        self.cancels = Counter(
            "voicestream_cancels_total",
            "Cancels that stopped work still to render or send (a request, a streamed context), by route.",
            ["route"], registry=self.registry,
        )
        self.jobs_reaped = Counter(
            "voicestream_jobs_reaped",
            "Requests the scheduler's reaper ended because their listener was gone (its route ended "
            "without ending them), by the state they were in; a route that ends its own leaves none.",
            ["state"], registry=self.registry,
        )
        for state in ("queued", "speaking"):
            self.jobs_reaped.labels(state=state)
        self.memory_settled = Gauge(
            "voicestream_memory_settled",
            "1 once no model run has gone for the idle release's spell and the heap was handed back "
            "(and the sessions renewed, if memory had grown); 0 until then.", registry=self.registry,
        )
        self.session_renewals = Gauge(
            "voicestream_session_renewals",
            "Times the model's sessions were built again in a quiet spell to give back the memory "
            "runs at once had kept in them, since the model was loaded.", registry=self.registry,
        )
        self.errors = Counter(
            "voicestream_errors_total", "Error answers, by protocol code.", ["code"], registry=self.registry
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
