"""Exports full-size random-weight instances of popular `transformers` architectures (default configurations,
224x224 images, 128-token sequences) into a directory, to time converter_lite at the scale of real deployments:

    python models/zoo/export_full.py OUT_DIR [name ...]
    python -m tools.bench --models-dir OUT_DIR --no-zoo --no-micro --out OUT_DIR/RESULTS.md

The bench models and the zoo are small (tens of microseconds to a millisecond a run), so fixed costs dominate
them; at full size the GEMMs, convolutions and weight traffic do (ResNet-50 at 224x224 has 94 MB of weights,
BERT-base 435 MB), and problems show there that the small models hide (weights streamed from memory every run:
the GEMM's weight prefetch took bert_base from 1.13x to 0.82x onnxruntime's time).  Not part of the build: it needs torch (2.13) and
transformers (5.x), which are not project dependencies, and the files are 9-500 MB each.

BatchNorm statistics are randomised (a freshly initialised model has mean 0 / variance 1 everywhere, and
EfficientNet's then outputs exact zeros, which checks nothing).
"""
import os
import sys

import torch
import transformers as T


def img(model, size=224):
    return model, {"pixel_values": torch.randn(1, 3, size, size)}


def txt(model, seq=128):
    return model, {"input_ids": torch.randint(0, 1000, (1, seq))}


MODELS = {
    "resnet50": lambda: img(T.ResNetModel(T.ResNetConfig())),
    "mobilenet_v1": lambda: img(T.MobileNetV1Model(T.MobileNetV1Config())),
    "mobilenet_v2": lambda: img(T.MobileNetV2Model(T.MobileNetV2Config())),
    # the default EfficientNetConfig is B7 (600x600) with a hidden_dim that does not match its own head
    "efficientnet_b0": lambda: img(T.EfficientNetModel(T.EfficientNetConfig(
        width_coefficient=1.0, depth_coefficient=1.0, image_size=224, hidden_dim=1280))),
    "convnext_tiny": lambda: img(T.ConvNextModel(T.ConvNextConfig())),
    "vit_base": lambda: img(T.ViTModel(T.ViTConfig(), add_pooling_layer=False)),
    "segformer_b0": lambda: img(T.SegformerModel(T.SegformerConfig()), 256),
    "levit": lambda: img(T.LevitModel(T.LevitConfig())),
    "bert_base": lambda: txt(T.BertModel(T.BertConfig())),
    "gpt2": lambda: txt(T.GPT2Model(T.GPT2Config())),
    # more of what users export; each of these found a slow path once (in brackets: what it exercises)
    "convnextv2_tiny": lambda: img(T.ConvNextV2Model(T.ConvNextV2Config())),        # GRN: ReduceL2 over H, W
    "cvt_13": lambda: img(T.CvtModel(T.CvtConfig(), add_pooling_layer=False)),        # attention as Einsum
    "poolformer_s12": lambda: img(T.PoolFormerModel(T.PoolFormerConfig())),           # pooling + GroupNorm
    "glpn_depth": lambda: img(T.GLPNForDepthEstimation(T.GLPNConfig()), 256),         # bilinear Resize
    "dpt_depth": lambda: img(T.DPTForDepthEstimation(T.DPTConfig(image_size=384)), 384),
    "swin_tiny": lambda: img(T.SwinModel(T.SwinConfig())),
    "clip_vision": lambda: img(T.CLIPVisionModel(T.CLIPVisionConfig())),
    "whisper_encoder": lambda: (T.WhisperModel(T.WhisperConfig()).encoder, {"input_features": torch.randn(1, 80, 3000)}),
}


def export(name: str, out_dir: str) -> None:
    torch.manual_seed(0)
    model, feeds = MODELS[name]()
    model.eval()
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 2.0)

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x):
            out = self.m(x)
            return out.last_hidden_state if getattr(out, "last_hidden_state", None) is not None else out[0]

    (key, value), = feeds.items()
    with torch.no_grad():
        torch.onnx.export(Wrapper(), (value,), os.path.join(out_dir, f"{name}.onnx"), input_names=[key],
                          output_names=["output"], opset_version=17, dynamo=False,
                          do_constant_folding=True)
    print("OK", name, flush=True)


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for n in sys.argv[2:] or list(MODELS):
        export(n, out)
