"""docs/serving.md's deployment recipes agree with the server: the KServe manifest parses and runs `albert-serve` on
the port and model path the Dockerfile uses, with flags the binary accepts."""

import pathlib
import re

from absl import flags
import yaml

from official_albert import serve

DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "serving.md"


def _block(language):
  (body,) = re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
  return body


def test_the_kserve_manifest_runs_the_documented_server():
  manifest = yaml.safe_load(_block("yaml"))
  assert manifest["apiVersion"].startswith("serving.kserve.io/") and manifest["kind"] == "InferenceService"
  (container,) = manifest["spec"]["predictor"]["containers"]
  assert container["command"] == ["albert-serve"]
  args = container["args"]
  assert "--model_dir=/mnt/models" in args and "--port=8080" in args and "--host=0.0.0.0" in args
  assert [p["containerPort"] for p in container["ports"]] == [8080]
  assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": 8080}
  fv = flags.FlagValues()
  serve.define_flags(fv)
  fv(["albert-serve"] + args)  # the binary takes every flag
  assert (fv.model_dir, fv.port) == (["/mnt/models"], 8080)
  # The Dockerfile serves the same path and port with the same command.
  dockerfile = _block("dockerfile")
  assert 'ENTRYPOINT ["albert-serve"]' in dockerfile and "EXPOSE 8080" in dockerfile
  assert '"--model_dir=/mnt/models"' in dockerfile and '"--port=8080"' in dockerfile
  assert 'pip install --no-cache-dir ".[serve]"' in dockerfile
