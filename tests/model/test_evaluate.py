"""Evaluation counts what a user would count: a NaN output is an error, never a lucky 0."""

from __future__ import annotations

import numpy as np

from model.evaluate import summarize


def test_summary_counts_nonfinite_rows_as_errors_of_their_true_class():
    labels = np.array([0, 0, 1, 1])
    pred = np.array([0, -1, 1, 0])  # -1: the model gave NaN for the second image
    r = summarize(pred, labels, num_classes=2)
    assert r["accuracy"] == 0.5 and r["errors"] == 2
    assert r["per_class"] == [0.5, 0.5]
    assert np.array(r["confusion"]).tolist() == [[1, 0], [1, 1]]
