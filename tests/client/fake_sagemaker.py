"""`FakeSageMakerRuntimeClient`: a transport double that stands in for the AWS hop only.

It offers the one operation `SageMakerTransport` calls on `AsyncSageMakerRuntimeHTTP2Client`,
`invoke_endpoint_with_bidirectional_stream`, and answers with the SDK's own types:
smithy's `DuplexEventStream`, `RequestStreamEventPayloadPart` events in, and
`ResponseStreamEventPayloadPart` / `ResponseStreamEventModelStreamError` events out. Behind
it is the REAL speech server: each stream is a WebSocket session to it, and the client's
payloads reach it as binary frames, the way SageMaker forwards them to a container.

What SageMaker itself adds (SigV4, HTTP/2 event-stream framing, routing to an instance) is
not imitated; the speech server never sees it.
"""

from __future__ import annotations

import asyncio

from aws_sdk_sagemaker_runtime_http2.models import (
    InvokeEndpointWithBidirectionalStreamInput,
    InvokeEndpointWithBidirectionalStreamOutput,
    ModelStreamError,
    RequestStreamEvent,
    RequestStreamEventPayloadPart,
    ResponsePayloadPart,
    ResponseStreamEvent,
    ResponseStreamEventModelStreamError,
    ResponseStreamEventPayloadPart,
)
from smithy_core.aio.eventstream import DuplexEventStream
from smithy_core.aio.interfaces.eventstream import EventPublisher, EventReceiver
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK


class _ContainerInput(EventPublisher[RequestStreamEvent]):
    """The client's events, each sent to the container as one binary WebSocket frame."""

    def __init__(self, container: ClientConnection, sent: list[RequestStreamEvent]) -> None:
        self._container = container
        self._sent = sent

    async def send(self, event: RequestStreamEvent) -> None:
        assert isinstance(event, RequestStreamEventPayloadPart), event
        assert event.value.bytes_ is not None
        self._sent.append(event)
        await self._container.send(event.value.bytes_)

    async def close(self) -> None:
        """SageMaker half-closes here; the container's session goes on until it closes."""


class _ContainerOutput(EventReceiver[ResponseStreamEvent]):
    """The container's frames as `PayloadPart` events, text and audio alike (the frame type
    does not survive the hop). Frames above `split_over` bytes arrive in several parts,
    all but the last marked `PARTIAL`. A container that breaks the connection gives a
    `ModelStreamError` event; one that closes it in order ends the stream (None)."""

    def __init__(self, container: ClientConnection, split_over: int | None) -> None:
        self._container = container
        self._split_over = split_over
        self._parts: list[ResponsePayloadPart] = []
        self.events: list[ResponseStreamEvent] = []

    async def receive(self) -> ResponseStreamEvent | None:
        if not self._parts:
            try:
                frame = await self._container.recv()
            except ConnectionClosedOK:
                return None
            except ConnectionClosedError as closed:
                failure = ModelStreamError(
                    message=f"container closed: {closed}", error_code="ModelError"
                )
                return self._record(ResponseStreamEventModelStreamError(value=failure))
            self._parts = self._payload_parts(frame)
        return self._record(ResponseStreamEventPayloadPart(value=self._parts.pop(0)))

    async def close(self) -> None:
        await self._container.close()

    def _payload_parts(self, frame: str | bytes) -> list[ResponsePayloadPart]:
        data_type = "UTF8" if isinstance(frame, str) else "BINARY"
        data = frame.encode("utf-8") if isinstance(frame, str) else frame
        size = self._split_over or len(data) or 1
        pieces = [data[i : i + size] for i in range(0, len(data), size)] or [b""]
        return [
            ResponsePayloadPart(
                bytes_=piece,
                data_type=data_type,
                completion_state="PARTIAL" if i < len(pieces) - 1 else "COMPLETE",
            )
            for i, piece in enumerate(pieces)
        ]

    def _record(self, event: ResponseStreamEvent) -> ResponseStreamEvent:
        self.events.append(event)
        return event


class FakeSageMakerRuntimeClient:
    """Stands in for `AsyncSageMakerRuntimeHTTP2Client`, bridged to a real speech server."""

    def __init__(self, server_url: str, *, split_payloads_over: int | None = None) -> None:
        self._session_url = (
            server_url.replace("http://", "ws://") + "/invocations-bidirectional-stream"
        )
        self._split_over = split_payloads_over
        self.invocations: list[InvokeEndpointWithBidirectionalStreamInput] = []
        self.sent: list[RequestStreamEvent] = []
        self.outputs: list[_ContainerOutput] = []
        self.containers: list[ClientConnection] = []

    async def invoke_endpoint_with_bidirectional_stream(
        self, input: InvokeEndpointWithBidirectionalStreamInput
    ) -> DuplexEventStream[
        RequestStreamEvent, ResponseStreamEvent, InvokeEndpointWithBidirectionalStreamOutput
    ]:
        self.invocations.append(input)
        container = await connect(self._session_url)
        self.containers.append(container)
        output = _ContainerOutput(container, self._split_over)
        self.outputs.append(output)
        ready: asyncio.Future[
            tuple[InvokeEndpointWithBidirectionalStreamOutput, EventReceiver[ResponseStreamEvent]]
        ] = asyncio.get_running_loop().create_future()
        ready.set_result(
            (
                InvokeEndpointWithBidirectionalStreamOutput(
                    invoked_production_variant="AllTraffic"
                ),
                output,
            )
        )
        return DuplexEventStream(
            input_stream=_ContainerInput(container, self.sent), output_future=ready
        )

    async def crash_container(self) -> None:
        """End the container's connection abnormally, as a crashed model server would."""
        await self.containers[-1].close(code=1011, reason="model server crashed")
