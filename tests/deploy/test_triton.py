"""The Triton model repository: every config.pbtxt parses as tritonclient's ModelConfig and agrees with the ONNX graph
that its model.onnx is (read here through onnxruntime, not through the generator's own reader)."""

from __future__ import annotations

import hashlib
import json
import posixpath
from pathlib import Path

import onnxruntime as ort
import pytest
from tritonclient.grpc import model_config_pb2 as mc

from deploy.triton.__main__ import COMMITTED, main
from deploy.triton.config import Serving, api_dims, build_config, parse_pbtxt
from deploy.triton.graph import Tensor, read_signature
from service.settings import Settings
from tests.conftest import WEIGHTS

CARD = json.loads((WEIGHTS / "model-card.json").read_text())
TRITON_TYPES = {"tensor(float)": mc.TYPE_FP32, "tensor(int64)": mc.TYPE_INT64}
PAIR_MODELS = ["multimnist", "multimnist-decoder"]
MODELS = ["capsnet", "decoder"] + (PAIR_MODELS if "multimnist" in CARD else [])  # the two-digit network where the card has it


def _configs(root: Path) -> dict[str, mc.ModelConfig]:
    return {p.parent.name: parse_pbtxt(p.read_text()) for p in sorted(root.glob("*/config.pbtxt"))}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_against_graph(config: mc.ModelConfig, onnx_file: Path) -> None:
    """Names, types and dims of every input and output, as Triton will check them when it loads the model."""
    session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    for declared, graph in ((config.input, session.get_inputs()), (config.output, session.get_outputs())):
        assert [t.name for t in declared] == [g.name for g in graph]
        for t, g in zip(declared, graph):
            assert t.data_type == TRITON_TYPES[g.type], t.name
            assert isinstance(g.shape[0], str), f"{g.name}: the graph's first axis is the dynamic batch axis"
            if len(g.shape) == 1:  # [N]: declared [1], reshaped to [] for the model
                assert list(t.dims) == [1] and t.HasField("reshape") and list(t.reshape.shape) == [], t.name
            else:
                assert list(t.dims) == g.shape[1:] and not t.HasField("reshape"), t.name


def test_the_committed_repository_holds_every_model():
    configs = _configs(COMMITTED)
    assert sorted(configs) == MODELS
    for name, config in configs.items():
        assert config.name == name and config.backend == "onnxruntime"
        assert sorted(p.name for p in (COMMITTED / name).iterdir()) == ["1", "config.pbtxt"]


@pytest.mark.parametrize("name", MODELS)
def test_each_committed_config_matches_its_onnx_graph(name):
    config = parse_pbtxt((COMMITTED / name / "config.pbtxt").read_text())
    model = COMMITTED / name / "1" / "model.onnx"
    assert model.is_file(), f"{model} does not resolve"
    _check_against_graph(config, model)


def test_the_committed_models_are_links_to_the_served_weights():
    """GPU instances serve FP32 (auto on a GPU, as the service chooses), the decoder as it is; no copy of the weights in git."""
    pairs = CARD["multimnist"]["files"] if "multimnist" in CARD else {}
    for name, source, files in (
        ("capsnet", "capsnet.onnx", CARD["files"]),
        ("decoder", "decoder.onnx", CARD["files"]),
        *((("multimnist", "multimnist.onnx", pairs), ("multimnist-decoder", "multimnist-decoder.onnx", pairs)) if pairs else ()),
    ):
        link = COMMITTED / name / "1" / "model.onnx"
        assert link.is_symlink() and link.resolve() == (WEIGHTS / source).resolve()
        assert _sha256(link) == files[source]["sha256"]
        # the compose service mounts the repository at /models and weights/ at /weights: the same link resolves there
        assert posixpath.normpath(posixpath.join(f"/models/{name}/1", str(link.readlink()))) == f"/weights/{source}"


def test_batching_warmup_and_instances():
    configs = _configs(COMMITTED)
    settings = Settings.model_fields
    capsnet, decoder = configs["capsnet"], configs["decoder"]
    assert capsnet.max_batch_size == settings["max_batch"].default
    # the front's largest decoder calls: ten counterfactuals per image of a full batch, and a whole /perturb grid
    assert decoder.max_batch_size >= (CARD["architecture"]["num_classes"] - 1) * capsnet.max_batch_size  # nine redraws an image
    assert decoder.max_batch_size >= CARD["architecture"]["digit_dim"] * settings["max_deltas"].default
    for config in configs.values():
        assert config.HasField("dynamic_batching") and config.dynamic_batching.max_queue_delay_microseconds == 0
        assert [(g.kind, g.count) for g in config.instance_group] == [(mc.ModelInstanceGroup.KIND_GPU, 1)]
        assert [w.batch_size for w in config.model_warmup] == [config.max_batch_size, 1]  # largest first: one TensorRT profile
        for warmup in config.model_warmup:
            assert sorted(warmup.inputs) == sorted(t.name for t in config.input)
            for t in config.input:
                w = warmup.inputs[t.name]
                assert (w.data_type, list(w.dims), w.zero_data) == (t.data_type, list(t.dims), True)
        assert not config.optimization.execution_accelerators.gpu_execution_accelerator, "TensorRT is an option, off by default"


def test_the_committed_repository_is_what_the_command_writes(tmp_path):
    main(["--out", str(tmp_path)])
    for name in MODELS:
        assert (tmp_path / name / "config.pbtxt").read_text() == (COMMITTED / name / "config.pbtxt").read_text(), (
            f"{name}/config.pbtxt is stale: run `python -m deploy.triton`"
        )


def test_tensorrt_fp16_is_an_option(tmp_path):
    main(["--out", str(tmp_path), "--tensorrt-fp16"])
    configs = _configs(tmp_path)
    assert sorted(configs) == sorted(MODELS)
    for config in configs.values():
        (accelerator,) = config.optimization.execution_accelerators.gpu_execution_accelerator
        assert accelerator.name == "tensorrt" and accelerator.parameters["precision_mode"] == "FP16"
        assert int(accelerator.parameters["max_workspace_size_bytes"]) > 0
    with pytest.raises(ValueError, match="GPU instance only"):
        main(["--out", str(tmp_path / "cpu"), "--kind", "cpu", "--tensorrt-fp16"])
    with pytest.raises(ValueError, match="FP32 file"):
        main(["--out", str(tmp_path / "int8"), "--precision", "int8", "--tensorrt-fp16"])


def test_cpu_instances_serve_the_int8_file_as_copies(tmp_path):
    main(["--out", str(tmp_path), "--kind", "cpu", "--copy"])
    configs = _configs(tmp_path)
    model = tmp_path / "capsnet" / "1" / "model.onnx"
    assert not model.is_symlink() and _sha256(model) == CARD["int8"]["sha256"]
    _check_against_graph(configs["capsnet"], model)
    assert {g.kind for c in configs.values() for g in c.instance_group} == {mc.ModelInstanceGroup.KIND_CPU}


def test_copies_are_refused_in_the_committed_repository():
    with pytest.raises(SystemExit, match="--out elsewhere"):
        main(["--copy"])


def test_only_the_batch_axis_may_be_dynamic():
    assert api_dims(Tensor("pose", "FLOAT", ("batch", 16))) == ([16], False)
    assert api_dims(Tensor("digit", "INT64", ("batch",))) == ([1], True)
    with pytest.raises(ValueError, match="dynamic batch axis"):
        api_dims(Tensor("x", "FLOAT", (4, 16)))
    with pytest.raises(ValueError, match="only the batch axis"):
        api_dims(Tensor("x", "FLOAT", ("batch", "width")))


def test_a_type_triton_cannot_take_is_refused():
    signature = read_signature(WEIGHTS / "decoder.onnx")
    odd = type(signature)((Tensor("s", "STRING", ("batch", 1)),), signature.outputs)
    with pytest.raises(ValueError, match="no Triton data type"):
        build_config("odd", odd, Serving(max_batch_size=1))


def test_the_graph_check_catches_a_wrong_declaration():
    config = parse_pbtxt((COMMITTED / "decoder" / "config.pbtxt").read_text())
    config.input[0].ClearField("reshape")  # digit declared [1] but fed to the model as [N,1]
    with pytest.raises(AssertionError):
        _check_against_graph(config, WEIGHTS / "decoder.onnx")
    config = parse_pbtxt((COMMITTED / "capsnet" / "config.pbtxt").read_text())
    config.output[1].dims[:] = [16, 10]
    with pytest.raises(AssertionError):
        _check_against_graph(config, WEIGHTS / "capsnet.onnx")


def test_the_two_digit_network_joins_the_repository_where_the_card_has_it(tmp_path, pair_weights):
    """`python -m deploy.triton` on weights whose card has the MultiMNIST network: both of its graphs, each config matching
    its graph, batched as the MNIST pair (the network as the front's /predict, its decoder as the MNIST decoder)."""
    main(["--weights", str(pair_weights), "--out", str(tmp_path)])
    configs = _configs(tmp_path)
    assert sorted(configs) == ["capsnet", "decoder", *PAIR_MODELS]
    for name in PAIR_MODELS:
        _check_against_graph(configs[name], tmp_path / name / "1" / "model.onnx")
        assert (tmp_path / name / "1" / "model.onnx").resolve().parent == pair_weights.resolve()
    assert configs["multimnist"].max_batch_size == configs["capsnet"].max_batch_size
    assert configs["multimnist-decoder"].max_batch_size == configs["decoder"].max_batch_size
