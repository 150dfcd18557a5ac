# lwo: make demo | make test | make test-gpu | make bench | make embed | make gpu-check
CC      ?= cc
CLANG   ?= clang
CXX     ?= g++
WARN    := -Wall -Wextra -Werror
CFLAGS  := -std=c99 -O2 -g $(WARN) -Wpedantic -Wno-overlength-strings
CXXFLAGS:= -std=c++11 -O2 -g $(WARN) -Wno-overlength-strings
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LIBS    := -ldl -lm
B       := build
PY      := python3
VENV    := $(B)/venv
VPY     := $(VENV)/bin/python

.PHONY: all test embed check-embed venv clean
all: $(B)/hello

DIT_EMBED := examples/dit_kernels.cu examples/dit_common.h dit_kernel_source_parts
embed:
	$(PY) tools/embed_kernels.py
	$(PY) tools/embed_kernels.py $(DIT_EMBED)

check-embed:
	$(PY) tools/embed_kernels.py --check
	$(PY) tools/embed_kernels.py --check $(DIT_EMBED)

$(B):
	mkdir -p $(B)

HDR := lwo.h

# what the GPU run builds and runs: its own file, under the GPU stamp (tests/tools/gpu_stamp.py)
include tests/gpu/gpu.mk

# ---- builds ------------------------------------------------------------------------------------
$(B)/hello-clang: examples/hello.c $(HDR) | $(B)
	$(CLANG) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/hello-cxx: examples/hello.c $(HDR) | $(B)
	$(CXX) $(CXXFLAGS) -x c++ -o $@ $< $(LIBS)
# the diffusion demo's other compilers (DIT_DEPS, DIFFUSE_DEPS: tests/gpu/gpu.mk)
$(B)/diffuse-clang: $(DIFFUSE_DEPS) | $(B)
	$(CLANG) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/diffuse-cxx: $(DIFFUSE_DEPS) | $(B)
	$(CXX) $(CXXFLAGS) -x c++ -o $@ $< $(LIBS)
$(B)/test_dit_kernels: tests/cpu/test_dit_kernels.c tests/check.h $(DIT_DEPS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/link-test: tests/cpu/test_link_a.c tests/cpu/test_link_b.c $(HDR) | $(B)
	$(CC) $(CFLAGS) -o $@ tests/cpu/test_link_a.c tests/cpu/test_link_b.c $(LIBS)
$(B)/link-test-cxx: tests/cpu/test_link_a.c tests/cpu/test_link_b.c $(HDR) | $(B)
	$(CXX) $(CXXFLAGS) -x c++ -o $@ tests/cpu/test_link_a.c tests/cpu/test_link_b.c $(LIBS)

# CPU test programs: tests/cpu/test_<name>.c -> build/test_<name> (gcc), -cxx (g++), -clang, -san (ASan+UBSan)
CPU_TESTS := cpu nvrtc plan gemm safetensors platform lora
CPU_BINS  := $(foreach t,$(CPU_TESTS),$(B)/test_$(t) $(B)/test_$(t)-cxx $(B)/test_$(t)-clang)
SAN_TESTS := cpu plan gemm safetensors platform lora
SAN_BINS  := $(foreach t,$(SAN_TESTS),$(B)/test_$(t)-san)
$(B)/test_%: tests/cpu/test_%.c tests/check.h $(HDR) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/test_%-cxx: tests/cpu/test_%.c tests/check.h $(HDR) | $(B)
	$(CXX) $(CXXFLAGS) -x c++ -o $@ $< $(LIBS)
$(B)/test_%-clang: tests/cpu/test_%.c tests/check.h $(HDR) | $(B)
	$(CLANG) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/test_%-san: tests/cpu/test_%.c tests/check.h $(HDR) | $(B)
	$(CLANG) $(CFLAGS) -O1 $(SAN) -o $@ $< $(LIBS)

$(B)/dump_codecs: tests/cpu/dump_codecs.c $(HDR) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS)

# ---- python environment for cross-checks (ml_dtypes, numpy, safetensors from PyPI) -------------
$(VENV)/.ok: tests/requirements.txt | $(B)
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --disable-pip-version-check -r tests/requirements.txt
	touch $@
venv: $(VENV)/.ok

# ---- make test: everything that runs without a GPU ---------------------------------------------
test: check-embed win-build $(B)/hello $(B)/hello-clang $(B)/hello-cxx $(B)/diffuse $(B)/diffuse-clang $(B)/diffuse-cxx $(B)/bench_dit $(B)/test_dit_kernels $(B)/test_dit_selftest $(B)/link-test $(B)/link-test-cxx $(CPU_BINS) $(SAN_BINS) $(B)/dump_codecs $(VENV)/.ok
	LWO_CACHE_DIR=$(B)/cache LWO_PY=$(VPY) tests/tools/run.sh $(B)/link-test $(B)/link-test-cxx $(CPU_BINS) $(SAN_BINS) $(B)/test_dit_kernels tests/cpu/check_mldtypes.sh tests/cpu/check_hello_nogpu.sh tests/cpu/check_diffuse.sh tests/cpu/check_safetensors_py.sh tests/fuzz/check_fuzz_safetensors.sh tests/cpu/check_bench_gemm_table.sh tests/tools/check_gpu_stamp.sh tests/tools/check_layout.py tests/tools/check_gpu_paths.py tests/windows/check_windows.sh

# ---- Windows: the header and the CPU tests cross-compiled with mingw-w64 (C and C++), run under --
# Wine (tests/windows/check_windows.sh). Part of make test; alone: make test-windows. tests/windows/windows_tools.sh
# installs mingw-w64 and Wine from Debian's packages where it can (root, apt-get) and otherwise
# leaves a notice; the binaries are then built by a sub-make, so a machine without the tools skips.
WIN_CC       ?= x86_64-w64-mingw32-gcc
WIN_CXX      ?= x86_64-w64-mingw32-g++
WB           := $(B)/win
WIN_CFLAGS   := -std=c99 -O1 $(WARN) -Wpedantic -Wno-overlength-strings
WIN_CXXFLAGS := -std=c++11 -O1 $(WARN) -Wno-overlength-strings
# -static: the exes need no mingw runtime DLL beside them; nothing else is linked (no -ldl)
WIN_LIBS     := -static
WIN_TESTS    := cpu plan gemm safetensors platform
WIN_BINS     := $(foreach t,$(WIN_TESTS),$(WB)/test_$(t).exe $(WB)/test_$(t)-cxx.exe) \
                $(WB)/link-test.exe $(WB)/link-test-cxx.exe $(WB)/fuzz_safetensors-main.exe \
                $(WB)/hello.exe $(WB)/hello-cxx.exe $(WB)/diffuse.exe $(WB)/diffuse-cxx.exe \
                $(WB)/bench_dit.exe $(WB)/test_dit_kernels.exe $(WB)/st_dump.exe
$(WB):
	mkdir -p $(WB)
$(WB)/test_%.exe: tests/cpu/test_%.c tests/check.h $(HDR) | $(WB)
	$(WIN_CC) $(WIN_CFLAGS) -o $@ $< $(WIN_LIBS)
$(WB)/test_%-cxx.exe: tests/cpu/test_%.c tests/check.h $(HDR) | $(WB)
	$(WIN_CXX) $(WIN_CXXFLAGS) -x c++ -o $@ $< $(WIN_LIBS)
$(WB)/test_dit_kernels.exe: tests/cpu/test_dit_kernels.c tests/check.h $(DIT_DEPS) | $(WB)
	$(WIN_CC) $(WIN_CFLAGS) -o $@ $< $(WIN_LIBS)
$(WB)/link-test.exe: tests/cpu/test_link_a.c tests/cpu/test_link_b.c $(HDR) | $(WB)
	$(WIN_CC) $(WIN_CFLAGS) -o $@ tests/cpu/test_link_a.c tests/cpu/test_link_b.c $(WIN_LIBS)
$(WB)/link-test-cxx.exe: tests/cpu/test_link_a.c tests/cpu/test_link_b.c $(HDR) | $(WB)
	$(WIN_CXX) $(WIN_CXXFLAGS) -x c++ -o $@ tests/cpu/test_link_a.c tests/cpu/test_link_b.c $(WIN_LIBS)
$(WB)/fuzz_safetensors-main.exe: tests/fuzz/fuzz_safetensors.c $(HDR) | $(WB)
	$(WIN_CC) $(WIN_CFLAGS) -DLWO_FUZZ_MAIN -o $@ $< $(WIN_LIBS)
$(WB)/st_dump.exe: tests/cpu/st_dump.c $(HDR) | $(WB)
	$(WIN_CC) $(WIN_CFLAGS) -o $@ $< $(WIN_LIBS)
$(WB)/hello.exe: examples/hello.c $(HDR) | $(WB)
	$(WIN_CC) $(WIN_CFLAGS) -o $@ $< $(WIN_LIBS)
$(WB)/hello-cxx.exe: examples/hello.c $(HDR) | $(WB)
	$(WIN_CXX) $(WIN_CXXFLAGS) -x c++ -o $@ $< $(WIN_LIBS)
$(WB)/diffuse.exe: $(DIFFUSE_DEPS) | $(WB)
	$(WIN_CC) $(WIN_CFLAGS) -o $@ $< $(WIN_LIBS)
$(WB)/diffuse-cxx.exe: $(DIFFUSE_DEPS) | $(WB)
	$(WIN_CXX) $(WIN_CXXFLAGS) -x c++ -o $@ $< $(WIN_LIBS)
$(WB)/bench_dit.exe: examples/bench_dit.c $(DIT_DEPS) | $(WB)
	$(WIN_CC) $(WIN_CFLAGS) -o $@ $< $(WIN_LIBS)
# clang's warnings too, on the Windows code paths (with mingw-w64's headers), as C and as C++
$(WB)/clang-syntax.ok: tests/cpu/test_link_a.c $(HDR) | $(WB)
	$(CLANG) --target=x86_64-w64-mingw32 $(WIN_CFLAGS) -fsyntax-only tests/cpu/test_link_a.c
	$(CLANG) --target=x86_64-w64-mingw32 $(WIN_CXXFLAGS) -x c++ -fsyntax-only tests/cpu/test_link_a.c
	touch $@
# NVRTC's Windows DLLs from PyPI's wheel, for test_platform.exe's module build (notice if unreachable)
$(WB)/nvrtc/.ok: tests/windows/fetch_win_nvrtc.sh $(VENV)/.ok | $(WB)
	tests/windows/fetch_win_nvrtc.sh $(VPY) $(WB)/nvrtc
	touch $@
win-bins: $(WIN_BINS) $(WB)/clang-syntax.ok $(WB)/nvrtc/.ok
win-build: $(VENV)/.ok   # made here, before the sub-make, which must not race the main make to it
	+@if tests/windows/windows_tools.sh $(WB)/status; then $(MAKE) --no-print-directory win-bins; fi
test-windows: win-build
	tests/tools/run.sh tests/windows/check_windows.sh
.PHONY: win-build win-bins test-windows

# ---- safetensors (section 10): interop dumper, fuzz target, corpus replay ----------------------
$(B)/st_dump: tests/cpu/st_dump.c $(HDR) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/fuzz_safetensors-main: tests/fuzz/fuzz_safetensors.c $(HDR) | $(B)
	$(CLANG) $(CFLAGS) -O1 $(SAN) -DLWO_FUZZ_MAIN -o $@ $< $(LIBS)
# libFuzzer needs clang's fuzzer runtime (Debian: libclang-rt-14-dev); without it, skip with a notice.
$(B)/fuzz_safetensors: tests/fuzz/fuzz_safetensors.c $(HDR) | $(B)
	@$(CLANG) -std=c99 -O1 -g $(WARN) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -o $@ $< $(LIBS) 2>$(B)/fuzz_safetensors.log || { rm -f $@; \
	  echo "notice: clang's libFuzzer runtime is missing (apt-get install -y libclang-rt-14-dev); timed fuzz skipped"; }
test: $(B)/st_dump $(B)/fuzz_safetensors-main $(B)/fuzz_safetensors
fuzz-safetensors: $(B)/fuzz_safetensors
	mkdir -p $(B)/fuzz-work/safetensors
	$(B)/fuzz_safetensors -max_total_time=$${LWO_FUZZ_TIME:-300} -max_len=4096 $(B)/fuzz-work/safetensors tests/fuzz/corpus/safetensors
.PHONY: fuzz-safetensors
