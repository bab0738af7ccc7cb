r"""The inference server: every folder the pipelines read, over HTTP and gRPC (docs/serving.md).

  python -m official_albert.serve --model_dir=/tmp/sst2 --model_name=sst2 --port=8080
  python -m official_albert.serve --model_dir=/tmp/sst2_sm --model_name=sst2 \
      --model_dir=/tmp/minilm_ov --model_name=minilm --max_batch_size=32 --batch_timeout_ms=5

Speaks the Open Inference Protocol v2 (`/v2/...`), OpenAI's `/v1/embeddings`, TEI's `/rerank` and TF Serving's REST
`/v1/models/{name}:predict` — and, with `--grpc_port`, OIP over gRPC (`inference.GRPCInferenceService`,
serving.grpc_service) — with dynamic batching (`--max_batch_size`, `--batch_timeout_ms`, `--max_queue`) and
Prometheus `/metrics` (serving.http_app). Start-up loads every folder and runs one warm-up batch through each before
`/v2/health/ready` answers 200; a folder that cannot load stops start-up with an error naming it (exit 1).

SIGTERM drains as Kubernetes expects: the server turns not ready, answers new requests 503 (gRPC: UNAVAILABLE) for
`--drain_seconds`, finishes every request it already received on either transport, then closes and exits 0. A second
SIGTERM, or a SIGINT at any time, stops at once (`stop_at_once`): the requests in flight are cut, and the exit status
is 128 + the signal's number (143, 130).

Built on FastAPI + uvicorn + prometheus-client, the `serve` extra (requirements-serve.txt); why not KServe's SDK:
docs/design.md.
"""

import asyncio
import logging
import math
import os
import re
import signal
import sys
import time

from absl import app
from absl import flags

from official_albert import cli

# What a --model_name may hold: it is a path segment of every route (/v2/models/{name}/infer,
# /v1/models/{name}:predict), so no "/" (nor ":", "%", spaces), and not "." or ".." (which clients fold away).
MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")

# --depthwise_iterations' default: measured on the topic model (docs/serving.md, "Several iterations per step").
DEFAULT_DEPTHWISE_ITERATIONS = 3
# The flags that apply "With --depthwise_batching:" only.
DEPTHWISE_FLAGS = ("slots", "depthwise_runtime", "length_buckets", "depthwise_iterations")


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags (in a function, so that importing the module never clashes with other binaries)."""
  flags.DEFINE_multi_string("model_dir", None, "A folder to serve: a model directory, a SavedModel, an OpenVINO or "
                            "LiteRT export (repeat for several models).", flag_values=fv)
  flags.DEFINE_multi_string("model_name", None, "The name of each --model_dir in the routes, in the same order.",
                            flag_values=fv)
  flags.DEFINE_multi_string("model_head", None, "NAME=HEAD: the head of model NAME's directory when it cannot be "
                            "read from the folder: token_classifier (a native checkpoint's token classifier stores "
                            "the same variables as a sequence classifier), multiple_choice (likewise), fill_mask (a "
                            "pretrainer, else served as an encoder); also classifier, encoder, question_answering.",
                            flag_values=fv)
  flags.DEFINE_string("host", "127.0.0.1", "Address to listen on (0.0.0.0 in a container).", flag_values=fv)
  flags.DEFINE_integer("port", 8080, "HTTP port.", lower_bound=0, upper_bound=65535, flag_values=fv)
  flags.DEFINE_integer("grpc_port", None, "Also serve the Open Inference Protocol over gRPC on this port "
                       "(inference.GRPCInferenceService, on --host); default: HTTP only.", lower_bound=0,
                       upper_bound=65535, flag_values=fv)
  flags.DEFINE_integer("max_batch_size", 32, "Most texts per model call.", lower_bound=1, flag_values=fv)
  flags.DEFINE_integer("max_batch_tokens", 0, "Most padded tokens per model call (texts x the longest one's tokens; "
                       "TEI's --max-batch-tokens): long texts run in smaller calls. 0: no budget.", flag_values=fv)
  flags.DEFINE_float("batch_timeout_ms", 5.0, "Longest a request waits for others to share its batch.",
                     lower_bound=0.0, flag_values=fv)
  flags.DEFINE_integer("max_queue", 256, "Most requests waiting per model; more are refused 503 with Retry-After.",
                       lower_bound=1, flag_values=fv)
  flags.DEFINE_float("drain_seconds", 5.0, "After SIGTERM: how long new requests are refused 503 (while the ones "
                     "received finish) before the server closes.", lower_bound=0.0, flag_values=fv)
  flags.DEFINE_float("request_timeout_s", 60.0, "A request not answered in this time gets 504.", flag_values=fv)
  flags.DEFINE_integer("max_inputs", None, "Most texts in one request (default: 4 x --max_batch_size); more: 413.",
                       lower_bound=1, flag_values=fv)
  flags.DEFINE_integer("max_text_chars", 100_000, "Longest text in characters; longer: 413.", lower_bound=1,
                       flag_values=fv)
  flags.DEFINE_integer("patience", None, "Early exit of classifier model directories with exit heads (as "
                       "pipelines.classify's patience).", flag_values=fv)
  flags.DEFINE_float("exit_threshold", None, "With --patience: the score change a regression head's exit rule counts "
                     "as unchanged (pipelines.classify's exit_threshold; default 0.1); other heads exit on their "
                     "label.", flag_values=fv)
  flags.DEFINE_boolean("depthwise_batching", False, "Depth-wise continuous batching of classifier model directories "
                       "with exit heads (docs/serving.md): texts join and leave the shared block between iterations, "
                       "at --patience (none: full depth); other models keep dynamic batching.", flag_values=fv)
  flags.DEFINE_integer("slots", 32, "With --depthwise_batching: most texts in the block at once.", flag_values=fv)
  flags.DEFINE_enum("depthwise_runtime", "tensorflow", ["tensorflow", "openvino"], "With --depthwise_batching: "
                    "run the block in TensorFlow, or converted to OpenVINO at start-up (f32; the openvino extra).",
                    flag_values=fv)
  flags.DEFINE_integer("depthwise_iterations", DEFAULT_DEPTHWISE_ITERATIONS, "With --depthwise_batching: the most "
                       "iterations of the block one step runs before texts may join, capped at a model's layer count "
                       "(docs/serving.md: larger spreads a step's fixed cost, smaller admits sooner; the answers are "
                       "the same).", flag_values=fv)
  flags.DEFINE_list("length_buckets", None, "With --depthwise_batching: the packed lengths texts are grouped by, one "
                    "block call per group and step (default: powers of two from 16 up to the served length; 'none': "
                    "one group at the served length).", flag_values=fv)
  # TF Serving's names and meaning: 0 is TensorFlow's choice (one thread per core, or TF_NUM_INTRAOP_THREADS /
  # TF_NUM_INTEROP_THREADS from the environment).
  flags.DEFINE_integer("tensorflow_intra_op_parallelism", 0, "Threads one TensorFlow op may use (0: TensorFlow's "
                       "choice). 1 with --tensorflow_inter_op_parallelism=1 halves a small model's one-text latency "
                       "(docs/serving.md, Threads).", flag_values=fv)
  flags.DEFINE_integer("tensorflow_inter_op_parallelism", 0, "Threads that run independent TensorFlow ops at once "
                       "(0: TensorFlow's choice).", flag_values=fv)
  flags.DEFINE_boolean("frozen_weight_kernels", True, "TensorFlow's oneDNN MatMul kernels reorder each weight once "
                       "and keep it (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1; a server never changes its weights): "
                       "albert-base bf16 1.4x on an AMX Xeon (docs/serving.md). A value of the variable already in "
                       "the environment is kept.", flag_values=fv)
  flags.mark_flags_as_required(["model_dir", "model_name"], flag_values=fv)


def parse_model_heads(model_heads, model_names):
  """{name: head} of the --model_head flags ("NAME=HEAD"); raises ModelLoadError naming a bad one."""
  from official_albert.serving import served_heads  # noqa: PLC0415 (binary: the serving modules after launch)
  heads = {}
  for entry in model_heads or []:
    name, _, head = entry.partition("=")
    if name not in model_names or head not in served_heads.HEADS:
      raise served_heads.ModelLoadError(f"--model_head={entry}: give NAME=HEAD with NAME one of {model_names} and "
                                        f"HEAD one of {list(served_heads.HEADS)}.")
    if heads.get(name, head) != head:  # (the last one won, silently: the other head was served)
      raise served_heads.ModelLoadError(f"--model_head={name}={heads[name]} and --model_head={entry}: give model "
                                        f"{name} one head.")
    heads[name] = head
  return heads


def configure_tensorflow_threads(intra_op: int, inter_op: int) -> None:
  """Sets TensorFlow's two thread pools as TF Serving's flags of the same names do (0 leaves TensorFlow's choice).

  Must run before the process's first TensorFlow op (the pools are made then); raises ModelLoadError for a negative
  count."""
  from official_albert.serving import served_model  # noqa: PLC0415 (binary: TF after launch)
  for name, value in (("intra", intra_op), ("inter", inter_op)):
    if value < 0:
      raise served_model.ModelLoadError(f"--tensorflow_{name}_op_parallelism={value}: give 0 (TensorFlow's choice) "
                                        "or a thread count.")
  import tensorflow as tf  # noqa: PLC0415 (binary: TF after launch)
  if intra_op:
    tf.config.threading.set_intra_op_parallelism_threads(intra_op)
  if inter_op:
    tf.config.threading.set_inter_op_parallelism_threads(inter_op)
  logging.info("TensorFlow threads: intra-op %s, inter-op %s", intra_op or "TensorFlow's choice",
               inter_op or "TensorFlow's choice")


def configure_frozen_weight_kernels(enabled: bool, environ=None) -> None:
  """Turns TensorFlow's frozen-weight oneDNN kernels on (or off) for this serving process.

  Must run before the first model loads: TF reads the variable when it builds a kernel. The variable already set in
  the environment wins (logged), so an operator's `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=0` is never overridden. Safe here
  and nowhere that trains: every served model's weights are read once and never assigned
  (`precision.check_weights_may_change` is why training refuses the variable)."""
  from official_albert import precision  # noqa: PLC0415 (binary: TF after launch)
  environ = os.environ if environ is None else environ
  name = precision.FROZEN_WEIGHTS_ENV
  if name in environ:
    logging.info("%s=%r from the environment (--frozen_weight_kernels not applied)", name, environ[name])
    return
  environ[name] = "1" if enabled else "0"
  logging.info("Frozen-weight oneDNN kernels: %s (%s=%s)", "on" if enabled else "off", name, environ[name])


def load_models(model_dirs, model_names, patience=None, depthwise_slots=None, depthwise_runtime="tensorflow",
                length_buckets=None, heads=None,
                depthwise_iterations=DEFAULT_DEPTHWISE_ITERATIONS, exit_threshold=None):
  """{name: ServedModel}, each loaded and warmed up by one batch; raises ModelLoadError naming the folder.

  `depthwise_slots`: serve every classifier depth-wise over that many slots on `depthwise_runtime`, texts grouped
  by `length_buckets`, at most `depthwise_iterations` per step (capped at each model's layer count: the default 3
  serves a 1- or 2-layer model too; encoders keep dynamic batching). `heads`:
  {name: head} for folders whose head is named. `exit_threshold`: a regression head's exit rule at `patience`."""
  from official_albert.serving import served_model  # noqa: PLC0415 (binary: TF after launch)
  if len(model_dirs) != len(model_names):
    raise served_model.ModelLoadError(f"{len(model_dirs)} --model_dir but {len(model_names)} --model_name; give one "
                                      "name per folder, in the same order.")
  if len(set(model_names)) != len(model_names):
    raise served_model.ModelLoadError(f"--model_name: names repeat in {model_names}; each model needs its own.")
  for name in model_names:  # (before any folder loads: a name no route reaches is a start-up error, not a 404 later)
    if not MODEL_NAME.fullmatch(name):
      raise served_model.ModelLoadError(f"--model_name={name!r}: a model's name is part of its routes' paths; use "
                                        "letters, digits, '_', '.' and '-' (starting with a letter, digit or '_').")
  models = {}
  for folder, name in zip(model_dirs, model_names):
    started = time.monotonic()
    model = served_model.ServedModel(name, folder, patience=patience, head=(heads or {}).get(name),
                                     exit_threshold=exit_threshold)
    try:
      model.warm_up()
    except Exception as e:
      raise served_model.ModelLoadError(f"{folder}: the warm-up batch failed: {type(e).__name__}: {e}") from e
    if depthwise_slots and model.head == served_model.CLASSIFIER:
      model.enable_depthwise(depthwise_slots, depthwise_runtime, length_buckets, depthwise_iterations)
    elif depthwise_slots:
      logging.info("%s (%s %s): dynamic batching (depth-wise batching is for classifiers with exit heads)", name,
                   model.backend, model.head)
    logging.info("Loaded %s (%s %s) from %s in %.1f s", name, model.backend, model.head, folder,
                 time.monotonic() - started)
    models[name] = model
  return models


async def drain_then_exit(server, state, drain_seconds: float, hard_limit_s: float) -> None:
  """After SIGTERM (`state.draining` set: not ready, new requests 503 in http_app's middleware): asks `server` to exit
  once `drain_seconds` passed and no request is in flight, or once `hard_limit_s` passed (a stuck request never keeps
  the process alive). Sets `state.closing` first: what is still in flight is then cancelled by the server itself
  (uvicorn, after its graceful-shutdown time), and answered and counted as the shutdown's (serving.server_shutdown:
  503), not as clients that went away (499)."""
  started = time.monotonic()
  logging.info("SIGTERM: draining (%d requests in flight; refusing new ones for %.1f s)", state.in_flight,
               drain_seconds)
  while time.monotonic() - started < hard_limit_s:
    if time.monotonic() - started >= drain_seconds and state.in_flight == 0:
      break
    await asyncio.sleep(0.05)
  if state.in_flight:
    logging.warning("Drain ended after %.1f s with %d requests in flight; closing: those still unanswered when the "
                    "server's graceful-shutdown time (--request_timeout_s) ends are cut (answered 503).",
                    time.monotonic() - started, state.in_flight)
  else:
    logging.info("Drained after %.1f s; closing.", time.monotonic() - started)
  state.closing = True
  server.should_exit = True


def listen_address(host: str, port: int) -> str:
  """"host:port" as gRPC and URLs take it: an IPv6 address in brackets ("[::1]:8081"; "::1:8081" is no address)."""
  return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def stop_at_once(sig: int, in_flight: int) -> None:
  """Ends the process now (a second SIGTERM, or SIGINT): exit status 128 + `sig`, as a shell reports a process the
  signal killed.

  Why not uvicorn's own force_exit: it skips the app's shutdown (the gRPC server is not stopped) and returns to an
  interpreter exit that joins the batcher's worker thread, so a model call in flight still held the process for as
  long as it ran (seconds for a long batch; without end for a stuck one). Ending here cuts every request in flight
  on both transports: their clients see the connection close (HTTP) or UNAVAILABLE (gRPC)."""
  logging.warning("%s: stopping at once; %d requests in flight are cut.", signal.Signals(sig).name, in_flight)
  for handler in logging.getLogger().handlers:
    handler.flush()
  os._exit(128 + sig)


def draining_server(server_class, config, state, drain_seconds: float, hard_limit_s: float):
  """A `server_class` (uvicorn.Server) on `config` whose first SIGTERM drains (`drain_then_exit`) instead of closing
  at once, and whose second SIGTERM, or a SIGINT, stops at once (`stop_at_once`)."""
  drains = []  # a reference to the drain task, so that it is not collected while it runs

  class DrainingServer(server_class):

    def handle_exit(self, sig, frame):
      if state.draining or sig == signal.SIGINT:
        stop_at_once(sig, state.in_flight)
      try:
        loop = asyncio.get_running_loop()
      except RuntimeError:  # not serving (yet, or any more): uvicorn's own handling
        loop = None
      if sig == signal.SIGTERM and loop is not None:
        state.draining = True  # (not recorded as uvicorn's captured signal, so it is not raised again at exit)
        loop.call_soon_threadsafe(lambda: drains.append(loop.create_task(
            drain_then_exit(self, state, drain_seconds, hard_limit_s))))
        return
      super().handle_exit(sig, frame)

  return DrainingServer(config)


def check_flags(fv: flags.FlagValues) -> None:
  """Raises app.UsageError naming the depth-wise flags given without --depthwise_batching: they were accepted and
  ignored (plain dynamic batching on TensorFlow, without a word), as --dtype is refused for an OpenVINO export; and
  a negative --max_batch_tokens, or one given with --depthwise_batching (which has no such budget); a
  --request_timeout_s of 0 or less, a --grpc_port equal to --port, and an --exit_threshold without --patience or
  not above 0. (The other limits' ranges are the flags'
  bounds.)"""
  given = [f"--{name}" for name in DEPTHWISE_FLAGS if fv[name].present]
  if given and not fv.depthwise_batching:
    raise app.UsageError(f"{', '.join(given)}: only with --depthwise_batching (depth-wise batching of classifiers "
                         "with exit heads); add --depthwise_batching, or leave them out for dynamic batching.")
  if fv.request_timeout_s <= 0:  # (every request was answered 504)
    raise app.UsageError(f"--request_timeout_s={fv.request_timeout_s}: give a time in seconds above 0.")
  if fv.grpc_port and fv.grpc_port == fv.port:
    raise app.UsageError(f"--grpc_port={fv.grpc_port} is --port too: give gRPC a port of its own (or leave the "
                         "flag out for HTTP only).")
  if fv.exit_threshold is not None and not fv.patience:  # (it would be accepted and do nothing)
    raise app.UsageError(f"--exit_threshold={fv.exit_threshold} is the exit rule of early exit: give --patience too, "
                         "or leave --exit_threshold out.")
  if fv.exit_threshold is not None and not (math.isfinite(fv.exit_threshold) and fv.exit_threshold > 0):
    raise app.UsageError(f"--exit_threshold={fv.exit_threshold}: give a finite score change above 0.")
  if fv.max_batch_tokens < 0 or (fv.max_batch_tokens and fv.depthwise_batching):
    raise app.UsageError(f"--max_batch_tokens={fv.max_batch_tokens}: give 0 (no budget) or the most padded tokens per "
                         "model call of dynamic batching; not with --depthwise_batching (its --slots bound a step).")


def main(argv, fv: flags.FlagValues = flags.FLAGS):
  del argv
  check_flags(fv)
  from official_albert.serving import served_model  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.serving.export_folder import install_hint  # noqa: PLC0415 (binary: TF after launch)
  try:
    import uvicorn  # noqa: PLC0415 (optional extra)

    from official_albert.serving import http_app  # noqa: PLC0415 (optional extra)
  except ImportError as e:  # a pip user has no requirements file: the message names the extra as well
    message = str(e) if "official-albert[serve]" in str(e) else (
        f"the server needs FastAPI, uvicorn and prometheus-client: {install_hint('serve')}. ({e})")
    sys.exit(f"albert-serve: {message}")
  try:
    configure_frozen_weight_kernels(fv.frozen_weight_kernels)
    configure_tensorflow_threads(fv.tensorflow_intra_op_parallelism, fv.tensorflow_inter_op_parallelism)
    if fv.slots < 1:
      raise served_model.ModelLoadError(f"--slots={fv.slots}: give at least 1.")
    if fv.depthwise_iterations < 1:
      raise served_model.ModelLoadError(f"--depthwise_iterations={fv.depthwise_iterations}: give at least 1.")
    buckets = fv.length_buckets
    if buckets is not None:
      try:
        buckets = [] if [b.lower() for b in buckets] == ["none"] else [int(b) for b in buckets]
      except ValueError:
        raise served_model.ModelLoadError(f"--length_buckets={','.join(buckets)}: give token counts (e.g. 32,64) "
                                          "or none.") from None
    models = load_models(fv.model_dir, fv.model_name, fv.patience, fv.slots if fv.depthwise_batching else None,
                         fv.depthwise_runtime, buckets, parse_model_heads(fv.model_head, fv.model_name),
                         fv.depthwise_iterations, fv.exit_threshold)
  except served_model.ModelLoadError as e:
    sys.exit(f"albert-serve: cannot start: {e}")
  state = http_app.ServerState()
  settings = http_app.Settings(fv.max_batch_size, fv.batch_timeout_ms, fv.max_queue, fv.request_timeout_s,
                               fv.max_inputs, fv.max_text_chars, max_batch_tokens=fv.max_batch_tokens)
  grpc_address = None if fv.grpc_port is None else listen_address(fv.host, fv.grpc_port)
  app = http_app.create_app(models, settings, state, grpc_address=grpc_address)
  # (loop="asyncio": gRPC's asyncio server runs in uvicorn's loop, and grpc.aio is built for asyncio's own loop.)
  config = uvicorn.Config(app, host=fv.host, port=fv.port, log_level="warning", access_log=False, loop="asyncio",
                          timeout_graceful_shutdown=max(1.0, fv.request_timeout_s))
  server = draining_server(uvicorn.Server, config, state, fv.drain_seconds,
                           hard_limit_s=fv.drain_seconds + fv.request_timeout_s + 5)
  logging.info("Serving %s on http://%s%s", sorted(models), listen_address(fv.host, fv.port),
               "" if grpc_address is None else f" and grpc://{grpc_address}")
  server.run()
  if not server.started:
    sys.exit(f"albert-serve: could not listen on {listen_address(fv.host, fv.port)}"
             f"{'' if grpc_address is None else ' or ' + grpc_address} (see the error above).")


def console_main() -> None:
  """The `albert-serve` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
