"""Cross-encoder rerankers trained on (query, positive, negatives) groups: the `text_ranking` task.

config.py (`TextRankingConfig` and its checks), data.py (CSV / TSV / JSONL groups → records), task.py (an
`AlbertClassifier` with one output scoring each (query, document) pair, the listwise or pointwise loss, reranking
evaluation). `official_albert.pipelines.rerank` serves the model directory; docs/retrieval.md is the user's page.
"""

from tasks.ranking.config import TextRankingConfig
from tasks.ranking.data import RankingExample
from tasks.ranking.data import read_groups
from tasks.ranking.task import TextRankingTask
