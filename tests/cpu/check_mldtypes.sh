#!/usr/bin/env bash
# lwo's codecs against ml_dtypes (the venv python is passed as LWO_PY by the Makefile).
exec "${LWO_PY:-python3}" tests/cpu/check_mldtypes.py build/dump_codecs
