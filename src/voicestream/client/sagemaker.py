"""A session through a SageMaker endpoint's bidirectional stream (HTTP/2 event stream).

SageMaker relays the container's WebSocket session: each JSON message goes out as one
`PayloadPart` event, and each frame of the container comes back as one, audio and control
alike, with the frame type lost on the way. A payload is therefore told apart by the
whole-chunk rule of PROTOCOL.md 1.3 (`decode_control_frame`).

This module needs the `aws` extra (`aws-sdk-sagemaker-runtime-http2`); `voicestream.client`
imports it only when `SageMakerTransport` is first used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
from aws_sdk_sagemaker_runtime_http2.models import (
    InvokeEndpointWithBidirectionalStreamInput,
    InvokeEndpointWithBidirectionalStreamOutput,
    ModelError,
    RequestPayloadPart,
    RequestStreamEvent,
    RequestStreamEventPayloadPart,
    ResponseStreamEvent,
    ResponseStreamEventInternalStreamFailure,
    ResponseStreamEventModelStreamError,
    ResponseStreamEventPayloadPart,
    ServiceUnavailableError,
)
from smithy_core.aio.eventstream import DuplexEventStream
from smithy_core.aio.interfaces.eventstream import EventReceiver
from smithy_core.exceptions import SmithyError

from voicestream.client.errors import (
    ConnectionLostError,
    SpeechBusyError,
    SpeechError,
    error_from_http,
)
from voicestream.client.transport import AudioFrame, ControlFrame, Frame, Transport
from voicestream.protocol import decode_control_frame

BidirectionalStream = DuplexEventStream[
    RequestStreamEvent, ResponseStreamEvent, InvokeEndpointWithBidirectionalStreamOutput
]


class BidirectionalStreamClient(Protocol):
    """The one operation of `AsyncSageMakerRuntimeHTTP2Client` this transport calls."""

    async def invoke_endpoint_with_bidirectional_stream(
        self, input: InvokeEndpointWithBidirectionalStreamInput
    ) -> BidirectionalStream: ...


def _connect_error(exc: Exception, endpoint_name: str) -> SpeechError:
    """The hierarchy's error for a failed `InvokeEndpointWithBidirectionalStream` call.

    A `ModelError` carries the container's own HTTP answer (a 503 `busy` body, say), so it
    is mapped as if the container had been called directly.
    """
    if isinstance(exc, ModelError) and exc.original_status_code is not None:
        body = (exc.original_message or "").encode("utf-8")
        return error_from_http(exc.original_status_code, body)
    if isinstance(exc, ServiceUnavailableError):
        return SpeechBusyError(f"SageMaker endpoint {endpoint_name} is unavailable: {exc}")
    return ConnectionLostError(f"cannot open a stream to SageMaker endpoint {endpoint_name}: {exc}")


class SageMakerTransport(Transport):
    """One bidirectional stream to the SageMaker endpoint `endpoint_name`.

    Without `client`, an `AsyncSageMakerRuntimeHTTP2Client` is made for `region` with the
    standard AWS credential chain, and closed with the transport. `target_variant`,
    `model_invocation_path` and `model_query_string` are passed to SageMaker unchanged.
    """

    def __init__(
        self,
        endpoint_name: str,
        region: str | None = None,
        *,
        client: BidirectionalStreamClient | None = None,
        target_variant: str | None = None,
        model_invocation_path: str | None = None,
        model_query_string: str | None = None,
    ) -> None:
        self.endpoint_name = endpoint_name
        self.region = region
        self._client = client
        self._owned_client: AsyncSageMakerRuntimeHTTP2Client | None = None
        self._request = InvokeEndpointWithBidirectionalStreamInput(
            endpoint_name=endpoint_name,
            target_variant=target_variant,
            model_invocation_path=model_invocation_path,
            model_query_string=model_query_string,
        )
        self._stream: BidirectionalStream | None = None
        self._output: EventReceiver[ResponseStreamEvent] | None = None

    async def connect(self) -> None:
        try:
            if self._client is None:
                self._client = self._owned_client = await self._default_client()
            self._stream = await self._client.invoke_endpoint_with_bidirectional_stream(
                self._request
            )
        except (SmithyError, OSError) as exc:
            await self.close()
            raise _connect_error(exc, self.endpoint_name) from exc

    async def _default_client(self) -> AsyncSageMakerRuntimeHTTP2Client:
        """A client on the AWS CRT HTTP client: the SDK's default (aiohttp) cannot stream
        both ways, and refuses this operation."""
        try:
            from smithy_http.aio.crt import AWSCRTHTTPClient
        except ImportError as exc:
            raise ImportError(
                "SageMakerTransport needs the AWS CRT HTTP client: install 'smithy-http[awscrt]'"
            ) from exc
        config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
            transport=AWSCRTHTTPClient(),
            **({} if self.region is None else {"region": self.region}),
        )
        return AsyncSageMakerRuntimeHTTP2Client(config)

    async def send(self, message: Mapping[str, Any]) -> None:
        payload = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        event = RequestStreamEventPayloadPart(
            value=RequestPayloadPart(bytes_=payload, data_type="UTF8")
        )
        try:
            await self._open().input_stream.send(event)
        except (SmithyError, OSError) as exc:
            raise self._lost("sending failed", exc) from exc

    async def receive(self) -> Frame | None:
        """The next payload, reassembled when SageMaker split it into `PARTIAL` parts."""
        parts: list[bytes] = []
        while True:
            try:
                event = await (await self._output_stream()).receive()
            except (SmithyError, OSError) as exc:
                raise self._lost("receiving failed", exc) from exc
            match event:
                case None if parts:
                    raise self._lost("the stream ended inside a payload")
                case None:
                    return None
                case ResponseStreamEventPayloadPart(value=part):
                    parts.append(part.bytes_ or b"")
                    if part.completion_state == "PARTIAL":
                        continue
                    payload = b"".join(parts)
                    parts.clear()
                    if not payload:
                        continue
                    message = decode_control_frame(payload)
                    return AudioFrame(payload) if message is None else ControlFrame(message)
                case ResponseStreamEventModelStreamError(value=error):
                    code = f" ({error.error_code})" if error.error_code else ""
                    raise self._lost(f"the model stream failed{code}: {error.message}")
                case ResponseStreamEventInternalStreamFailure(value=error):
                    raise self._lost(f"SageMaker's stream failed: {error.message}")
                case _:
                    continue  # an event kind newer than this SDK: nothing of ours is in it

    async def close(self) -> None:
        stream, self._stream, self._output = self._stream, None, None
        try:
            if stream is not None:
                await stream.close()
        except (SmithyError, OSError):
            pass  # the stream is already broken: there is nothing left to close cleanly
        finally:
            if self._owned_client is not None:
                await self._owned_client.close()
                self._client = self._owned_client = None

    def _open(self) -> BidirectionalStream:
        if self._stream is None:
            raise RuntimeError("the transport is not connected; call connect() first")
        return self._stream

    async def _output_stream(self) -> EventReceiver[ResponseStreamEvent]:
        """The response stream, which SageMaker opens only once the container has answered."""
        if self._output is None:
            _, self._output = await self._open().await_output()
        return self._output

    def _lost(self, what: str, cause: Exception | None = None) -> ConnectionLostError:
        detail = f": {cause}" if cause is not None else ""
        return ConnectionLostError(f"SageMaker endpoint {self.endpoint_name}: {what}{detail}")
