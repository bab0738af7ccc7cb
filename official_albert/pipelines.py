"""The public path of the inference pipelines: `official_albert.pipelines.fill_mask(...)` and friends (they live in
`official_albert.serving.pipelines`, for the fine-tuned heads' predictors in `official_albert.serving.task_pipelines`,
sentence embeddings and semantic search in `official_albert.serving.embedding` and reranking in
`official_albert.serving.rerank`)."""

from official_albert.serving.embedding import embed
from official_albert.serving.embedding import search
from official_albert.serving.pipelines import classify
from official_albert.serving.pipelines import feature_extraction
from official_albert.serving.pipelines import fill_mask
from official_albert.serving.pipelines import fill_mask_saved_model
from official_albert.serving.rerank import rerank
from official_albert.serving.task_pipelines import multiple_choice
from official_albert.serving.task_pipelines import question_answering
from official_albert.serving.task_pipelines import token_classification

__all__ = ["fill_mask", "fill_mask_saved_model", "feature_extraction", "classify", "question_answering",
           "multiple_choice", "token_classification", "embed", "search", "rerank"]
