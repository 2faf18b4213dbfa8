#!/usr/bin/env bash
# GPU session L, second call (bench/gpu_session_l.md), at once: (1) the GQA probe in variants, each in its own process
# (the first call's probe died on an illegal address with k transposed; PTX of four variants kept), and the faulting
# variant under compute-sanitizer; (2) bench/h200/hook_mem_probe.py: GPT-2 at large size in pair mode with the chunked
# check of sums forced on for CUDA, memory per check, live blocks by frame after the 3rd check and on an OOM.
set -u
export TRITON_CACHE_DIR=/tmp/tc-l2
source bench/h200/common.sh /tmp/resl2
mkdir -p $R/ptx
pack() { tar czf $OUT/l2.tgz -C /tmp resl2; }
SECONDS=0
(PTX_DIR=$R/ptx timeout ${T1:-200} python3 bench/h200/gqa_probe.py > $R/gqa_probe.txt 2>&1
 echo "gqa probe: exit $? at ${SECONDS} s" >> $R/phase.txt
 CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
 if [ -n "$CS" ]; then timeout 150 $CS --tool memcheck --print-limit 5 python3 bench/h200/gqa_probe.py kT_small \
   > $R/sanitizer.txt 2>&1; echo "sanitizer: exit $? at ${SECONDS} s" >> $R/phase.txt
 else echo "no compute-sanitizer" >> $R/phase.txt; fi) &
timeout ${T2:-330} python3 bench/h200/hook_mem_probe.py --steps ${STEPS:-12} > $R/hook_mem.txt 2>&1
echo "hook mem probe: exit $? at ${SECONDS} s" >> $R/phase.txt; pack
wait; pack
cat $R/phase.txt; cat $R/gqa_probe.txt | cut -c1-160; grep -v "^  " $R/hook_mem.txt | tail -40 | cut -c1-250
grep -A27 "live blocks" $R/hook_mem.txt | head -60 | cut -c1-250; grep -i "error\|invalid" $R/sanitizer.txt | head -12 | cut -c1-250
