# capsnet-serve: `make run` serves the committed weights; `make test` runs every test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000
DATA   ?= ../shared/data/mnist
EPOCHS ?= 30
CHECKPOINT ?= checkpoints/best.pt

SERVE_REQS := requirements/serve.txt requirements/ort-cpu.txt
DEV_REQS   := $(SERVE_REQS) requirements/train.txt requirements/test.txt

.PHONY: install run test train resume train-multimnist export-multimnist calibrate-pairs evaluate export quantize calibrate atlas routing baseline robustness screenshots bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.serve-installed: $(SERVE_REQS) | $(BIN)/python
	$(BIN)/pip install -q $(addprefix -r ,$(SERVE_REQS))
	touch $@

$(VENV)/.dev-installed: $(DEV_REQS) tests/static/package-lock.json | $(BIN)/python
	$(BIN)/pip install -q $(addprefix -r ,$(DEV_REQS))
	cd tests/static && npm ci --no-audit --no-fund --silent  # axe-core, for the page's accessibility checks
	touch $@ $(VENV)/.serve-installed

install: $(VENV)/.dev-installed  ## everything: serving, training and tests

run: $(VENV)/.serve-installed  ## serve weights/ on http://$(HOST):$(PORT)
	CAPSNET_HOST=$(HOST) CAPSNET_PORT=$(PORT) $(BIN)/python -m service

test: $(VENV)/.dev-installed  ## lint (ruff check, ruff format --check), then every test (browser tests skip without Chromium unless CAPSNET_REQUIRE_BROWSER=1)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest tests

train: $(VENV)/.dev-installed  ## train from scratch on MNIST in $(DATA), checkpoints in checkpoints/
	$(BIN)/python -m model.train --data $(DATA) --epochs $(EPOCHS)

resume: $(VENV)/.dev-installed  ## keep training: from checkpoints/last.pt if there is one, else from weights/capsnet.onnx
	$(BIN)/python -m model.train --data $(DATA) --epochs $(EPOCHS) --resume $$( [ -f checkpoints/last.pt ] && echo checkpoints/last.pt || echo weights/capsnet.onnx )

PAIR_RESUME := $(or $(RESUME),$(wildcard weights/multimnist.onnx))
train-multimnist: $(VENV)/.dev-installed  ## MultiMNIST (two overlapping digits, 36x36): goes on from weights/multimnist.onnx when it is there, else from the MNIST weights; checkpoints in checkpoints/multimnist/ (RESUME=checkpoints/multimnist/last.pt continues one)
	$(BIN)/python -m model.train_multimnist --data $(DATA) $(if $(PAIR_RESUME),--resume $(PAIR_RESUME)) $(ARGS)

export-multimnist: $(VENV)/.dev-installed  ## checkpoints/multimnist/best.pt -> weights/multimnist*.onnx and the card's multimnist entry, only if it reads both digits of 0.5 point more of the 10,000 test pairs; then calibrate-pairs and its atlas
	$(BIN)/python -m model.export_multimnist --data $(DATA)
	$(MAKE) calibrate-pairs
	$(BIN)/python -m model.atlas --data $(DATA) --network multimnist

calibrate-pairs: $(VENV)/.dev-installed  ## the two-digit network's one-or-two rule, fitted on training digits alone and in pairs as they arrive through each path (pixels, upload, canvas) -> the card's multimnist.second_digit, with its figures on test digits
	$(BIN)/python -m bench.pair_paths --calibrate --n 1000 --data $(DATA)

evaluate: $(VENV)/.dev-installed  ## accuracy of weights/capsnet.onnx on the 10k test set (onnxruntime)
	$(BIN)/python -m model.evaluate --data $(DATA) --onnx weights/capsnet.onnx

export: $(VENV)/.dev-installed  ## $(CHECKPOINT) -> weights/*.onnx (FP32 and INT8) + model card (parity-checked, accuracy measured)
	$(BIN)/python -m model.export --checkpoint $(CHECKPOINT) --data $(DATA)

quantize: $(VENV)/.dev-installed  ## weights/capsnet.onnx -> weights/capsnet-int8.onnx and decoder.onnx -> decoder-int8.onnx (the counterfactual redraws), accuracy, verdicts kept and speed-up in the model card
	$(BIN)/python -m model.quantize --data $(DATA) $(if $(wildcard build/honesty/held-out.npz),--held-out build/honesty/held-out.npz)

calibrate: $(VENV)/.dev-installed  ## the is_digit rule, fitted on MNIST and generated letters, scribbles and blank paper (fonts of requirements/fonts.txt) -> weights/model-card.json with its held-out figures
	$(BIN)/python -m bench.honesty --split calibration --scale 3 --precision fp32 --data $(DATA) --save-inputs build/honesty/calibration.npz --results build/honesty
	$(BIN)/python -m bench.honesty --split held_out --precision fp32 --data $(DATA) --save-inputs build/honesty/held-out.npz --results build/honesty
	$(BIN)/python -m model.calibrate --data $(DATA) --sets build/honesty/calibration.npz --held-out build/honesty/held-out.npz

atlas: $(VENV)/.dev-installed  ## what each pose dimension does, measured, for both networks -> weights/dimensions.json, multimnist-dimensions.json (GET /dimensions, the sliders' names)
	$(BIN)/python -m model.atlas --data $(DATA)
	$(BIN)/python -m model.atlas --data $(DATA) --network multimnist

routing: $(VENV)/.dev-installed  ## routing unrolled past the trained 3 iterations -> weights/routing.onnx (?include=routing; export runs it too)
	$(BIN)/python -m model.routing

baseline: $(VENV)/.dev-installed  ## the comparison CNN, trained like CapsNet -> weights/baseline-cnn.onnx (for `make robustness`)
	$(BIN)/python -m model.baseline --data $(DATA)

robustness: $(VENV)/.dev-installed  ## CapsNet vs the baseline CNN under rotation, scale, shear -> model card + docs/robustness.png
	$(BIN)/python -m model.robustness --data $(DATA)

screenshots: $(VENV)/.dev-installed  ## the page's screenshots in Chromium -> docs/screenshot.png, docs/pairs.png (the README's), docs/pairs-apart.png (after new weights)
	$(BIN)/python -m harness.screenshots --data $(DATA)

bench: $(VENV)/.dev-installed  ## benchmarks -> bench/results/*.json and BENCHMARKS.md
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache test-output build
