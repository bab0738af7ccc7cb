"""docs/serving.md's deployment recipes agree with the server: the KServe manifest parses and runs `albert-serve` on
the ports (HTTP 8080, gRPC 8081 named h2c) and model path the Dockerfile uses, with flags the binary accepts."""

import json
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
  # Two container ports need KServe's Standard (raw) deployment mode: Knative's allows one.
  assert manifest["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"
  (container,) = manifest["spec"]["predictor"]["containers"]
  assert container["command"] == ["albert-serve"]
  args = container["args"]
  assert "--model_dir=/mnt/models" in args and "--port=8080" in args and "--host=0.0.0.0" in args
  assert "--grpc_port=8081" in args
  # HTTP first (KServe's service port 80), then gRPC named h2c (KServe gives it the kubernetes.io/h2c app protocol).
  assert [(p["name"], p["containerPort"], p["protocol"]) for p in container["ports"]] == [
      ("http1", 8080, "TCP"), ("h2c", 8081, "TCP")]
  assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": 8080}
  assert container["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": 8080}
  fv = flags.FlagValues()
  serve.define_flags(fv)
  fv(["albert-serve"] + args)  # the binary takes every flag
  assert (fv.model_dir, fv.port, fv.grpc_port, fv.host) == (["/mnt/models"], 8080, 8081, "0.0.0.0")
  # The Dockerfile serves the same path and ports with the same command, and its CMD parses as the manifest's args.
  dockerfile = _block("dockerfile")
  assert 'ENTRYPOINT ["albert-serve"]' in dockerfile and 'pip install --no-cache-dir ".[serve]"' in dockerfile
  (expose,) = [line.split()[1:] for line in dockerfile.splitlines() if line.startswith("EXPOSE ")]
  assert expose == ["8080", "8081"]
  (cmd,) = [json.loads(line[len("CMD "):]) for line in dockerfile.splitlines() if line.startswith("CMD ")]
  fv = flags.FlagValues()
  serve.define_flags(fv)
  fv(["albert-serve"] + cmd)
  assert (fv.model_dir, fv.port, fv.grpc_port, fv.host) == (["/mnt/models"], 8080, 8081, "0.0.0.0")
  # The docker run line publishes both ports.
  (run,) = [line for body in re.findall(r"```bash\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
            for line in body.splitlines() if line.startswith("docker run")]
  assert "-p 8080:8080" in run and "-p 8081:8081" in run and ":/mnt/models" in run
