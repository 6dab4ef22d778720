"""Multi-stage pipelines on Spark (``panes.core.stages``): the streaming plan (``stream``), the
per-bucket step (``buckets``), the columns a stream carries (``transport``), output types
(``schema``), the API's streams and batches (``plan``) and replays (``replay``)."""

from .plan import StagesResult, stages_batch, stages_stream

__all__ = ["StagesResult", "stages_batch", "stages_stream"]
