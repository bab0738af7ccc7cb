"""Dynamic batching for the server: requests queue up and run together, grouped by length.

TF Serving's batcher (`max_batch_size`, `batch_timeout_micros`) and Triton's dynamic batcher (max queue delay, queue
policy) are the anchors: the worker takes the first waiting request, then, if others are already waiting, keeps
taking requests until the batch holds `max_batch_size` texts or `batch_timeout_s` has passed since the first one, and
runs them together. A request that finds the server idle (nothing else waiting) runs at once: waiting for company
there only adds the timeout to its latency, and under load the queue refills while the model runs. The texts of the
window are sorted by token count and cut into batches of at most `max_batch_size` (and, with a token budget, of at most
`max_batch_tokens` padded tokens: TEI's), so that each batch is padded to its own longest text, not the window's (a
window of one batch is not counted: its padding is its longest text anyway).
Texts with a second segment (`text_pair`) run apart from single texts (a pipeline call takes pairs for all its texts
or for none), and so do rows of token ids (OIP's `input_word_ids`): the `group`
callback names each row's kind, and one model call holds one kind.

The model runs in one worker thread (the event loop keeps accepting requests and answering health checks meanwhile),
and each request's future gets its own rows back. The queue is bounded (`max_queue` requests waiting): a full queue
refuses at once (`QueueFull`, the server's 503 with Retry-After) instead of growing; a request that waits longer than
its timeout gets `RequestTimeout` (504) and its rows are dropped if they have not run yet. A request whose caller has
gone (timed out, cancelled) leaves the bound at once and costs a window nothing: it neither keeps a live request out
of the queue nor counts against `max_batch_size` when the worker meets it.

One request's failure is its own: a model call that raises is retried one request at a time, so that only the request
that makes the model fail gets the error (the others of its batch get their answers), and a row whose token count
raises fails its request only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np


class QueueFull(Exception):
  """The model's queue holds `max_queue` requests: the client should retry later."""


class RequestTimeout(Exception):
  """The request was not answered within its timeout."""


class Waiting:
  """The requests waiting for a batcher's worker, bounded by `limit`: admitted on submit, gone when the worker takes
  them or their caller gives up (whichever comes first; thread-safe, as the depth-wise worker takes them on its own
  thread). The queue itself is unbounded: a given-up request may still sit in it until the worker passes it by, but
  it no longer counts, so it cannot keep a live request out."""

  def __init__(self, limit: int):
    self.limit = max(1, limit)
    self._ids: set = set()
    self._lock = threading.Lock()

  def admit(self, request) -> bool:
    with self._lock:
      if len(self._ids) >= self.limit:
        return False
      self._ids.add(id(request))
      return True

  def leave(self, request) -> None:
    """(Idempotent: both the worker and a caller giving up call it.)"""
    with self._lock:
      self._ids.discard(id(request))

  def __len__(self) -> int:
    return len(self._ids)


async def queue_and_wait(requests, waiting: Waiting, request, future: asyncio.Future, timeout_s: float,
                         observe_queue: Callable[[int], None]):
  """Puts `request` on `requests` (an unbounded asyncio or thread queue) within the bound `waiting` and waits up to
  `timeout_s` for `future`, the request's answer: the one admission and timeout rule of both batchers (`Batcher`,
  `depthwise_batching.DepthwiseBatcher`), whose workers call `waiting.leave` on each request they take.

  Raises:
    QueueFull: `waiting` is at its bound (the server answers 503 at once rather than queueing without limit).
    RequestTimeout: no answer in time; the future is cancelled, so the worker skips what it has not run yet.
  """
  if not waiting.admit(request):
    raise QueueFull()
  requests.put_nowait(request)
  observe_queue(len(waiting))
  try:
    return await asyncio.wait_for(asyncio.shield(future), timeout=timeout_s)
  except asyncio.TimeoutError:
    future.cancel()
    raise RequestTimeout() from None
  except asyncio.CancelledError:  # (the caller gave up: a gRPC deadline or cancel, a cut at shutdown) — not run
    future.cancel()
    raise
  finally:
    waiting.leave(request)


def _stopped(request) -> None:
  if not request.future.done():
    request.future.set_exception(RuntimeError("the batcher stopped before answering this request (the server is "
                                              "stopping)."))


@dataclasses.dataclass
class _Request:
  texts: List[str]
  pairs: Optional[List[str]]
  future: asyncio.Future


class Batcher:
  """One model's queue and worker. `submit` from the event loop; `start` once the loop runs; `stop` at shutdown.

  Args:
    predict: texts, pairs (or None) → {output name: array with the batch first}; the served model's `predict`.
    token_count: (text, pair or None) → tokens, which order the rows of a window.
    max_batch_size: most texts per model call. batch_timeout_s: the longest a first request waits for company.
    max_queue: most requests waiting. observe_batch / observe_queue: metric callbacks (batch size, queue depth).
    group: (text, pair or None) → an int naming the row's kind (default: 1 with a pair, else 0); rows of different
      kinds never share a model call (the served model's `group`: texts, pairs, token ids).
    max_batch_tokens: most padded tokens per model call (its rows × its longest row's tokens), TEI's
      `--max-batch-tokens`: a window of long texts runs as several smaller calls, so memory and a call's latency stay
      bounded whatever the texts' lengths; a row longer than the budget runs alone. None: no budget.
  """

  def __init__(self, predict: Callable[..., Dict[str, np.ndarray]], token_count: Callable[..., int],
               max_batch_size: int, batch_timeout_s: float, max_queue: int,
               observe_batch: Callable[[int], None] = lambda n: None,
               observe_queue: Callable[[int], None] = lambda n: None,
               group: Callable[..., int] = lambda text, pair: int(pair is not None),
               max_batch_tokens: Optional[int] = None):
    self._predict, self._token_count, self._group = predict, token_count, group
    self.max_batch_tokens = max_batch_tokens if max_batch_tokens and max_batch_tokens > 0 else None
    self.max_batch_size, self.batch_timeout_s = max(1, max_batch_size), max(0.0, batch_timeout_s)
    self._queue: asyncio.Queue = asyncio.Queue()  # (bounded by `_waiting`)
    self._waiting = Waiting(max_queue)
    self._observe_batch, self._observe_queue = observe_batch, observe_queue
    # One thread: the model runs one batch at a time (TensorFlow uses the cores inside a call).
    self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="albert-batch")
    self._task: Optional[asyncio.Task] = None
    self._held: List[_Request] = []  # the window the worker has taken (answered by `stop` if it ends first)

  def start(self) -> None:
    self._task = asyncio.get_running_loop().create_task(self._run())

  async def stop(self) -> None:
    if self._task is not None:
      self._task.cancel()
      try:
        await self._task
      except asyncio.CancelledError:
        pass
    # What the worker held or left queued is answered now rather than at its timeout (the server drains first, so
    # that nothing is left here; a library caller's stop may find some).
    for request in self._held:
      _stopped(request)
    while not self._queue.empty():
      request = self._queue.get_nowait()
      self._waiting.leave(request)
      _stopped(request)
    # (the model call in progress ends in a thread: the loop meanwhile answers what the shutdown cancelled,
    # server_shutdown, as DepthwiseBatcher.stop joins its worker)
    await asyncio.get_running_loop().run_in_executor(None, lambda: self._executor.shutdown(wait=True))

  def depth(self) -> int:
    return len(self._waiting)

  async def run_direct(self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
    """Runs one batch on the worker thread, outside the queue (the warm-up batch before the server is ready)."""
    return await asyncio.get_running_loop().run_in_executor(self._executor, self._predict, list(texts),
                                                            None if pairs is None else list(pairs))

  async def submit(self, texts: Sequence[str], pairs: Optional[Sequence[str]],
                   timeout_s: float) -> Dict[str, np.ndarray]:
    """The request's outputs (its rows only). Raises QueueFull, RequestTimeout, or the model's error."""
    future = asyncio.get_running_loop().create_future()
    request = _Request(list(texts), None if pairs is None else list(pairs), future)
    return await queue_and_wait(self._queue, self._waiting, request, future, timeout_s, self._observe_queue)

  async def _take(self, timeout_s: Optional[float]) -> Optional[_Request]:
    """The next request whose caller still waits (None: none within `timeout_s`; 0: only what is queued now; None
    as the timeout: wait for one). Given-up requests met on the way are dropped."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
      remaining = None if deadline is None else deadline - time.monotonic()
      try:
        if remaining is None:
          request = await self._queue.get()
        elif remaining <= 0:
          request = self._queue.get_nowait()
        else:
          request = await asyncio.wait_for(self._queue.get(), remaining)
      except (asyncio.QueueEmpty, asyncio.TimeoutError):
        return None
      self._waiting.leave(request)
      if not request.future.done():
        return request

  async def _collect(self) -> List[_Request]:
    """The first waiting request, then more until `max_batch_size` texts or the batch timeout."""
    window: List[_Request] = []
    self._held = window
    window.append(await self._take(None))
    rows = len(window[0].texts)
    # Company is waited for only when some is already waiting: an idle server answers a lone request at once (at
    # concurrency 1 the timeout would be added to every answer and no batch would ever form); under load the queue
    # refills while the model runs, and the window fills up to max_batch_size or the timeout as TF Serving's does.
    deadline = time.monotonic() + (self.batch_timeout_s if len(self._waiting) else 0.0)
    while rows < self.max_batch_size:
      request = await self._take(max(0.0, deadline - time.monotonic()))
      if request is None:
        break
      window.append(request)
      rows += len(request.texts)
    self._observe_queue(len(self._waiting))
    return [r for r in window if not r.future.done()]

  async def _run(self) -> None:
    loop = asyncio.get_running_loop()
    while True:
      window = await self._collect()
      if not window:
        continue
      try:
        answers = await loop.run_in_executor(self._executor, self._run_window, window)
      except Exception as e:  # any model error goes to the requests of the window, not the worker
        logging.exception("batch failed")
        answers = [e] * len(window)
      for request, answer in zip(window, answers):
        if request.future.done():
          continue
        if isinstance(answer, Exception):
          request.future.set_exception(answer)
        else:
          request.future.set_result(answer)
      self._held = []

  def _run_window(self, window: List[_Request]) -> List[object]:
    """(Worker thread.) Each request's outputs, or the exception of the batch it ran in."""
    # Every row: (kind, tokens, request index, row index); sorted so that a batch holds texts of similar length.
    # Tokens are counted only when the window may be cut into several batches (by size, or by the token budget): one
    # batch is padded to its longest row whatever their order, and counting tokenizes every text (which a
    # SavedModel's graph does again) on the way of every lone request.
    rows = []
    failed: Dict[int, Exception] = {}
    total = sum(len(request.texts) for request in window)
    cut = total > self.max_batch_size or (self.max_batch_tokens is not None and total > 1)
    for i, request in enumerate(window):
      try:  # (a row the tokenizer cannot count fails its own request, not the window)
        pairs = request.pairs if request.pairs is not None else [None] * len(request.texts)
        rows.extend([(self._group(text, pair), self._token_count(text, pair) if cut else 0, i, j)
                     for j, (text, pair) in enumerate(zip(request.texts, pairs))])
      except Exception as e:
        logging.exception("counting the tokens of a request failed")
        failed[i] = e
    rows.sort()
    results: List[Dict[str, List[object]]] = [{} for _ in window]
    dtypes: Dict[str, np.dtype] = {}
    for part in self._calls(rows):
      try:
        self._run_part(window, part, results, dtypes)
      except Exception as e:
        requests = sorted({i for _, _, i, _ in part})
        if len(requests) == 1:
          failed[requests[0]] = e
          continue
        # One request may be the batch's culprit (a text the model cannot take): each runs again alone, so that
        # only the ones that fail by themselves get an error.
        logging.warning("a batch of %d requests failed (%s: %s); running them one by one", len(requests),
                        type(e).__name__, e)
        for i in requests:
          try:
            self._run_part(window, [r for r in part if r[2] == i], results, dtypes)
          except Exception as e_i:  # (this request fails by itself: it alone gets the error)
            failed[i] = e_i
    return [failed[i] if i in failed else {name: np.asarray(values, dtypes[name]) for name, values in out.items()}
            for i, out in enumerate(results)]

  def _calls(self, rows: List[tuple]) -> List[List[tuple]]:
    """The sorted `rows` cut into model calls: one kind each, at most `max_batch_size` rows and, with a token
    budget, at most `max_batch_tokens` padded tokens (a row over the budget alone)."""
    calls: List[List[tuple]] = []
    for row in rows:  # (sorted by kind, then tokens: the row joining a call is its longest)
      part = calls[-1] if calls else None
      if (part is None or part[0][0] != row[0] or len(part) == self.max_batch_size
          or (self.max_batch_tokens is not None and (len(part) + 1) * row[1] > self.max_batch_tokens)):
        calls.append([row])
      else:
        part.append(row)
    return calls

  def _run_part(self, window: List[_Request], part: List[tuple], results: List[Dict[str, List[object]]],
                dtypes: Dict[str, np.dtype]) -> None:
    """(Worker thread.) One model call on the rows `part` (one kind), their outputs written into `results`; raises
    the model's error, writing nothing."""
    texts = [window[i].texts[j] for _, _, i, j in part]
    pairs = [window[i].pairs[j] for _, _, i, j in part] if window[part[0][2]].pairs is not None else None
    self._observe_batch(len(part))
    outputs = self._predict(texts, pairs)
    for name, values in outputs.items():
      dtypes[name] = values.dtype
      for k, (_, _, i, j) in enumerate(part):
        results[i].setdefault(name, [None] * len(window[i].texts))[j] = values[k]
