"""The server's depth-wise batcher: requests' texts enter free slots of `DepthwiseSlots` between block iterations.

The dynamic batcher (serving.batching) runs a window of requests as model calls and takes the next window only when
the calls are done; with early exit, a call still waits for its slowest row. Here the worker thread loops over steps
of `DepthwiseSlots`: before each step it fills the free slots from the queue (oldest request first, its texts in
order; a request's texts may spread over several steps), runs the step, and answers a request as soon as its last
text has left the block. Under load the block therefore always runs on `slots` rows, whatever their iterations.

Same interface and limits as `Batcher` (`submit`, `start`, `stop`, `depth`): a full queue refuses at once
(`QueueFull`), a request not answered within its timeout gets `RequestTimeout` (its texts not yet admitted are
dropped; admitted ones finish and are discarded). A failed step answers its rows' requests with the error and empties
the slots — rows that had already left in an earlier length bucket of that step are answered as usual
(`depthwise_slots.StepFailed`) — and the worker keeps serving; so it does after any other error of its own (the
requests in flight get it). `stop` ends the worker and answers what it still held or found queued with an error
(the server drains before it stops, so that none is left there), leaving the slots empty.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import queue
import threading
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from official_albert.serving.batching import queue_and_wait
from official_albert.serving.batching import Waiting
from official_albert.serving.depthwise_slots import DepthwiseSlots
from official_albert.serving.depthwise_slots import Finished
from official_albert.serving.depthwise_slots import StepFailed

_IDLE_POLL_S = 0.1  # how often an idle worker looks at the stop flag


def _stopped() -> RuntimeError:
  return RuntimeError("the depth-wise batcher stopped before answering this request (the server is stopping).")


class _Request:
  """One request: its texts, its future (on the event loop), and the rows answered so far."""

  def __init__(self, texts: List[str], pairs: Optional[List[str]], future: asyncio.Future,
               loop: asyncio.AbstractEventLoop):
    self.texts, self.pairs, self.future, self.loop = texts, pairs, future, loop
    self.next_text = 0  # the first text not yet in a slot
    self.logits: List[Optional[np.ndarray]] = [None] * len(texts)
    self.exits: List[int] = [0] * len(texts)
    self.remaining = len(texts)
    self.failed = False

  def abandoned(self) -> bool:
    return self.failed or self.future.done()  # (done: timed out and cancelled on the loop)

  def answer(self, result=None, error: Optional[Exception] = None) -> None:
    """Sets the future on its loop (from the worker thread)."""
    def settle():
      if self.future.done():
        return
      if error is not None:
        self.future.set_exception(error)
      else:
        self.future.set_result(result)
    self.loop.call_soon_threadsafe(settle)


class DepthwiseBatcher:
  """One exit-head classifier's queue and depth-wise worker thread (module docstring).

  Args:
    slots: the model's `DepthwiseSlots`.
    tokenize: texts → their token ids (the served model's tokenizer).
    finish: (logits [n, K], exit iterations [n]) → the request's output arrays (as the served model's `predict`).
    max_queue: most requests waiting. observe_batch / observe_queue: metric callbacks (rows per step, queue depth).
  """

  def __init__(self, slots: DepthwiseSlots, tokenize: Callable[[Sequence[str]], List[List[int]]],
               finish: Callable[[np.ndarray, np.ndarray], Dict[str, np.ndarray]], max_queue: int,
               observe_batch: Callable[[int], None] = lambda n: None,
               observe_queue: Callable[[int], None] = lambda n: None):
    self.slots, self._tokenize, self._finish = slots, tokenize, finish
    self._queue: queue.Queue = queue.Queue()  # (bounded by `_waiting`)
    self._waiting = Waiting(max_queue)
    self._observe_batch, self._observe_queue = observe_batch, observe_queue
    self._stopping = threading.Event()
    self._thread: Optional[threading.Thread] = None
    self.steps = 0  # block steps run, and rows they carried (the mean slot occupancy is rows / steps)
    self.rows = 0

  def start(self) -> None:
    self._thread = threading.Thread(target=self._run, name="albert-depthwise", daemon=True)
    self._thread.start()

  async def stop(self) -> None:
    self._stopping.set()
    if self._thread is not None:
      await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
    self._fail_queued()  # (queued after the worker's last look, or with no worker started)

  def depth(self) -> int:
    return len(self._waiting)

  async def submit(self, texts: Sequence[str], pairs: Optional[Sequence[str]],
                   timeout_s: float) -> Dict[str, np.ndarray]:
    """The request's outputs. Raises QueueFull, RequestTimeout, or the model's error."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    request = _Request(list(texts), None if pairs is None else list(pairs), future, loop)
    if request.pairs is not None and len(request.pairs) != len(request.texts):
      raise ValueError(f"{len(request.pairs)} pairs for {len(request.texts)} texts: give one pair per text, or none.")
    if not request.texts:
      return self._finish(np.zeros((0, self.slots.num_outputs), np.float32), np.zeros((0,), np.int64))
    # A timed-out request's cancelled future: the worker admits none of its texts that still wait.
    return await queue_and_wait(self._queue, self._waiting, request, future, timeout_s, self._observe_queue)

  # ------------------------------------------------------------------------------------------- the worker thread
  def _run(self) -> None:
    admitting: collections.deque = collections.deque()  # requests with texts not yet in a slot, oldest first
    tokens: Dict[int, List[List[int]]] = {}  # id(request) → token ids of its texts (and pairs after them)
    while not self._stopping.is_set():
      try:
        self._serve(admitting, tokens)
      except Exception as e:  # (a bug of the worker's own: its requests get the error, and the worker goes on serving)
        logging.exception("the depth-wise worker failed")
        self._fail(self.slots.clear() + [(r, None) for r in admitting], e)
        admitting.clear()
        tokens.clear()
    self._fail(self.slots.clear() + [(r, None) for r in admitting], _stopped())
    self._fail_queued()

  def _fail_queued(self) -> None:
    """Answers every request still queued with the stop's error (the worker's end, and `stop` after it)."""
    while True:
      try:
        request = self._queue.get_nowait()
      except queue.Empty:
        return
      self._waiting.leave(request)
      self._fail([(request, None)], _stopped())

  def _serve(self, admitting: collections.deque, tokens: Dict[int, List[List[int]]]) -> None:
    """One turn of the worker: fill the free slots, run a step, answer the rows that left."""
    if not self._admit(admitting, tokens):
      return
    try:
      finished = self.slots.step()
    except StepFailed as e:  # rows that left before the failing bucket are answered; every other row's request
      logging.exception("depth-wise step failed")  # gets the error (its rows out of the slots); the worker goes on
      self._settle(e.finished)
      self._fail(self.slots.clear(), e.error)
      return
    except Exception as e:
      logging.exception("depth-wise step failed")
      self._fail(self.slots.clear(), e)
      return
    self.steps += 1
    self._settle(finished)

  def _settle(self, finished: List[Finished]) -> None:
    """Records the rows that left; answers each request whose last row this was."""
    for row in finished:
      request, j = row.owner
      request.logits[j], request.exits[j] = row.logits, row.exit_iteration
      request.remaining -= 1
      if request.remaining == 0 and not request.abandoned():
        self._answer(request)

  def _fail(self, owners: List[tuple], error: Exception) -> None:
    """Answers the requests of `owners` (rows dropped from the slots) with `error`, each once."""
    for request, _ in owners:
      if not request.failed:
        request.failed = True
        request.answer(error=error)

  def _admit(self, admitting: collections.deque, tokens: Dict[int, List[List[int]]]) -> bool:
    """Fills free slots from the queue; True when some row is in flight (a step is due)."""
    while self.slots.free() > 0:
      if not admitting:
        try:  # an idle worker blocks (briefly, to see the stop flag); a busy one only takes what waits
          block = self.slots.occupied() == 0
          request = self._queue.get(timeout=_IDLE_POLL_S) if block else self._queue.get_nowait()
        except queue.Empty:
          break
        self._waiting.leave(request)
        self._observe_queue(len(self._waiting))
        if request.abandoned():
          continue
        try:
          ids = self._tokenize(request.texts)
          pair_ids = self._tokenize(request.pairs) if request.pairs is not None else [None] * len(ids)
          pair_ids = [p or None for p in pair_ids]  # a pair with no pieces packs one segment, as `classify` packs it
        except Exception as e:  # a text the tokenizer refuses answers its own request only
          request.failed = True
          request.answer(error=e)
          continue
        tokens[id(request)] = list(zip(ids, pair_ids))
        admitting.append(request)
      request = admitting[0]
      if request.abandoned():
        admitting.popleft()
        tokens.pop(id(request), None)
        continue
      ids_a, ids_b = tokens[id(request)][request.next_text]
      self.slots.add((request, request.next_text), self.slots.pack(ids_a, ids_b))
      request.next_text += 1
      if request.next_text == len(request.texts):
        admitting.popleft()
        tokens.pop(id(request), None)
    occupied = self.slots.occupied()
    if occupied:
      self._observe_batch(occupied)
      self.rows += occupied
    return occupied > 0

  def _answer(self, request: _Request) -> None:
    try:
      result = self._finish(np.stack(request.logits), np.asarray(request.exits, np.int64))
    except Exception as e:
      request.answer(error=e)
      return
    request.answer(result)
