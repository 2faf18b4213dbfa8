#!/usr/bin/env bash
# The script behind action.yml. Without arguments: run `gpuemu check` with every CI output, write the
# summary to $GITHUB_STEP_SUMMARY and the exit code to $GITHUB_OUTPUT, and the paths of the outputs this run
# wrote (only when it ran: exit 0 or 1; a configuration error, exit 2, names no file, so no step uploads a stale
# one). It succeeds on 0 or 1 so the upload steps still run, and stops on anything else. With --verdict: exit
# with the code the check step recorded in $GPUEMU_EXIT, so the job is red on a FAIL.
set -uo pipefail

if [[ "${1:-}" == "--verdict" ]]; then
  code="${GPUEMU_EXIT:-}"
  if [[ -z "$code" ]]; then
    echo "::error::gpuemu check did not record an exit code (did the check step run?)"
    exit 2
  fi
  if [[ "$code" == "1" ]]; then
    echo "::error::gpuemu check failed (exit 1): see the job summary, the code scanning alerts and the gpuemu-report artifact"
  elif [[ "$code" != "0" ]]; then
    echo "::error::gpuemu check could not run (exit $code): see the gpuemu check step's log"
  fi
  exit "$code"
fi

: "${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set (this script runs inside GitHub Actions or a test that sets it)}"
PY="${GPUEMU_PYTHON:-python}"
sarif="${INPUT_SARIF:-gpuemu-check.sarif}"
html="${INPUT_HTML:-gpuemu-report.html}"
json="${INPUT_JSON:-gpuemu-check.json}"
junit="${INPUT_JUNIT:-gpuemu-check.junit.xml}"
summary="${GITHUB_STEP_SUMMARY:-gpuemu-summary.md}"

stop() {  # record the exit code (and nothing else) and end the step with it
  echo "exit-code=$1" >> "$GITHUB_OUTPUT"
  echo "::error::gpuemu check could not run (exit $1): $2"
  exit "$1"
}

args=(check --sarif "$sarif" --html "$html" --json "$json" --junit "$junit" --markdown "$summary")
[[ -n "${INPUT_MANIFEST:-}" ]] && args+=(--manifest "$INPUT_MANIFEST")
[[ -n "${INPUT_ITERATIONS:-}" ]] && args+=(--iterations "$INPUT_ITERATIONS")
[[ -n "${INPUT_SEED:-}" ]] && args+=(--seed "$INPUT_SEED")
[[ -n "${INPUT_JOBS:-}" ]] && args+=(--jobs "$INPUT_JOBS")
[[ -n "${INPUT_DEVICE:-}" ]] && args+=(--device "$INPUT_DEVICE")
[[ -n "${INPUT_PRECONDITIONS:-}" ]] && args+=(--preconditions "$INPUT_PRECONDITIONS")
if [[ "${INPUT_RAY:-}" == "local" ]]; then args+=(--ray); elif [[ -n "${INPUT_RAY:-}" ]]; then args+=(--ray "$INPUT_RAY"); fi
attestation=""
if [[ -n "${INPUT_ATTEST_KEY:-}" ]]; then
  attestation="${INPUT_ATTESTATION:-gpuemu-report.dsse.json}"
  args+=(--attest "$INPUT_ATTEST_KEY" --attest-out "$attestation")
fi
if [[ -n "${INPUT_ARGS:-}" ]]; then
  # the free-form extra arguments, split as a POSIX shell splits words (quotes group, backslashes escape) by
  # Python's shlex, never evaluated: $(...), globs and variables stay literal text
  words=$(mktemp)
  if ! "$PY" -c '
import os, shlex, sys
text = os.environ["INPUT_ARGS"]
try:
    words = shlex.split(text)
except ValueError as e:
    sys.exit(f"gpuemu: error: args {text!r}: {e} (quote as in a shell: -k '"'"'softmax*'"'"')")
sys.stdout.write("".join(w + "\0" for w in words))
' > "$words"; then
    rm -f "$words"
    stop 2 "the args input cannot be split into arguments (see the line above)"
  fi
  mapfile -d '' -t extra < "$words"
  rm -f "$words"
  args+=("${extra[@]}")
fi

echo "::group::gpuemu ${args[*]}"
"$PY" -m gpuemu "${args[@]}"
code=$?
echo "::endgroup::"

if [[ "$code" -ne 0 && "$code" -ne 1 ]]; then
  stop "$code" "see the line above (no output file was written)"
fi
# exit 0 or 1: gpuemu checked every output path before running and has just written each of them
{
  echo "exit-code=$code"
  [[ -f "$sarif" ]] && echo "sarif=$sarif"
  [[ -f "$html" ]] && echo "html=$html"
  [[ -f "$json" ]] && echo "json=$json"
  [[ -f "$junit" ]] && echo "junit=$junit"
  [[ -n "$attestation" && -f "$attestation" ]] && echo "attestation=$attestation"
  # the failure store the check wrote (its JSON names it), uploaded as the gpuemu-store artifact for replays
  store=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("store") or "")' "$json" 2>/dev/null)
  [[ -n "$store" && -d "$store/failures" ]] && echo "store=$store"
} >> "$GITHUB_OUTPUT"
exit 0
