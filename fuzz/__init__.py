"""Fuzzers of store files and planted paths (fuzz/RESULTS.md); the tests run seeded short runs of them."""
