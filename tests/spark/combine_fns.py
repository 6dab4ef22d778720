"""A user CombineFn for the Spark tests (importable by the Python workers: conftest puts this
folder on PYTHONPATH)."""

from panes import CombineFn


class SumOfSquares(CombineFn):
    output_type = "long"

    def create_accumulator(self):
        return 0

    def add_input(self, acc, value):
        return acc if value is None else acc + value * value

    def merge_accumulators(self, accs):
        return sum(accs)

    def extract_output(self, acc):
        return acc
