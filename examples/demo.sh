#!/usr/bin/env bash
# The 5-minute tour: a buggy softmax that torch.allclose accepts, caught, shrunk, explained and replayed.
# Exits 0 when gpuemu behaves as described (correct kernel passes, buggy one fails, replay matches).
set -u
cd "$(dirname "$0")/.."
store=.gpuemu-demo
rm -rf "$store"
export TRITON_INTERPRET=1
show() { printf '\n$ %s\n' "$*"; "$@"; }

show python examples/allclose_check.py examples/kernels/softmax.py:softmax_tail_leak --op softmax
show gpuemu fuzz examples/kernels/softmax.py:softmax --op softmax --iterations 60 --seed 7 --store "$store"
rc_ok=$?
show gpuemu fuzz examples/kernels/softmax.py:softmax_tail_leak --op softmax --iterations 60 --seed 7 --store "$store" --json "$store/run.json"
rc_bug=$?
seed=$(python -c "import json,sys; r=json.load(open('$store/run.json')); print(hex(r['failures'][0]['case']['seed']) if r['failures'] else '')")
rc_rep=1
if [ -n "$seed" ]; then
  show gpuemu reproduce "$seed" --store "$store"
  rc_rep=$?
fi
printf '\ncorrect kernel: exit %s (want 0) · buggy kernel: exit %s (want 1) · replay: exit %s (want 1: still failing)\n' "$rc_ok" "$rc_bug" "$rc_rep"
[ "$rc_ok" = 0 ] && [ "$rc_bug" = 1 ] && [ "$rc_rep" = 1 ]
