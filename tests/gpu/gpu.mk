# The GPU part of the Makefile (included by it): every program a GPU run builds and every target
# it runs. tests/tools/gpu_stamp.py hashes this file, not the Makefile, so the CPU rules can change
# while the stamp stays current; keep here everything `make gpu-check` uses, and nothing else.
# From the Makefile: B (the build folder), CC, PY, HDR (lwo.h).
GPU_WARN    := -Wall -Wextra -Werror -Wno-overlength-strings
GPU_CFLAGS  := -std=c99 -O2 -g $(GPU_WARN)
# the examples are what users build: -Wpedantic too
EX_CFLAGS   := -std=c99 -O2 -g $(GPU_WARN) -Wpedantic
GPU_LIBS    := -ldl -lm
GPU_HDR     := lwo.h tests/check.h

# the diffusion demo (examples/diffuse.c) and the kernels it shares with bench_dit.c (dit_common.h);
# the demo's own headers: the checkpoint, the CPU reference, the options, the PNG writer
DIT_DEPS     := examples/dit_common.h examples/dit_kernels.cu lwo.h
DIFFUSE_DEPS := examples/diffuse.c examples/dit_model.h examples/dit_ref.h examples/dit_args.h examples/png.h $(DIT_DEPS)

$(B)/hello: examples/hello.c lwo.h | $(B)
	$(CC) $(EX_CFLAGS) -o $@ $< $(GPU_LIBS)
$(B)/diffuse: $(DIFFUSE_DEPS) | $(B)
	$(CC) $(EX_CFLAGS) -o $@ $< $(GPU_LIBS)
$(B)/bench_dit: examples/bench_dit.c $(DIT_DEPS) | $(B)
	$(CC) $(EX_CFLAGS) -o $@ $< $(GPU_LIBS)
# the demo's GPU path against its CPU reference (it includes examples/diffuse.c)
$(B)/test_dit_selftest: tests/gpu/test_dit_selftest.c $(DIFFUSE_DEPS) | $(B)
	$(CC) $(EX_CFLAGS) -o $@ $< $(GPU_LIBS)

# GPU test programs: tests/gpu/test_gpu*.c -> build/test_gpu*
GPU_TESTS := $(B)/test_gpu $(B)/test_gpu_gemm $(B)/test_gpu_graphs $(B)/test_gpu_stream $(B)/test_gpu_safetensors $(B)/test_gpu_plan \
             $(B)/test_gpu_lora $(B)/test_dit_selftest
$(B)/test_gpu: tests/gpu/test_gpu.c $(GPU_HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(GPU_LIBS)
$(B)/test_gpu_%: tests/gpu/test_gpu_%.c $(GPU_HDR) | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(GPU_LIBS)
# benchmarks: tests/bench/*.c
$(B)/bench: tests/bench/bench.c lwo.h | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(GPU_LIBS) -lpthread
$(B)/bench_gemm: tests/bench/bench_gemm.c lwo.h | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(GPU_LIBS)
$(B)/bench_stream: tests/bench/bench_stream.c lwo.h | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(GPU_LIBS)
# Fill build/lwo-cache with the cubins a GPU run needs, compiled here by NVRTC (no GPU needed):
# a GPU call that carries build/lwo-cache starts without minutes of compiling.
WARM_ARCH ?= sm_90a
$(B)/warm_cache: tools/warm_cache.c examples/dit_common.h lwo.h | $(B)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(GPU_LIBS)
warm-cache: $(B)/warm_cache
	$(B)/warm_cache --arch $(WARM_ARCH) $(B)/lwo-cache

GPU_BINS := $(GPU_TESTS) $(B)/hello $(B)/diffuse $(B)/bench_dit $(B)/bench $(B)/bench_gemm $(B)/bench_stream
gpu-build: $(GPU_BINS)
test-gpu: $(GPU_BINS)
	tests/tools/run.sh $(GPU_TESTS)
# The GEMM benchmark: lwo's rows, PyTorch's and Triton's in one run, then the ratios (bench_gemm_table.py).
bench-gemm: $(B)/bench_gemm
	( $(B)/bench_gemm; echo $$? > $(B)/bench_gemm.rc ) | tee $(B)/bench_gemm.txt; exit $$(cat $(B)/bench_gemm.rc)
	-$(PY) tests/bench/bench_gemm_peers.py | tee -a $(B)/bench_gemm.txt
	$(PY) tests/bench/bench_gemm_table.py $(B)/bench_gemm.txt
# The streaming benchmark: lwo's stack and PyTorch's peers in one run, then the table.
bench-stream: $(B)/bench_stream
	rm -f $(B)/bench_stream.txt
	LWO_BENCH_OUT=$(B)/bench_stream.txt $(B)/bench_stream
	-$(PY) tests/bench/bench_stream_peers.py $(B)/bench_stream.txt
	$(PY) tests/bench/bench_stream_table.py $(B)/bench_stream.txt
# The benchmark: lwo's kernels and PyTorch in one run; a cold then a warm start in fresh processes.
# Then the demo's whole first start with an empty cache, and its next (tests/gpu/time_demo_start.sh).
bench: $(B)/bench $(B)/diffuse
	rm -rf $(B)/bench-cache $(B)/bench.txt
	LWO_CACHE_DIR=$(B)/bench-cache LWO_BENCH_OUT=$(B)/bench.txt $(B)/bench --startup
	LWO_CACHE_DIR=$(B)/bench-cache LWO_BENCH_OUT=$(B)/bench.txt $(B)/bench --startup
	LWO_CACHE_DIR=$(B)/bench-cache LWO_BENCH_OUT=$(B)/bench.txt $(B)/bench
	bash tests/gpu/time_demo_start.sh $(B) $(B)/bench.txt
	$(PY) tests/bench/bench_peers.py $(B)/bench.txt
# A Flux-sized transformer (about 12 B parameters, random weights) streamed under 8 and 16 GiB and
# resident, per storage format: s/step, VRAM, H2D rate and the transfer bound (examples/bench_dit.c)
bench-dit: $(B)/bench_dit
	$(B)/bench_dit
# hello, then the diffusion demo: 100 Fashion-MNIST images (10 classes x 10) from the tiny DiT,
# int8 weights streamed under a budget that holds a quarter of them; then with its LoRA
demo: $(B)/hello $(B)/diffuse
	$(B)/hello
	$(B)/diffuse --out $(B)/diffuse.png --raw $(B)/diffuse.f32
	$(B)/diffuse --lora examples/tiny_dit_lora.safetensors --out $(B)/diffuse-lora.png --raw $(B)/diffuse-lora.f32
# build, GPU tests, sanitizers, the demo, every benchmark; one table; the stamp (GPU_CHECK_PARTS: some)
gpu-check:
	bash tests/gpu/gpu_check.sh
.PHONY: gpu-build test-gpu bench bench-gemm bench-stream bench-dit demo warm-cache gpu-check
