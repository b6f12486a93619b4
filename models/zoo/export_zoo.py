"""Exports the zoo models: small random-weight instances of popular `transformers` architectures.

They stand in for "real models exported from popular model libraries": the classic TorchScript exporter
(opset 17, constant folding) as users run it, with the patterns each architecture brings (DeBERTa's relative
attention, T5's RMS norm and relative bias, Llama's rotary embeddings and SiLU MLP, Swin's window shifts,
RegNet's grouped convs and squeeze-excitation, wav2vec2's 1-D convs and GroupNorm, PoolFormer's average pooling,
ALBERT's factorized embeddings) and one model with dynamic batch/sequence axes (distilbert_dyn).
tests/e2e/test_zoo_models.py converts each and checks it against onnxruntime.

Not part of the build: it needs torch (2.13) and transformers (5.x), which are not project dependencies.
    python models/zoo/export_zoo.py [name ...]      # writes models/zoo/<name>.onnx
"""
import os
import sys

import torch
import transformers as T

OUT = os.path.dirname(os.path.abspath(__file__))
S = 32
def txt(cls_cfg, cls_model, **kw):
    return lambda: (cls_model(cls_cfg(**kw)), {"input_ids": torch.randint(0, 400, (2, S))})
def img(cls_cfg, cls_model, size=64, ch=3, **kw):
    return lambda: (cls_model(cls_cfg(**kw)), {"pixel_values": torch.randn(1, ch, size, size)})
small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
MODELS = {
 "albert": txt(T.AlbertConfig, T.AlbertModel, vocab_size=500, embedding_size=32, **small),
 "deberta_v2": txt(T.DebertaV2Config, T.DebertaV2Model, vocab_size=500, **small),
 "t5_encoder": txt(T.T5Config, T.T5EncoderModel, vocab_size=500, d_model=64, d_kv=32, d_ff=128, num_layers=2, num_heads=2),
 "llama": txt(T.LlamaConfig, T.LlamaModel, vocab_size=500, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4),
 "swin": img(T.SwinConfig, T.SwinModel, size=64, image_size=64, patch_size=4, embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=4),
 "regnet": img(T.RegNetConfig, T.RegNetModel, size=64, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], groups_width=8, embedding_size=16),
 "poolformer": img(T.PoolFormerConfig, T.PoolFormerModel, size=64, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1]),
 "wav2vec2": lambda: (T.Wav2Vec2Model(T.Wav2Vec2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)), {"input_values": torch.randn(1, 4000)}),
}
def export_dynamic():
    """DistilBERT with dynamic batch and sequence axes and an attention mask input."""
    m = T.DistilBertModel(T.DistilBertConfig(dim=64, n_layers=2, n_heads=2, hidden_dim=128, vocab_size=500)).eval()

    class W(torch.nn.Module):
        def __init__(s, m):
            super().__init__()
            s.m = m

        def forward(s, ids, mask):
            return s.m(input_ids=ids, attention_mask=mask).last_hidden_state
    ids, mask = torch.randint(0, 400, (2, 32)), torch.ones(2, 32, dtype=torch.long)
    axes = {0: "batch", 1: "seq"}
    torch.onnx.export(W(m), (ids, mask), os.path.join(OUT, "distilbert_dyn.onnx"),
                      input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"],
                      dynamic_axes={"input_ids": axes, "attention_mask": axes}, opset_version=17, dynamo=False)
    print("OK distilbert_dyn", flush=True)


names = sys.argv[1:] or list(MODELS) + ["distilbert_dyn"]
for name in names:
    torch.manual_seed(0)
    if name == "distilbert_dyn":
        export_dynamic()
        continue
    try:
        model, inputs = MODELS[name]()
        model.eval()
        class W(torch.nn.Module):
            def __init__(s, m): super().__init__(); s.m = m
            def forward(s, *a):
                out = s.m(**dict(zip(inputs, a)))
                return out[0] if isinstance(out, (tuple, list)) else out.last_hidden_state
        with torch.no_grad():
            torch.onnx.export(W(model), tuple(inputs.values()), os.path.join(OUT, f"{name}.onnx"), input_names=list(inputs),
                              output_names=["last_hidden_state"], opset_version=17, dynamo=False, do_constant_folding=True)
        print("OK", name, flush=True)
    except Exception as e:
        print("FAIL", name, type(e).__name__, str(e)[:200], flush=True)
