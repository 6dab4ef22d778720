"""The Spark adapter: the native plans (``native``), the stateful plan (``stateful``), the planner
that picks one (``planner``), and what they share (``columns``, ``ops``, ``session``)."""
