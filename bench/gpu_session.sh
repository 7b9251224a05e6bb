#!/usr/bin/env bash
# One lent GPU session's measurement (issue 36), sized for one device call of under 10 minutes (a session has
# 15 device minutes, the machine's start included): the rows issue 21's targets name, most important first,
# 150 steps each (130 timed after 20 warm-up steps), then the GPU-marked tests and the CUDA fault test.
#
#   here, once:  python -m bench.bench_gpu --prepare bench/out/gpu-carry   (+ the wheels: bench/README.md)
#   device run:  carry ["bench/out/gpu-carry"], timeout_s 590, command: bash bench/gpu_session.sh
#   here, after: cp FILES_AT/gpu.json bench/out/ && python -m bench.bench_gpu --render bench/out/gpu.json
#
# Each part has its own time limit, so a slow row costs that row and not the tests after it. Everything lands in
# $OUT (the device tool brings it back, even from a call stopped at its limit).
set -u
PY=${PY:-python3}
C=${CARRY:-bench/out/gpu-carry}
OUT=${OUT:-bench/out/gpu-session}
WORK=${WORK:-/tmp/gpu-work}
BENCH_S=${BENCH_S:-400}
TESTS_S=${TESTS_S:-150}  # 0: no tests (a re-measurement)
STEPS=${STEPS:-150}
SETS=${SETS:-}  # e.g. "pad_multiple=1": --set for every sentadapt row (an A/B of one setting)
COMPILE=${COMPILE:-}  # 1: the consert_compiled rows exist (--set compile=on), for ROWS to name
TEACHER_S=${TEACHER_S:-0}  # > 0: the teacher's table vs sentence-transformers' encode (issue 44), at most this long
TEACHER_N=${TEACHER_N:-100000}
# issue 36's targets: ConSERT bf16 vs the bare loop at 96, TF32 at 96, the peer, batch 512, SG-OPT at 16, then
# fp32 (mixed precision must beat it) and the bare loop's TF32 for its ratio
ROWS=${ROWS:-consert-bf16-96,bare-bf16-96,consert-tf32-96,peer-bf16-96,consert-bf16-512,bare-bf16-512,sgopt-fp16-16,consert-fp32-96,bare-tf32-96}
mkdir -p "$OUT" "$WORK"
if [ -d "$C/wheels" ]; then  # datasets, dill and multiprocess: the GPU image lacks them
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$C"/wheels/*.whl || exit 1
    export PYTHONPATH=$PWD:/tmp/site
else
    export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
nvidia-smi -L 2>/dev/null
$PY -c "import torch, transformers, accelerate, datasets; print('torch', torch.__version__, 'cuda', \
torch.cuda.is_available(), 'transformers', transformers.__version__, 'accelerate', accelerate.__version__)"

echo "== bench ($BENCH_S s at most): $ROWS"
SET_ARGS=()
for setting in $SETS; do SET_ARGS+=(--set "$setting"); done
if [ "$BENCH_S" -gt 0 ]; then
    timeout "$BENCH_S" $PY -m bench.bench_gpu --only "$ROWS" --steps "$STEPS" --warmup-steps 20 "${SET_ARGS[@]}" \
        --tokenizer "$C/tokenizer" --corpus "$C/corpus.txt" --out "$OUT/gpu.json" --work "$WORK" ${SMOKE:+--smoke} \
        ${COMPILE:+--compile}
    echo "bench exit $?"
    tar czf "$OUT/logs.tgz" -C "$WORK" logs 2>/dev/null  # each row's output and its train.log (rate per 10 steps)
fi

if [ "$TEACHER_S" -gt 0 ]; then
    echo "== the teacher's table vs sentence-transformers' encode ($TEACHER_S s at most)"
    timeout "$TEACHER_S" $PY -m bench.bench_teacher_encode --tokenizer "$C/tokenizer" --corpus "$C/corpus.txt" \
        --sentences "$TEACHER_N" --work "$WORK/teacher" --out "$OUT/teacher-encode.json" ${SMOKE:+--smoke} 2>&1 \
        | grep -v "Loading weights\|Writing model"
    echo "teacher exit ${PIPESTATUS[0]}"
fi

[ "$TESTS_S" -gt 0 ] || exit 0
echo "== GPU-marked tests and the CUDA fault test ($TESTS_S s at most)"
timeout "$TESTS_S" $PY -m pytest -q -p no:cacheprovider -rs tests/train/test_gpu_training.py tests/evaluation/test_eval_dtype.py \
    "tests/run/test_faults.py::test_preemption_signal_checkpoints_exits_128_plus_n_and_the_same_command_resumes_exactly" \
    2>&1 | tee "$OUT/tests.txt" | tail -15
echo "tests exit ${PIPESTATUS[0]}"
