"""Evaluation: pass@k (unbiased) and maj@k over datasets, scored by the reward service.

``pass_at_k(n, c, k)`` and ``maj_at_k(answers, correct, k, ...)`` are the estimators;
``gtpo eval`` (`gtpo.eval.cli`) runs them over checkpoints.
"""

from gtpo.eval.metrics import group_answers, maj_at_k, maj_at_k_from_labels, pass_at_k

__all__ = ["group_answers", "maj_at_k", "maj_at_k_from_labels", "pass_at_k"]
