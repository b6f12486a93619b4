"""Exports random-weight torchvision and timm image models at their usual input size (224x224; inception_v3
299x299) into a directory, as stand-ins for the held-out set ("real models exported from popular model
libraries"), to check they convert, match onnxruntime and run fast:

    python models/zoo/export_vision.py OUT_DIR [lib:name[@size] ...]
    python -m tools.bench --models-dir OUT_DIR --no-zoo --no-micro --out OUT_DIR/RESULTS.md

Each model is exported in its own process (a failing export does not stop the others) with the TorchScript
exporter at opset 17, constants folded, as export_full.py does.  Not part of the build: it needs torch 2.13,
torchvision 0.28 and timm (1.0), which are not project dependencies.  On a machine without a CUDA runtime
the PyPI torchvision wheel fails to import (its meta registrations need its C++ operators); removing
``_autograd_registrations`` and ``_meta_registrations`` from the import list in torchvision/__init__.py is
enough for exporting these models.  BatchNorm statistics are randomised (see export_full.py).

What they found (the fixes are in the git log): depthwise kernels wider than 7 (MixNet's 9x9 and 11x11) ran on
numpy; a Concat before an SE block's spatial mean divided every element's offset; ConvNeXt's depthwise convs
took the NHWC tap kernel where the native driver is faster; direct convolutions split by channels on large
images.  vit_b_16 (torchvision) does not export at opset 17 (aten::_native_multi_head_attention) and
eva02 (timm) fails in torch's tracer.
"""
import os
import subprocess
import sys

MODELS = """
tv:resnet18 tv:mobilenet_v3_small tv:mobilenet_v3_large tv:efficientnet_b0 tv:efficientnet_v2_s
tv:regnet_y_400mf tv:regnet_x_800mf tv:shufflenet_v2_x1_0 tv:squeezenet1_1 tv:densenet121 tv:googlenet
tv:inception_v3@299 tv:mnasnet1_0 tv:alexnet tv:resnext50_32x4d tv:convnext_tiny tv:swin_t tv:swin_v2_t
tv:maxvit_t
timm:resnet50d timm:mobilenetv3_large_100 timm:convnext_nano timm:regnety_008 timm:deit_tiny_patch16_224
timm:vit_small_patch16_224 timm:levit_128s timm:mobilevit_s timm:edgenext_small timm:ghostnet_100
timm:rexnet_100 timm:hrnet_w18_small timm:cspdarknet53 timm:dla34 timm:dpn68 timm:resnest14d timm:repvgg_a0
timm:efficientformer_l1 timm:fastvit_t8 timm:lcnet_050 timm:mixnet_s timm:xception41 timm:nf_resnet26
timm:gernet_s timm:sequencer2d_s timm:mixer_b16_224 timm:resmlp_12_224 timm:gmlp_s16_224 timm:crossvit_tiny_240
timm:pit_ti_224 timm:twins_pcpvt_small timm:visformer_tiny timm:xcit_nano_12_p16_224 timm:hgnetv2_b0
timm:mobileone_s0 timm:efficientvit_b0 timm:inception_next_tiny timm:tiny_vit_5m_224 timm:coat_lite_tiny
timm:convit_tiny timm:nest_tiny timm:res2net50_26w_4s timm:selecsls42b timm:tresnet_m timm:vovnet39a
timm:cait_xxs24_224 timm:mobilenetv4_conv_small timm:fbnetv3_b timm:ese_vovnet19b_dw
""".split()  # noqa: SIM905 (a list of 68 names reads better as text)


def export(spec: str, out_dir: str) -> None:
    import torch
    lib, rest = spec.split(":")
    name, _, size = rest.partition("@")
    torch.manual_seed(0)
    if lib == "tv":
        import torchvision
        kw = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
        model = getattr(torchvision.models, name)(**kw)
    else:
        import timm
        model = timm.create_model(name, pretrained=False)
    model.eval()
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) and mod.running_mean is not None:
                if mod.weight is not None:
                    mod.weight.uniform_(0.5, 1.5)
                    mod.bias.uniform_(-0.2, 0.2)
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 2.0)
        x = torch.randn(1, 3, int(size or 224), int(size or 224))
        torch.onnx.export(model, (x,), os.path.join(out_dir, f"{lib}_{name}.onnx"), input_names=["x"],
                          output_names=["y"], opset_version=17, dynamo=False, do_constant_folding=True)
    print("OK", spec, flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        export(sys.argv[2], os.environ["EXPORT_DIR"])
        sys.exit(0)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for spec in sys.argv[2:] or MODELS:
        r = subprocess.run([sys.executable, __file__, "--one", spec], check=False, env={**os.environ, "EXPORT_DIR": out})
        if r.returncode:
            print("FAILED", spec, flush=True)
