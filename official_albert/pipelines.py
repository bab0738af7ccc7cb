"""The public path of the inference pipelines: `official_albert.pipelines.fill_mask(...)` and friends (they live in
`official_albert.serving.pipelines`)."""

from official_albert.serving.pipelines import classify, feature_extraction, fill_mask, fill_mask_saved_model

__all__ = ["fill_mask", "fill_mask_saved_model", "feature_extraction", "classify"]
