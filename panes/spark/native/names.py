"""The Spark column names of the native plans (the input's own columns and those every plan adds,
event time, validation..., are in ``panes.spark.columns``)."""

from __future__ import annotations

# -- a window (a row of a windows table) --------------------------------------------------------------

WINDOW_START = "__panes_window_start"  # ms, inclusive
WINDOW_END = "__panes_window_end"  # ms, exclusive
#: the window's records all came after the watermark had passed its end (a session: those since its
#: last merge): they hold the output watermark at its garbage-collection time only
#: (``rules.element_hold``), and under after_watermark it fired at once, LATE
CREATED_LATE = "__panes_created_late"
#: the earliest hold of the windows that close in a step (the default trigger): no other window
#: holds the output watermark before the end of one of them (``output.Output``)
CLOSING_HOLD = "__panes_closing_hold"
#: the prefix of an aggregate's partial columns (``partials.Partial``): ``__panes_partial_<i>``
PARTIAL = "__panes_partial_"

# -- a window's trigger state, for after_watermark with counts (``firing``) -----------------------------

ROWS_ADDED = "__panes_rows_added"  # rows the step added to the window
PHASE_COUNT = "__panes_phase_count"  # elements counted for the trigger of the window's phase
IN_LATE_PHASE = "__panes_in_late_phase"  # the ON_TIME pane fired: the late firings count now
NEW_ELEMENTS = "__panes_new_elements"  # elements since the last pane
NEXT_PANE_INDEX = "__panes_next_pane_index"
LAST_PANE_VALUES = "__panes_last_pane_values"  # the last pane, kept to retract it (retracting mode)
LAST_PANE_TIMING = "__panes_last_pane_timing"
NON_EARLY_EMITTED = "__panes_non_early_emitted"  # a pane that is not EARLY was emitted: the next ones are LATE
#: every trigger-state column, in a windows table's order
TRIGGER_STATE = (
    PHASE_COUNT,
    IN_LATE_PHASE,
    NEW_ELEMENTS,
    NEXT_PANE_INDEX,
    LAST_PANE_VALUES,
    LAST_PANE_TIMING,
    NON_EARLY_EMITTED,
)
#: the last pane's timing as a number while windows are grouped (``expressions.timing_code``)
LAST_PANE_TIMING_CODE = "__panes_last_pane_timing_code"
#: the prefix of the last pane's values, one column per aggregate, while windows are grouped
LAST_PANE_VALUE = "__panes_last_pane_value_"
#: the panes a step's firings emitted (retractions and panes, in emission order), an array of structs
FIRED_PANES = "__panes_fired_panes"

# -- what a stream step's job reports in the windows table it writes (``store``) ------------------------

#: a row's watermark value (ms: event time, punctuation, control values); its maximum per table is
#: the step's
ROW_WATERMARK = "__panes_row_watermark"
IS_DEAD_LETTER = "__panes_is_dead_letter"  # 1: the row is malformed or late
#: (sessions) the group of the rows that count in no window, kept apart from the sessions
IN_NO_WINDOW = "__panes_in_no_window"

# -- a stream's rows: columns that no watermark changes (``late.LateSplit.row_columns``) ----------------

ROW_TIME = "__panes_row_time"  # event time, 0 when missing
ROW_COUNTS = "__panes_row_counts"  # a data row that passes every check
ROW_MALFORMED = "__panes_row_malformed"  # a data row that fails a check
ROW_WINDOW_START = "__panes_row_window_start"  # the row's one window (at most one per row)
ROW_WINDOW_END = "__panes_row_window_end"
ROW_WINDOW_EXPIRY = "__panes_row_window_expiry"
ROW_IN_WINDOW = "__panes_row_in_window"  # a row that counts, in a window (not in a hopping gap)
ROW_VALUE = "__panes_row_value_"  # prefix: the numbers a value column holds (NaN as null)
#: a malformed row's record as JSON, computed in the stream's own plan (``capability.never_late``)
RECORD_JSON = "__panes_record_json"

# -- a step's own values, as columns or as fields of a one-row literal (``expressions``) ----------------

WATERMARK_BEFORE = "__panes_watermark_before"  # the watermark before the step: lateness is checked against it
WATERMARK_AFTER = "__panes_watermark_after"  # the watermark after the step: what closes, fires, expires
LATEST_STAMP = "__panes_latest_stamp"  # the least ingestion stamp a row counts as (``never_late``)
STEP_NUMBER = "__panes_step_number"  # the step's number: arrival order across steps

# -- the dead letters ------------------------------------------------------------------------------------

MISSED_WINDOWS = "__panes_missed_windows"  # a late row's expired windows, array of struct(s, e)

#: the directory of a stream's windows tables under its checkpoint
STATE_DIR = "panes_native"
