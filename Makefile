# lwo: make demo | make test | make test-gpu | make bench | make embed
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

.PHONY: all demo test test-gpu gpu-build bench bench-gemm bench-stream bench-dit embed check-embed venv clean
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

# ---- builds ------------------------------------------------------------------------------------
$(B)/hello: examples/hello.c $(HDR) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/hello-clang: examples/hello.c $(HDR) | $(B)
	$(CLANG) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/hello-cxx: examples/hello.c $(HDR) | $(B)
	$(CXX) $(CXXFLAGS) -x c++ -o $@ $< $(LIBS)
# the diffusion demo (examples/diffuse.c) and the kernels it shares with bench_dit.c (dit_common.h);
# the demo's own headers: the checkpoint, the CPU reference, the options, the PNG writer
DIT_DEPS := examples/dit_common.h examples/dit_kernels.cu $(HDR)
DIFFUSE_DEPS := examples/diffuse.c examples/dit_model.h examples/dit_ref.h examples/dit_args.h examples/png.h $(DIT_DEPS)
$(B)/diffuse: $(DIFFUSE_DEPS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/diffuse-clang: $(DIFFUSE_DEPS) | $(B)
	$(CLANG) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/diffuse-cxx: $(DIFFUSE_DEPS) | $(B)
	$(CXX) $(CXXFLAGS) -x c++ -o $@ $< $(LIBS)
$(B)/bench_dit: examples/bench_dit.c $(DIT_DEPS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/test_dit_kernels: tests/test_dit_kernels.c tests/check.h $(DIT_DEPS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS)
# the demo's GPU path against its CPU reference (a GPU test: it includes examples/diffuse.c)
$(B)/test_dit_selftest: tests/test_dit_selftest.c $(DIFFUSE_DEPS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/link-test: tests/test_link_a.c tests/test_link_b.c $(HDR) | $(B)
	$(CC) $(CFLAGS) -o $@ tests/test_link_a.c tests/test_link_b.c $(LIBS)
$(B)/link-test-cxx: tests/test_link_a.c tests/test_link_b.c $(HDR) | $(B)
	$(CXX) $(CXXFLAGS) -x c++ -o $@ tests/test_link_a.c tests/test_link_b.c $(LIBS)

# CPU test programs: tests/test_<name>.c -> build/test_<name> (gcc), -cxx (g++), -clang, -san (ASan+UBSan)
CPU_TESTS := cpu nvrtc plan gemm safetensors platform lora
CPU_BINS  := $(foreach t,$(CPU_TESTS),$(B)/test_$(t) $(B)/test_$(t)-cxx $(B)/test_$(t)-clang)
SAN_TESTS := cpu plan gemm safetensors platform lora
SAN_BINS  := $(foreach t,$(SAN_TESTS),$(B)/test_$(t)-san)
$(B)/test_%: tests/test_%.c tests/check.h $(HDR) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/test_%-cxx: tests/test_%.c tests/check.h $(HDR) | $(B)
	$(CXX) $(CXXFLAGS) -x c++ -o $@ $< $(LIBS)
$(B)/test_%-clang: tests/test_%.c tests/check.h $(HDR) | $(B)
	$(CLANG) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/test_%-san: tests/test_%.c tests/check.h $(HDR) | $(B)
	$(CLANG) $(CFLAGS) -O1 $(SAN) -o $@ $< $(LIBS)

$(B)/dump_codecs: tests/dump_codecs.c $(HDR) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS)

# ---- python environment for cross-checks (ml_dtypes, numpy, safetensors from PyPI) -------------
$(VENV)/.ok: tests/requirements.txt | $(B)
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --disable-pip-version-check -r tests/requirements.txt
	touch $@
venv: $(VENV)/.ok

# ---- make test: everything that runs without a GPU ---------------------------------------------
test: check-embed win-build $(B)/hello $(B)/hello-clang $(B)/hello-cxx $(B)/diffuse $(B)/diffuse-clang $(B)/diffuse-cxx $(B)/bench_dit $(B)/test_dit_kernels $(B)/test_dit_selftest $(B)/link-test $(B)/link-test-cxx $(CPU_BINS) $(SAN_BINS) $(B)/dump_codecs $(VENV)/.ok
	LWO_CACHE_DIR=$(B)/cache LWO_PY=$(VPY) tests/run.sh $(B)/link-test $(B)/link-test-cxx $(CPU_BINS) $(SAN_BINS) $(B)/test_dit_kernels tests/check_mldtypes.sh tests/check_hello_nogpu.sh tests/check_diffuse.sh tests/check_safetensors_py.sh tests/check_fuzz_safetensors.sh tests/check_bench_gemm_table.sh tests/check_gpu_stamp.sh tests/check_layout.py tests/check_windows.sh

# ---- Windows: the header and the CPU tests cross-compiled with mingw-w64 (C and C++), run under --
# Wine (tests/check_windows.sh). Part of make test; alone: make test-windows. tests/windows_tools.sh
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
$(WB)/test_%.exe: tests/test_%.c tests/check.h $(HDR) | $(WB)
	$(WIN_CC) $(WIN_CFLAGS) -o $@ $< $(WIN_LIBS)
$(WB)/test_%-cxx.exe: tests/test_%.c tests/check.h $(HDR) | $(WB)
	$(WIN_CXX) $(WIN_CXXFLAGS) -x c++ -o $@ $< $(WIN_LIBS)
$(WB)/test_dit_kernels.exe: tests/test_dit_kernels.c tests/check.h $(DIT_DEPS) | $(WB)
	$(WIN_CC) $(WIN_CFLAGS) -o $@ $< $(WIN_LIBS)
$(WB)/link-test.exe: tests/test_link_a.c tests/test_link_b.c $(HDR) | $(WB)
	$(WIN_CC) $(WIN_CFLAGS) -o $@ tests/test_link_a.c tests/test_link_b.c $(WIN_LIBS)
$(WB)/link-test-cxx.exe: tests/test_link_a.c tests/test_link_b.c $(HDR) | $(WB)
	$(WIN_CXX) $(WIN_CXXFLAGS) -x c++ -o $@ tests/test_link_a.c tests/test_link_b.c $(WIN_LIBS)
$(WB)/fuzz_safetensors-main.exe: tests/fuzz_safetensors.c $(HDR) | $(WB)
	$(WIN_CC) $(WIN_CFLAGS) -DLWO_FUZZ_MAIN -o $@ $< $(WIN_LIBS)
$(WB)/st_dump.exe: tests/st_dump.c $(HDR) | $(WB)
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
$(WB)/clang-syntax.ok: tests/test_link_a.c $(HDR) | $(WB)
	$(CLANG) --target=x86_64-w64-mingw32 $(WIN_CFLAGS) -fsyntax-only tests/test_link_a.c
	$(CLANG) --target=x86_64-w64-mingw32 $(WIN_CXXFLAGS) -x c++ -fsyntax-only tests/test_link_a.c
	touch $@
# NVRTC's Windows DLLs from PyPI's wheel, for test_platform.exe's module build (notice if unreachable)
$(WB)/nvrtc/.ok: tests/fetch_win_nvrtc.sh $(VENV)/.ok | $(WB)
	tests/fetch_win_nvrtc.sh $(VPY) $(WB)/nvrtc
	touch $@
win-bins: $(WIN_BINS) $(WB)/clang-syntax.ok $(WB)/nvrtc/.ok
win-build: $(VENV)/.ok   # made here, before the sub-make, which must not race the main make to it
	+@if tests/windows_tools.sh $(WB)/status; then $(MAKE) --no-print-directory win-bins; fi
test-windows: win-build
	tests/run.sh tests/check_windows.sh
.PHONY: win-build win-bins test-windows

# ---- GPU machine -------------------------------------------------------------------------------
GPU_CFLAGS := -std=c99 -O2 -g $(WARN) -Wno-overlength-strings
$(B)/test_gpu: tests/test_gpu.c tests/check.h $(HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(LIBS)
$(B)/bench: tests/bench.c $(HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(LIBS) -lpthread
$(B)/test_gpu_stream: tests/test_gpu_stream.c tests/check.h $(HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(LIBS)
$(B)/test_gpu_gemm: tests/test_gpu_gemm.c tests/check.h $(HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(LIBS)
$(B)/test_gpu_graphs: tests/test_gpu_graphs.c tests/check.h $(HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(LIBS)
$(B)/test_gpu_safetensors: tests/test_gpu_safetensors.c tests/check.h $(HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(LIBS)
$(B)/test_gpu_plan: tests/test_gpu_plan.c tests/check.h $(HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(LIBS)
$(B)/test_gpu_lora: tests/test_gpu_lora.c tests/check.h $(HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(LIBS)
$(B)/bench_gemm: tests/bench_gemm.c $(HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(LIBS)
$(B)/bench_stream: tests/bench_stream.c $(HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(LIBS)
GPU_TESTS := $(B)/test_gpu $(B)/test_gpu_gemm $(B)/test_gpu_graphs $(B)/test_gpu_stream $(B)/test_gpu_safetensors $(B)/test_gpu_plan \
             $(B)/test_gpu_lora $(B)/test_dit_selftest
GPU_BINS  := $(GPU_TESTS) $(B)/hello $(B)/diffuse $(B)/bench_dit $(B)/bench $(B)/bench_gemm $(B)/bench_stream
gpu-build: $(GPU_BINS)
test-gpu: $(GPU_BINS)
	tests/run.sh $(GPU_TESTS)
# The GEMM benchmark: lwo's rows, PyTorch's and Triton's in one run, then the ratios (bench_gemm_table.py).
bench-gemm: $(B)/bench_gemm
	( $(B)/bench_gemm; echo $$? > $(B)/bench_gemm.rc ) | tee $(B)/bench_gemm.txt; exit $$(cat $(B)/bench_gemm.rc)
	-$(PY) tests/bench_gemm_peers.py | tee -a $(B)/bench_gemm.txt
	$(PY) tests/bench_gemm_table.py $(B)/bench_gemm.txt
# The streaming benchmark: lwo's stack and PyTorch's peers in one run, then the table.
bench-stream: $(B)/bench_stream
	rm -f $(B)/bench_stream.txt
	LWO_BENCH_OUT=$(B)/bench_stream.txt $(B)/bench_stream
	-$(PY) tests/bench_stream_peers.py $(B)/bench_stream.txt
	$(PY) tests/bench_stream_table.py $(B)/bench_stream.txt
# The benchmark: lwo's kernels and PyTorch in one run; a cold then a warm start in fresh processes.
# Then the demo's whole first start with an empty cache, and its next (tests/time_demo_start.sh).
bench: $(B)/bench $(B)/diffuse
	rm -rf $(B)/bench-cache $(B)/bench.txt
	LWO_CACHE_DIR=$(B)/bench-cache LWO_BENCH_OUT=$(B)/bench.txt $(B)/bench --startup
	LWO_CACHE_DIR=$(B)/bench-cache LWO_BENCH_OUT=$(B)/bench.txt $(B)/bench --startup
	LWO_CACHE_DIR=$(B)/bench-cache LWO_BENCH_OUT=$(B)/bench.txt $(B)/bench
	bash tests/time_demo_start.sh $(B) $(B)/bench.txt
	$(PY) tests/bench_peers.py $(B)/bench.txt

# hello, then the diffusion demo: 100 Fashion-MNIST images (10 classes x 10) from the tiny DiT,
# int8 weights streamed under a budget that holds a quarter of them
# A Flux-sized transformer (about 12 B parameters, random weights) streamed under 8 and 16 GiB and
# resident, per storage format: s/step, VRAM, H2D rate and the transfer bound (examples/bench_dit.c)
# Fill build/lwo-cache with the cubins a GPU run needs, compiled here by NVRTC (no GPU needed):
# a GPU call that carries build/lwo-cache starts without minutes of compiling.
WARM_ARCH ?= sm_90a
$(B)/warm_cache: tools/warm_cache.c examples/dit_common.h $(HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(LIBS)
warm-cache: $(B)/warm_cache
	$(B)/warm_cache --arch $(WARM_ARCH) $(B)/lwo-cache
.PHONY: warm-cache

bench-dit: $(B)/bench_dit
	$(B)/bench_dit

demo: $(B)/hello $(B)/diffuse
	$(B)/hello
	$(B)/diffuse --out $(B)/diffuse.png --raw $(B)/diffuse.f32
	$(B)/diffuse --lora examples/tiny_dit_lora.safetensors --out $(B)/diffuse-lora.png --raw $(B)/diffuse-lora.f32

clean:
	rm -rf $(B)

# ---- safetensors (section 10): interop dumper, fuzz target, corpus replay ----------------------
$(B)/st_dump: tests/st_dump.c $(HDR) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS)
$(B)/fuzz_safetensors-main: tests/fuzz_safetensors.c $(HDR) | $(B)
	$(CLANG) $(CFLAGS) -O1 $(SAN) -DLWO_FUZZ_MAIN -o $@ $< $(LIBS)
# libFuzzer needs clang's fuzzer runtime (Debian: libclang-rt-14-dev); without it, skip with a notice.
$(B)/fuzz_safetensors: tests/fuzz_safetensors.c $(HDR) | $(B)
	@$(CLANG) -std=c99 -O1 -g $(WARN) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -o $@ $< $(LIBS) 2>$(B)/fuzz_safetensors.log || { rm -f $@; \
	  echo "notice: clang's libFuzzer runtime is missing (apt-get install -y libclang-rt-14-dev); timed fuzz skipped"; }
test: $(B)/st_dump $(B)/fuzz_safetensors-main $(B)/fuzz_safetensors
fuzz-safetensors: $(B)/fuzz_safetensors
	mkdir -p $(B)/fuzz-work/safetensors
	$(B)/fuzz_safetensors -max_total_time=$${LWO_FUZZ_TIME:-300} -max_len=4096 $(B)/fuzz-work/safetensors tests/corpus/safetensors
.PHONY: fuzz-safetensors

# ---- make gpu-check: build, GPU tests, sanitizers, the demo, every benchmark; one table; the stamp ----
gpu-check:
	bash tests/gpu_check.sh
.PHONY: gpu-check
