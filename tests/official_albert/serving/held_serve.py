"""`python -m official_albert.serve` whose model calls a test can hold: the drain test's server (test_server_drain.py).

  ALBERT_TEST_HOLD_DIR=/tmp/gate python -m tests.official_albert.serving.held_serve --model_dir=... [server flags]

While the file `hold` exists in $ALBERT_TEST_HOLD_DIR, every model call (`ServedModel.predict`, what the batcher's
worker runs) writes the file `held` there and waits until `hold` is removed (at most HOLD_LIMIT_S), then answers as
usual. So a test holds a request inside the batcher by an event it controls, not by a slow model or a sleep; the rest
of the binary (flags, start-up, the drain on SIGTERM) is the real one.
"""

import os
import pathlib
import time

from official_albert import serve
from official_albert.serving import served_model

HOLD_LIMIT_S = 600  # a test that forgets to release still ends


def main():
  gate = pathlib.Path(os.environ["ALBERT_TEST_HOLD_DIR"])
  predict = served_model.ServedModel.predict

  def held_predict(self, texts, pairs=None):
    if (gate / "hold").exists():
      (gate / "held").write_text("")
      deadline = time.monotonic() + HOLD_LIMIT_S
      while (gate / "hold").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predict(self, texts, pairs)

  served_model.ServedModel.predict = held_predict
  serve.console_main()


if __name__ == "__main__":
  main()
