#!/usr/bin/env bash
# gpuemu's pure-Python dependencies the device machine lacks, from the carried wheels in .whl/ into /tmp/site
# (bench/h200/README.md says how to fetch them).
W=.whl
mkdir -p /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  $W/jsonschema-*.whl $W/attrs-*.whl $W/referencing-*.whl $W/jsonschema_specifications-*.whl $W/rpds_py-*.whl || exit 1
# the rest only where the machine lacks it (its torch needs its own typing_extensions, mpmath, ...)
for m in mpmath:mpmath wrapt:wrapt safetensors:safetensors rich:rich opentelemetry.trace:opentelemetry_api yaml:pyyaml; do
  python3 -c "import ${m%%:*}" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --no-compile \
    --target /tmp/site $W/${m#*:}-*.whl || exit 1
done
