"""User merge accumulations of the tests (importable by Spark's Python workers: see conftest)."""

from __future__ import annotations

import pandas as pd

from panes.core.stages import MergeAccumulation


class AuctionBidStats(MergeAccumulation):
    """Per auction and window: its item (from the auctions), how many bids it got and the top
    price (from the bids). Adds bids a whole frame at a time (the optional vectorised form)."""

    #: its rows' types on Spark
    output_schema = "item STRING, bids LONG, top_price LONG"

    def create_accumulator(self):
        return {"item": None, "bids": 0, "top": None}

    def add_left(self, acc, row):
        acc["item"] = row["item"]
        return acc

    def add_right(self, acc, row):
        acc["bids"] += 1
        acc["top"] = row["price"] if acc["top"] is None else max(acc["top"], row["price"])
        return acc

    def add_rights(self, acc, frame: pd.DataFrame):
        if len(frame):
            top = int(frame["price"].max())
            acc["bids"] += len(frame)
            acc["top"] = top if acc["top"] is None else max(acc["top"], top)
        return acc

    def merge_accumulators(self, accs):
        out = self.create_accumulator()
        for a in accs:
            out["item"] = out["item"] if a["item"] is None else a["item"]
            out["bids"] += a["bids"]
            if a["top"] is not None:
                out["top"] = a["top"] if out["top"] is None else max(out["top"], a["top"])
        return out

    def extract_output(self, acc):
        if acc["item"] is None:
            return []  # bids for an auction not opened in this window: no row
        return {"item": acc["item"], "bids": acc["bids"], "top_price": acc["top"]}

    def output_columns(self):
        return ("item", "bids", "top_price")
