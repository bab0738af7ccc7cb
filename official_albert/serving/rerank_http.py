"""Rerank over HTTP: TEI's `POST /rerank` and Cohere's `POST /v1/rerank` (and `/v2/rerank`), parsed and answered.

TEI's shape (`query`, `texts` → `[{index, score}]`, best first) is what TEI's clients send. Cohere's (`query`,
`documents`, `top_n`, `return_documents` → `{"results": [{index, relevance_score(, document)}]}`) is what the rerank
steps of most RAG frameworks send to a base URL of the user's choice (LangChain's and LlamaIndex's Cohere rerankers,
LiteLLM, Open WebUI's and Dify's external rerankers), and what Jina's and vLLM's rerank servers answer. Both routes
score a (query, text) pair as `pipelines.rerank` does — a reranker's sigmoid(logit), ordered by the logit (a sigmoid
saturates); a classifier's probability of its last label; a regression head's score — so they give the same order
and scores for the same texts, batched with every other request to the model.

A field a route does not offer is refused (400 naming it and the fields it takes) rather than dropped, so a client
never reads an answer to another question (a `max_tokens_per_doc` the server did not apply, a `top_n` TEI's route
does not cut at). Every other refusal names the field and the fix, as `http_protocols`' do.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple
import uuid

import numpy as np

from official_albert.serving.http_protocols import ApiError
from official_albert.serving.http_protocols import check_text
from official_albert.serving.http_protocols import check_texts
from official_albert.serving.http_protocols import describe
from official_albert.serving.http_protocols import model_name
from official_albert.serving.oip_tensors import Limits
from official_albert.serving.served_model import CLASSIFIER
from official_albert.serving.served_model import RERANKER

# The fields `POST /rerank` takes (TEI's, less the ones this server does not offer).
RERANK_FIELDS = ("model", "query", "texts", "return_text", "raw_scores")
# The fields `POST /v1/rerank` takes (Cohere's, less `rank_fields`, `max_chunks_per_doc` and `max_tokens_per_doc`).
COHERE_FIELDS = ("model", "query", "documents", "top_n", "return_documents")
COHERE_ROUTES = ("/v1/rerank", "/v2/rerank")


def _query_and_model(body: Dict[str, object], limits: Limits) -> Tuple[Optional[str], str]:
  model = model_name(body)
  query = body.get("query")
  if not isinstance(query, str) or not query:
    raise ApiError(400, f"query: expected a non-empty string, got {describe(query)}.")
  return model, check_text("query", query, limits)


def rerank_request(body: Dict[str, object], limits: Limits) -> Tuple[Optional[str], str, List[str], bool, bool]:
  """(model name or None, query, texts, return_text, raw_scores) of `POST /rerank` (TEI's shape; `raw_scores`: a
  reranker's logits instead of their sigmoid). A field outside `RERANK_FIELDS` is refused (400 naming it and the
  accepted ones), as the TF Serving route refuses an unknown input: TEI's `truncate` or Cohere's `top_n` would
  otherwise be dropped without a word, and the client would read an answer it did not ask for."""
  # TEI clients that always send what this server does anyway (cut at the end) are served as they ask.
  unknown = sorted(str(k) for k in body if k not in RERANK_FIELDS and (k, body[k]) not in (
      ("truncate", True), ("truncation_direction", "right"), ("truncation_direction", "Right")))
  if unknown:
    raise ApiError(400, f"{unknown[0]}: not a field of /rerank (or a value it does not offer); its fields are "
                        f"{list(RERANK_FIELDS)} (texts are cut at the model's seq_length, at the end — truncate=true "
                        "is accepted — and every text is ranked: leave top_n out, or send Cohere's shape to "
                        "/v1/rerank, which takes it).")
  model, query = _query_and_model(body, limits)
  texts = check_texts("texts", body.get("texts"), limits)
  return model, query, texts, _json_bool(body, "return_text"), _json_bool(body, "raw_scores")


def _json_bool(body: Dict[str, object], name: str) -> bool:
  """Optional JSON boolean `name` of `body` (default false): a string such as "false" would be true to bool()."""
  value = body.get(name, False)
  if not isinstance(value, bool):
    raise ApiError(400, f"{name}: expected true or false (a JSON boolean), got {describe(value)}.")
  return value


def _best_first(keys: Sequence[float]) -> List[int]:
  """The indices by `keys`, highest first; equal keys keep the request's order."""
  return sorted(range(len(keys)), key=lambda i: (-keys[i], i))


def rerank_response(scores: Sequence[float], texts: Sequence[str], return_text: bool,
                    keys: Optional[Sequence[float]] = None) -> List[Dict[str, object]]:
  """[{index, score(, text)}], best first by `keys` (default: the scores; ties keep the request's order)."""
  order = _best_first(scores if keys is None else keys)
  return [{"index": i, "score": float(scores[i]), **({"text": texts[i]} if return_text else {})} for i in order]


def cohere_request(body: Dict[str, object], limits: Limits
                   ) -> Tuple[Optional[str], str, List[str], Optional[int], bool]:
  """(model name or None, query, documents' texts, top_n or None, return_documents) of `POST /v1/rerank`.

  A document is a string or, as Cohere's v1 takes it, an object with a string `text`; `top_n` is a whole number
  ≥ 1 (more than the documents: all of them); `return_documents` defaults to false, as Cohere's does."""
  unknown = sorted(str(k) for k in body if k not in COHERE_FIELDS)
  if unknown:
    raise ApiError(400, f"{unknown[0]}: not a field of /v1/rerank (or one this server does not offer); its fields "
                        f"are {list(COHERE_FIELDS)}: each (query, document) pair is cut at the model's seq_length, "
                        "at the end, and a document is ranked on its text (a string, or an object's \"text\").")
  model, query = _query_and_model(body, limits)
  documents = body.get("documents")
  if isinstance(documents, list):
    documents = [d["text"] if isinstance(d, dict) and isinstance(d.get("text"), str) else d for d in documents]
    wrong = next((i for i, d in enumerate(documents) if isinstance(d, dict)), None)
    if wrong is not None:
      raise ApiError(400, f"documents[{wrong}]: an object without a string \"text\" ({describe(documents[wrong])}); "
                          "send each document as a string or as {\"text\": \"...\"}.")
  texts = check_texts("documents", documents, limits)
  top_n = body.get("top_n")
  if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
    raise ApiError(400, f"top_n: expected a whole number of documents ≥ 1, got {describe(top_n)}; leave it out to "
                        "rank them all.")
  return model, query, texts, top_n, _json_bool(body, "return_documents")


def cohere_response(model_name: str, scores: Sequence[float], keys: Sequence[float], texts: Sequence[str],
                    top_n: Optional[int], return_documents: bool, tokens: int) -> Dict[str, object]:
  """Cohere's answer (`id`, `results` best first by `keys`, cut at `top_n`; `meta`) with the `model` and OpenAI-style
  `usage` that Jina's and vLLM's rerank servers add: the fields every client of the shape reads."""
  results = [{"index": i, "relevance_score": float(scores[i]),
              **({"document": {"text": texts[i]}} if return_documents else {})}
             for i in _best_first(keys)[:top_n]]
  return {"id": f"rerank-{uuid.uuid4().hex}", "model": model_name, "results": results,
          "usage": {"total_tokens": tokens}, "meta": {"billed_units": {"search_units": 1}}}


def paired_model(model, route: str, raw_scores: bool = False):
  """`model` once it can score (query, text) pairs at `route` (with `raw_scores`: has a raw score to give)."""
  if not model.takes_pairs:
    raise ApiError(400, f"model {model.name!r} takes no text_pair (a SavedModel exported without --text_pair); "
                   f"{route} scores (query, text) pairs: serve a model that takes them.")
  if raw_scores and model.head == CLASSIFIER and getattr(model, "labels", None) is not None:
    # (TEI takes raw_scores from rerankers only; answering probabilities instead would pass silently)
    raise ApiError(400, f"raw_scores: model {model.name!r} is a classifier with labels, whose /rerank score is the "
                   "probability of its last label (it has no single raw logit); leave raw_scores out, or serve a "
                   "reranker (--model_head=NAME=reranker).")
  return model


def pair_scores(model, outputs: Dict[str, np.ndarray]) -> Tuple[List[float], List[float], Optional[List[float]]]:
  """(scores, the keys they are ordered by, a reranker's logits or None) of `model`'s (query, text) pairs."""
  if model.head == RERANKER:  # as pipelines.rerank: sigmoid(logit), ordered by the logit (a sigmoid saturates)
    logits = outputs["logit"].tolist()
    return outputs["score"].tolist(), logits, logits
  # The probability of a classifier's last label (for a 2-label relevance model, "relevant"), or a regression
  # head's score (docs/serving.md).
  scores = (outputs["probabilities"][:, -1] if "probabilities" in outputs else outputs["score"]).tolist()
  return scores, scores, None
