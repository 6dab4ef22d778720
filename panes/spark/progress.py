"""The progress of streaming queries, micro-batch by micro-batch, read cheaply: a
``StreamingQueryListener`` that hands each ``StreamingQueryProgress`` to a function.

On a classic session PySpark builds each progress event from the JVM object field by field, and
each map in it (durations, event time, each source's metrics, the observed metrics) by iterating
it until the JVM throws the exception that ends the iteration, which PySpark then converts for
Python with dozens of round trips more: about 450 JVM round trips per micro-batch, on the
listener's thread, beside the micro-batch's own work. ``ProgressListener`` reads the event as
Spark's JSON of it instead (two round trips). On Spark Connect events come as JSON already."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import QueryProgressEvent, StreamingQueryProgress

#: the Java interface a Python listener of a classic session implements (PySpark's own)
JAVA_LISTENER = "org.apache.spark.sql.streaming.PythonStreamingQueryListener"


class ProgressListener(StreamingQueryListener):
    """Calls ``on_progress(progress)`` with each micro-batch's ``StreamingQueryProgress`` of every
    query of the session it is added to (``spark.streams.addListener``), and
    ``on_terminated(query_id)`` (a string) when one of them ends, so that whoever waits for its
    progress need not poll the query to learn that no more will come."""

    def __init__(
        self,
        on_progress: Callable[[StreamingQueryProgress], Any],
        on_terminated: Callable[[str], Any] | None = None,
    ):
        self.on_progress = on_progress
        self.on_terminated = on_terminated

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        self.on_progress(event.progress)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        if self.on_terminated is not None:
            self.on_terminated(str(event.id))

    @property
    def _jlistener(self) -> Any:
        """The Java listener a classic session registers (PySpark asks for this property in
        ``addListener``): ``JsonEvents`` in PySpark's wrapper."""
        from pyspark import SparkContext

        if getattr(self, "_jlistenerobj", None) is None:
            jvm: Any = SparkContext._jvm
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(JsonEvents(self))
        return self._jlistenerobj


class JsonEvents:
    """The events of a classic session's listener bus for a ``ProgressListener``: a progress
    event read as JSON, a query's end as its id, the others dropped (it does nothing with them)."""

    def __init__(self, listener: ProgressListener):
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        progress = StreamingQueryProgress.fromJson(json.loads(jevent.progress().json()))
        self.listener.onQueryProgress(QueryProgressEvent(progress))

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        if self.listener.on_terminated is not None:
            self.listener.on_terminated(str(jevent.id().toString()))

    class Java:
        implements = [JAVA_LISTENER]
