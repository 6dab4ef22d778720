"""The native streaming step's watermark and dead-letter flag, read from the windows table it
wrote: from the Parquet footers' statistics, or with a Spark aggregate when a file has none."""

import pyarrow as pa
import pyarrow.parquet as pq

from panes.spark.native import DEAD, GOT, NativeStream


def _table(got, dead):
    return pa.table({"k": pa.array(["a"] * len(got)), GOT: pa.array(got, pa.int64()), DEAD: pa.array(dead, pa.int32())})


def test_metrics_from_footer_statistics(spark, tmp_path):
    pq.write_table(_table([5, None, 17], [0, 0, 0]), tmp_path / "part-0.parquet")
    pq.write_table(_table([None, 3], [None, 1]), tmp_path / "part-1.parquet")
    assert NativeStream._metrics(spark, tmp_path) == (17, 1)


def test_metrics_without_statistics_fall_back_to_spark(spark, tmp_path):
    pq.write_table(_table([5, 42], [0, 0]), tmp_path / "part-0.parquet", write_statistics=False)
    pq.write_table(_table([None], [None]), tmp_path / "part-1.parquet")
    assert NativeStream._metrics(spark, tmp_path) == (42, 0)


def test_metrics_of_rows_that_carry_no_watermark(spark, tmp_path):
    # an empty micro-batch (or one of malformed rows only): no watermark value, the flag as written
    pq.write_table(_table([], []), tmp_path / "part-0.parquet")
    pq.write_table(_table([None], [1]), tmp_path / "part-1.parquet")
    assert NativeStream._metrics(spark, tmp_path) == (None, 1)


def test_spark_writes_the_statistics_the_fast_path_reads(spark, tmp_path):
    df = spark.createDataFrame([(1, 0), (9, 1), (None, 0)], f"{GOT} long, {DEAD} int").coalesce(1)
    df.write.parquet(str(tmp_path / "t"))
    files = list((tmp_path / "t").glob("*.parquet"))
    md = pq.read_metadata(files[0])
    st = md.row_group(0).column(md.schema.names.index(GOT)).statistics
    assert st is not None and st.has_min_max and st.max == 9 and st.null_count == 1
    assert NativeStream._metrics(spark, tmp_path / "t") == (9, 1)
