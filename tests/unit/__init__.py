"""Modules wholly without a Temporal server: the rule book, planning, policy, proofs, hand-over
state, refusal codes, the contract, the layers and the docs against the code."""
