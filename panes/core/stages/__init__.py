"""Stage graphs: chained stages (window propagation) and merge stages of two streams (Apex's
WindowedMergeOperator), each stage with its own triggers, accumulation mode, lateness and dead
letters.

``graph`` defines inputs, stages and the graph; ``merges`` the merge accumulations (inner, left,
cogroup, user classes); ``accumulators`` how a stage takes in the panes of the stage upstream;
``rows`` the rows between stages; ``step`` one stage's step;
``run`` the graph's run over a timeline of steps.
"""

from .accumulators import Contribution, ContributionAggregate, MergeAggregate
from .graph import PANE_COLUMNS, Input, Stage, StageGraph
from .merges import MERGES, Cogroup, InnerJoin, LeftJoin, MergeAccumulation, MergeSides, load_merge
from .run import GraphRunner, GraphState, GraphStep, InputLetter, input_pipeline, letter_record, once
from .step import StageLetter, StageRunner, StageStep

__all__ = [
    "Cogroup",
    "Contribution",
    "ContributionAggregate",
    "GraphRunner",
    "GraphState",
    "GraphStep",
    "InnerJoin",
    "Input",
    "InputLetter",
    "LeftJoin",
    "MERGES",
    "MergeAccumulation",
    "MergeAggregate",
    "MergeSides",
    "PANE_COLUMNS",
    "Stage",
    "StageGraph",
    "StageLetter",
    "StageRunner",
    "StageStep",
    "input_pipeline",
    "letter_record",
    "load_merge",
    "once",
]
