#!/usr/bin/env bash
# The GPU stamp's parser and tree hash (tests/tools/gpu_stamp.py selftest): good and malformed stamps,
# the hash against git's own where the checkout is clean, and the committed stamp's format. Whether
# the stamp is current is reported, not checked: CI has no GPU to make a new one.
exec "${LWO_PY:-python3}" "$(dirname "$0")/gpu_stamp.py" selftest
