#!/bin/sh
# What `make demo` runs: one `kiln train` run, sized to the machine.
#   - data: MedMNIST's AdrenalMNIST3D (28^3 CT crops, binary) from where MedMNIST keeps it
#     ($MEDMNIST_ROOT, else ~/.medmnist), downloaded there when missing and the network
#     allows (0.3 MB, MD5-checked); otherwise generated volumes (balls, cubes, jacks), and
#     it says so;
#   - on a GPU: the MedMNIST v2 benchmark's full recipe (ResNet-18, Adam 1e-3, batch 32,
#     100 epochs, x0.1 at 50% and 75%, best model by val AUC) with mixed precision and
#     cuDNN's benchmark mode;
#   - on a CPU: the same recipe with a ResNet-18 a quarter wide for 4 epochs, about two
#     minutes on two cores.
# It ends with the test ACC/AUC of the best and final weights, where the time went, and
# where the logs are (runs/demo).
# Usage: scripts/demo.sh path/to/kiln
set -eu
kiln=${1:?usage: scripts/demo.sh path/to/kiln}

if "$kiln" data download adrenalmnist3d; then
  data="--dataset adrenalmnist3d --size 28"
else
  echo "demo: AdrenalMNIST3D could not be fetched (no network?): training on generated volumes instead"
  data="--dataset synthetic --size 28 --synthetic-samples 1024"
fi

if "$kiln" info | grep -q "^CUDA not available"; then
  machine="--device cpu --model resnet18 --width 0.25 --epochs 4 --workers 2"
else
  machine="--device cuda --amp O1 --cudnn-benchmark --workers 4"
fi

# shellcheck disable=SC2086  # the settings are words
exec "$kiln" train --recipe medmnist $data $machine --out runs/demo --overwrite
