"""Fuzzers (hypothesis) for the tx gate, every handler, the ABCI frame reader and REST.

Budgets are small by default so CI stays fast; `MEMLEDGER_FUZZ_EXAMPLES=N` scales every
fuzzer up for long runs (see docs/FUZZING.md).
"""
