"""Keras layers of ALBERT: embeddings, attention and FFN sub-blocks, and output heads."""

from official_albert.layers.activations import gelu_new, get_activation
from official_albert.layers.attention import AlbertAttention, attention_bias_from_mask
from official_albert.layers.embeddings import AlbertEmbeddings, layer_norm
from official_albert.layers.feedforward import AlbertFeedForward
from official_albert.layers.heads import MaskedLMHead, SquadV2Head, TransposedLogits, gather_positions
