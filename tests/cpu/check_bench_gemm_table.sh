#!/usr/bin/env bash
# The GEMM benchmark's summary script on a sample of real output (tests/bench/bench_gemm_table.py --check).
exec "${LWO_PY:-python3}" "$(dirname "$0")/../bench/bench_gemm_table.py" --check
