#!/usr/bin/env bash
# MultiMNIST training for a fixed time on a machine with a GPU, its best weights packed to travel back in small parts.
#
# Such a machine may be had for minutes, return only a few small files from $OUT, and start bare (a python3 with
# PyTorch). So the run is timed, not counted: --budget-minutes refits the epochs and the rate's decay to the time left
# after every epoch, and the best weights (45 MB) come back as parts of 15 MiB that `python -m model.checkpoint_parts
# unpack` joins and checks. It goes on from weights/multimnist.onnx when that is committed. MNIST is read from
# .device-data/mnist (ignored by git) unless DATA says otherwise; docs/training.md has the whole procedure.
#
#   bash model/multimnist_on_gpu.sh [trainer options...]     env: OUT (required), MINUTES (8), START, DATA, DEVICE, PYTHON
#
# START: `committed` (the default) goes on from weights/multimnist.onnx when it is there, else from the MNIST weights;
# `mnist` starts from the MNIST weights whatever is committed; `scratch` from random weights, the paper's own start.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?OUT: the folder whose files come back}"
MINUTES=${MINUTES:-8}            # of training; with start-up, the last score and the packing, under a call's 10 minutes
DATA=${DATA:-.device-data/mnist}
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
START=${START:-committed}
case "$START" in
  committed | mnist | scratch) ;;
  *) echo "START is committed, mnist or scratch, not '$START'" >&2; exit 2 ;;
esac
RUN=${RUN:-/tmp/multimnist}      # checkpoints stay on the machine; only the packed best weights come back
export PYTHONUNBUFFERED=1 TQDM_MININTERVAL=${TQDM_MININTERVAL:-30}  # a progress line every 30 s, not every step

mkdir -p "$OUT"
{
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
  # from the committed weights when there are some (they are the training state), unless START says otherwise
  start=()
  if [ "$START" = committed ] && [ -f weights/multimnist.onnx ]; then start=(--resume weights/multimnist.onnx); fi
  if [ "$START" = scratch ]; then start=(--init none); fi
  "$PYTHON" -m model.train_multimnist --device "$DEVICE" --data "$DATA" --out "$RUN" --budget-minutes "$MINUTES" \
    "${start[@]}" --bf16 --eval-pairs 3000 --pairs-per-epoch 240000 --batch-size 256 --lr 2.5e-4 --lr-final 1e-5 "$@"
  # epochs of 240k pairs: scoring and saving stay a few % of the time; 256 a batch keeps an H200 at ~9 ms a step
} 2>&1 | tr '\r' '\n' >"$OUT/train.log"
cp "$RUN/history.json" "$OUT/"
"$PYTHON" -m model.checkpoint_parts pack "$RUN/best.pt" "$OUT/best"
tail -n 5 "$OUT/train.log"
