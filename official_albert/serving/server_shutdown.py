"""A request the server leaves unanswered: the client left (499), or the server's own shutdown cut it (503).

The drain (official_albert.serve: SIGTERM → not ready → 503 for new requests → the received ones finish → close) sets
`ServerState.closing` when it gives up waiting: the server is about to close, and uvicorn cancels the requests still
in flight once its graceful-shutdown time has passed (a body still being uploaded, a model call that never returns).
Such a cancellation is the server's doing, not the client's: counted as the 499 "client closed request", it would hide
a shutdown that cut requests behind clients that hung up, and a 5xx alert would never see it. So a cancellation while
closing is answered 503 with Retry-After (`ShutdownAnswers`: the client reads "retry on another replica", not a
dropped connection or uvicorn's bare 500), counted under that status and in `albert_shutdown_cancels_total`, and
logged at WARNING; a client that went away (ClientDisconnect, or a cancellation outside the close) stays 499 at INFO.
The gRPC transport counts its cancellations the same way (grpc_service: UNAVAILABLE while closing, else CANCELLED).
"""

from __future__ import annotations

import asyncio
import json
import logging

CLIENT_CLOSED = 499  # nginx's "client closed request": the client went away before the answer
SHUTDOWN_CANCELLED = 503  # what the server answers a request its own shutdown cancels (`ShutdownAnswers`)
SHUTDOWN_MESSAGE = "the server shut down before answering this request; retry on another replica."


def closing(state) -> bool:
  """Whether the server's drain has ended and it is closing: a cancellation now is the server's own."""
  return bool(getattr(state, "closing", False))


def unanswered(method: str, path: str, route: str, error: BaseException, state, metrics) -> int:
  """Counts and logs a REST request that ends without an answer of its handler (`error`: ClientDisconnect or
  CancelledError) and returns its status: 503 for a cancellation while the server closes (the shutdown's: counted in
  `metrics.shutdown_cancels` too, logged at WARNING), else 499 (the client left, logged at INFO)."""
  if isinstance(error, asyncio.CancelledError) and closing(state):
    logging.warning("%s %s: cancelled by the server's shutdown before its answer (still in flight when the drain "
                    "ended); answered %d (counted as status %d).", method, path, SHUTDOWN_CANCELLED,
                    SHUTDOWN_CANCELLED)
    metrics.shutdown_cancels.labels(route).inc()
    status = SHUTDOWN_CANCELLED
  else:  # (no latency: the client's time, not the answer's)
    logging.info("%s %s: the client closed the connection before the answer (counted as status %d).", method, path,
                 CLIENT_CLOSED)
    status = CLIENT_CLOSED
  metrics.requests.labels(route, str(status)).inc()
  return status


class ShutdownAnswers:
  """ASGI middleware: a request cancelled while the server closes (`closing`) whose answer has not started gets a 503
  with Retry-After and `{"error": ...}` before the cancellation goes on up (it is never swallowed: uvicorn, seeing
  the answer started, then closes the connection instead of writing its own 500)."""

  def __init__(self, app, state):
    self.app, self.state = app, state

  async def __call__(self, scope, receive, send):
    if scope["type"] != "http":
      await self.app(scope, receive, send)
      return
    started = False

    async def tracked(message):
      nonlocal started
      started = started or message["type"] == "http.response.start"
      await send(message)

    try:
      await self.app(scope, receive, tracked)
    except asyncio.CancelledError:
      if closing(self.state) and not started:
        body = json.dumps({"error": SHUTDOWN_MESSAGE}).encode()
        try:
          await send({"type": "http.response.start", "status": SHUTDOWN_CANCELLED,
                      "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                  (b"retry-after", b"1"), (b"connection", b"close")]})
          await send({"type": "http.response.body", "body": body})
        except Exception:  # (the connection is gone already: nothing to answer)
          logging.debug("the shutdown's 503 could not be sent", exc_info=True)
      raise
