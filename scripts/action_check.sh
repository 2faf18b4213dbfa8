#!/usr/bin/env bash
# The script behind action.yml. Without arguments: run `gpuemu check` with every CI output, write the
# summary to $GITHUB_STEP_SUMMARY and the paths and exit code to $GITHUB_OUTPUT, and succeed on 0 or 1 so
# the upload steps still run (a configuration error, exit 2, stops here). With --verdict: exit with the
# code the check step recorded in $GPUEMU_EXIT, so the job is red on a FAIL.
set -uo pipefail

if [[ "${1:-}" == "--verdict" ]]; then
  code="${GPUEMU_EXIT:-}"
  if [[ -z "$code" ]]; then
    echo "::error::gpuemu check did not record an exit code (did the check step run?)"
    exit 2
  fi
  if [[ "$code" != "0" ]]; then
    echo "::error::gpuemu check failed (exit $code): see the job summary, the code scanning alerts and the gpuemu-report artifact"
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

args=(check --sarif "$sarif" --html "$html" --json "$json" --junit "$junit" --markdown "$summary")
[[ -n "${INPUT_MANIFEST:-}" ]] && args+=(--manifest "$INPUT_MANIFEST")
[[ -n "${INPUT_ITERATIONS:-}" ]] && args+=(--iterations "$INPUT_ITERATIONS")
[[ -n "${INPUT_SEED:-}" ]] && args+=(--seed "$INPUT_SEED")
[[ -n "${INPUT_JOBS:-}" ]] && args+=(--jobs "$INPUT_JOBS")
[[ -n "${INPUT_DEVICE:-}" ]] && args+=(--device "$INPUT_DEVICE")
if [[ "${INPUT_RAY:-}" == "local" ]]; then args+=(--ray); elif [[ -n "${INPUT_RAY:-}" ]]; then args+=(--ray "$INPUT_RAY"); fi
attestation=""
if [[ -n "${INPUT_ATTEST_KEY:-}" ]]; then
  attestation="gpuemu-report.dsse.json"
  args+=(--attest "$INPUT_ATTEST_KEY" --attest-out "$attestation")
fi
if [[ -n "${INPUT_ARGS:-}" ]]; then
  # word-split the free-form extra arguments on purpose (no eval: they are data, not code)
  read -r -a extra <<< "$INPUT_ARGS"
  args+=("${extra[@]}")
fi

echo "::group::gpuemu ${args[*]}"
"$PY" -m gpuemu "${args[@]}"
code=$?
echo "::endgroup::"

{
  echo "exit-code=$code"
  [[ -f "$sarif" ]] && echo "sarif=$sarif"
  [[ -f "$html" ]] && echo "html=$html"
  [[ -f "$json" ]] && echo "json=$json"
  [[ -f "$junit" ]] && echo "junit=$junit"
  [[ -n "$attestation" && -f "$attestation" ]] && echo "attestation=$attestation"
} >> "$GITHUB_OUTPUT"

if [[ "$code" -ne 0 && "$code" -ne 1 ]]; then
  echo "::error::gpuemu check could not run (exit $code): see the line above"
  exit "$code"
fi
exit 0
