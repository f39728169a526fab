"""The Python module `kiln` (python/, docs/PYTHON.md), as a user calls it.

    test_kiln.py SOURCE_DIR BUILD_DIR SCRATCH_DIR

Runs under Debian's python3 (NumPy 1.24, torch 1.13) and under the build
tree's venv (NumPy 2, torch 2.x): load, compile, run with NumPy arrays and
torch tensors (no copy of a contiguous input; outputs over Kiln's memory),
artifacts and size sets, errors as kiln.Error, one Executable run from
several Python threads at once, and kiln.from_torch.
"""

import os
import sys
import threading

import numpy as np

SRC, BUILD, SCRATCH = sys.argv[1:4]
sys.path.insert(0, os.path.join(BUILD, "python"))
import kiln  # noqa: E402

MLP = os.path.join(SRC, "examples", "mlp")
SIZE_SET = os.path.join(SRC, "tests", "lit", "tools", "artifact", "size-set.kir")
os.makedirs(SCRATCH, exist_ok=True)


def expect_error(fn, *pieces):
    try:
        fn()
    except kiln.Error as e:
        text = str(e)
        for p in pieces:
            assert p in text, (p, text)
        return text
    raise AssertionError(f"no kiln.Error (wanted {pieces})")


def mlp_data():
    x = np.load(os.path.join(MLP, "x.npy"))
    want = np.load(os.path.join(MLP, "expected_output_0.npy"))
    return x, want


def test_compile_and_run_numpy():
    model = kiln.load(os.path.join(MLP, "mlp.kir"))
    assert isinstance(model, kiln.Model)
    assert model.inputs == [("x", "f32", [4, 64])], model.inputs
    assert model.outputs == [("probs", "f32", [4, 10])], model.outputs
    exe = kiln.compile(model, threads=1)
    x, want = mlp_data()
    y = exe(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (4, 10)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-6)
    (same,) = exe.run(x)  # run() always returns a list
    np.testing.assert_array_equal(same, y)
    # The output is a view of Kiln's output block, kept alive by the array.
    assert isinstance(y.base, memoryview) and type(y.base.obj).__name__ == "_OutputBuffer", y.base
    # A Fortran-order input is copied to C order once, same result.
    np.testing.assert_array_equal(exe(np.asfortranarray(x)), y)
    # compile() of a path loads it first.
    np.testing.assert_array_equal(kiln.compile(os.path.join(MLP, "mlp.kir"), threads=1)(x), y)


def test_torch_in_torch_out():
    import torch
    exe = kiln.compile(os.path.join(MLP, "mlp.kir"), threads=1)
    x, want = mlp_data()
    y = exe(torch.from_numpy(x))
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32, type(y)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-6)
    # A Parameter, a tensor that requires grad and a transposed view: read
    # (the view copied once), outputs torch tensors.
    for t in (torch.nn.Parameter(torch.from_numpy(x)),
              torch.from_numpy(x).clone().requires_grad_(True),
              torch.from_numpy(np.ascontiguousarray(x.T)).T):
        got = exe(t)
        assert isinstance(got, torch.Tensor), type(got)
        np.testing.assert_array_equal(got.numpy(), y.numpy())


def test_errors():
    exe = kiln.compile(os.path.join(MLP, "mlp.kir"), threads=1)
    expect_error(lambda: exe(np.zeros((3, 64), np.float32)), "input 0", "f32[4,64]",
                 "f32[3,64]")
    expect_error(lambda: exe(np.zeros((4, 64), np.uint64)), "input 0", "no dtype")
    expect_error(lambda: exe("text"), "input 0 is a str, not an array")
    expect_error(lambda: exe(), "input")
    expect_error(lambda: kiln.compile(os.path.join(MLP, "mlp.kir"), threads=-1), "threads = -1")
    expect_error(lambda: kiln.compile(os.path.join(MLP, "mlp.kir"), max_specializations=0),
                 "max_specializations")
    expect_error(lambda: kiln.load(os.path.join(SCRATCH, "no-such.onnx")), "no-such.onnx")
    assert issubclass(kiln.Error, RuntimeError)


def test_artifact_round_trip():
    exe = kiln.compile(os.path.join(MLP, "mlp.kir"), threads=1)
    path = os.path.join(SCRATCH, "mlp.kiln")
    exe.save(path)
    again = kiln.load(path)
    assert isinstance(again, kiln.Executable)
    x, _ = mlp_data()
    np.testing.assert_array_equal(again(x), exe(x))
    expect_error(lambda: kiln.compile(path), "compiled artifact already")


def test_to_mlir():
    # kiln.to_mlir writes what `kiln translate --emit=mlir` writes.
    model = os.path.join(MLP, "mlp.kir")
    try:
        text = kiln.to_mlir(model)
    except kiln.Error as e:
        assert "built without MLIR" in str(e), str(e)
        return
    import subprocess
    cli = subprocess.run([os.path.join(BUILD, "tools", "kiln"), "translate", model],
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert text == cli.stdout
    assert "linalg." in text and "func.func @" in text
    assert "dense_resource<" in kiln.to_mlir(model, pipeline=False, inline_elements=0)


def test_compile_cuda():
    # kiln.compile_cuda writes what `kiln compile --target cuda -o` writes;
    # kiln.load gives a CudaModel that runs as the CPU does on a GPU, and
    # says why not where there is none.
    path, cli = os.path.join(SCRATCH, "mlp-gpu.kiln"), os.path.join(SCRATCH, "mlp-gpu-cli.kiln")
    model = os.path.join(MLP, "mlp.kir")
    try:
        kiln.compile_cuda(model, path)
    except kiln.Error as e:
        assert "built without the CUDA backend" in str(e), str(e)
        return
    import subprocess
    subprocess.run([os.path.join(BUILD, "tools", "kiln"), "compile", model, "--target", "cuda",
                    "-o", cli], check=True, stdout=subprocess.DEVNULL)
    with open(path, "rb") as a, open(cli, "rb") as b:
        assert a.read() == b.read()
    try:
        gpu = kiln.load(path)
    except kiln.Error as e:
        assert f"CUDA artifact '{path}'" in str(e), str(e)
        assert "no CUDA driver" in str(e) or "no GPU" in str(e), str(e)
    else:
        assert isinstance(gpu, kiln.CudaModel)
        x, want = mlp_data()
        np.testing.assert_allclose(gpu(x), want, rtol=1e-4, atol=1e-5)
        assert gpu.inputs == [("x", "f32", [4, 64])]
    expect_error(lambda: kiln.load(path, dims={"batch": 2}), "compiled artifact")
    expect_error(lambda: kiln.compile_cuda(model, path, arch=35), "arch = 35")
    dynamic = os.path.join(SCRATCH, "relu-dynamic.kir")
    with open(dynamic, "w") as f:
        f.write("graph @g(%x: f32[B,4]) -> (f32[B,4]) {\n  %y = relu(%x) : f32[B,4]\n"
                "  return %y\n}\n")
    expect_error(lambda: kiln.compile_cuda(dynamic, path), "symbol B has none", "dims")
    kiln.compile_cuda(dynamic, path, dims={"B": 3})


def test_symbolic_model_and_size_set():
    exe = kiln.compile(SIZE_SET, threads=1)
    assert exe.inputs == [("x", "f32", [-1, -1, 8])], exe.inputs
    rng = np.random.default_rng(3)
    small = rng.standard_normal((2, 3, 8)).astype(np.float32)
    big = rng.standard_normal((5, 7, 8)).astype(np.float32)
    want_small, want_big = exe(small), exe(big)
    assert want_small.shape == (2, 3, 4) and want_big.shape == (5, 7, 4)
    assert exe.specializations == [{"N": 2, "S": 3}, {"N": 5, "S": 7}], exe.specializations
    path = os.path.join(SCRATCH, "set.kiln")
    exe.save(path)
    loaded = kiln.load(path)
    assert loaded.specializations == [{"N": 2, "S": 3}, {"N": 5, "S": 7}]
    np.testing.assert_array_equal(loaded(small), want_small)
    np.testing.assert_array_equal(loaded(big), want_big)
    expect_error(lambda: loaded(np.zeros((1, 1, 8), np.float32)),
                 "no size of this size set fits the inputs (f32[1,1,8])", "N=2, S=3; N=5, S=7")


def test_symbolic_artifact():
    # kiln compile --dim SYM=LO..HI -o keeps the symbols (Note [Symbolic
    # artifacts] in codegen/SymbolicArtifact.cpp): kiln.load gives an
    # Executable that compiles each size from the kernels it holds.
    import subprocess
    path = os.path.join(SCRATCH, "symbolic.kiln")
    subprocess.run([os.path.join(BUILD, "tools", "kiln"), "compile", SIZE_SET, "--dim", "N=1..8",
                    "--dim", "S=1..16", "--no-cache", "-o", path], check=True,
                   stdout=subprocess.DEVNULL)
    exe = kiln.load(path)
    assert isinstance(exe, kiln.Executable)
    ref = kiln.compile(SIZE_SET, threads=1)
    rng = np.random.default_rng(5)
    for n, s in ((3, 1), (8, 16), (1, 9)):
        x = rng.standard_normal((n, s, 8)).astype(np.float32)
        np.testing.assert_allclose(exe(x), ref(x), rtol=1e-6, atol=1e-6)
    expect_error(lambda: exe(np.zeros((9, 2, 8), np.float32)), "N = 9", "1..8")
    two = kiln.compile(path, threads=2)
    x = rng.standard_normal((4, 5, 8)).astype(np.float32)
    np.testing.assert_allclose(two(x), ref(x), rtol=1e-6, atol=1e-6)
    expect_error(lambda: kiln.compile(path, cpu="haswell"), "is a symbolic artifact")
    expect_error(lambda: kiln.load(path, dims={"N": 2}), "dims do not apply")
    # The API's own: saved before any run, loaded as the CLI's is.
    mine = os.path.join(SCRATCH, "mine.kiln")
    kiln.compile(SIZE_SET, threads=1, ranges={"N": (1, 6)}).save_symbolic(mine)
    again = kiln.load(mine)
    x = rng.standard_normal((6, 2, 8)).astype(np.float32)
    np.testing.assert_allclose(again(x), ref(x), rtol=1e-6, atol=1e-6)
    expect_error(lambda: again(np.zeros((7, 2, 8), np.float32)), "N = 7", "1..6")
    # save() writes the sizes run so far, a size set: never over the symbolic artifact.
    before = open(mine, "rb").read()
    expect_error(lambda: again.save(mine), "is a symbolic artifact", "save_symbolic")
    assert open(mine, "rb").read() == before


def test_ranges():
    exe = kiln.compile(SIZE_SET, threads=1, ranges={"N": (1, 6)})
    x = np.random.default_rng(4).standard_normal((6, 3, 8)).astype(np.float32)
    assert exe(x).shape == (6, 3, 4)
    expect_error(lambda: exe(np.zeros((7, 3, 8), np.float32)), "N", "7", "1..6")
    expect_error(lambda: kiln.compile(SIZE_SET, ranges={"Q": (1, 6)}), "Q")


def test_sizes_the_run_decides():
    # x[x > 0] * 2 (nonzero): compiled in stages, each count its own
    # (Note [Data-dependent shapes] in codegen/Staged.cpp).
    exe = kiln.compile(os.path.join(SRC, "tests", "lit", "tools", "compile", "staged.kir"),
                       threads=1)
    for seed, n in ((1, 3), (2, 5), (3, 3)):
        x = np.random.default_rng(seed).standard_normal((n, 4)).astype(np.float32)
        y, nz = exe(x)
        np.testing.assert_allclose(y, x[x > 0] * 2, rtol=1e-6)
        np.testing.assert_array_equal(nz, np.stack(np.nonzero(x > 0)))
    assert "stages at %nz" in exe.summary, exe.summary  # per batch N, each staged


def test_threads_share_one_executable():
    exe = kiln.compile(os.path.join(MLP, "mlp.kir"), threads=1)
    x, want = mlp_data()
    results, errors = [None] * 8, []

    def work(i):
        try:
            for _ in range(20):
                results[i] = exe(x)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for r in results:
        np.testing.assert_allclose(r, want, rtol=1e-4, atol=1e-6)


def test_torch_compile_backend():
    import contextlib
    import io

    import torch
    if not hasattr(torch, "compile"):
        print(f"skip test_torch_compile_backend: torch {torch.__version__} has no torch.compile")
        return

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = torch.nn.Linear(16, 32)
            self.l2 = torch.nn.Linear(32, 4)

        def forward(self, x):
            h = torch.nn.functional.gelu(self.l1(x))
            return {"probs": torch.softmax(self.l2(h), -1), "hidden": h}

    class Det(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.det(x) + 1

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(3, 16)
    log = io.StringIO()
    with torch.no_grad(), contextlib.redirect_stderr(log):
        torch._dynamo.reset()
        fast = torch.compile(net, backend="kiln")
        got = fast(x)
        want = net(x)
        assert set(got) == {"probs", "hidden"}, got.keys()
        for k in got:
            torch.testing.assert_close(got[k], want[k], rtol=1e-5, atol=1e-6)
        # A parameter changed in place: the graph compiles again.
        net.l2.weight.mul_(2)
        torch.testing.assert_close(fast(x)["probs"], net(x)["probs"], rtol=1e-5, atol=1e-6)
        # A graph Kiln cannot take runs eagerly, with one line saying why.
        m = torch.randn(2, 3, 3)
        torch.testing.assert_close(torch.compile(Det(), backend=kiln.torch_backend)(m),
                                   Det()(m))
    assert "torch.compile graph runs eagerly" in log.getvalue(), log.getvalue()

    # Symbolic sizes (dynamic=True: Dynamo passes sizes as inputs too): one
    # compile per set of sizes, each checked, none eager.
    class Flat(torch.nn.Module):
        def forward(self, x):
            return net.l1(x.reshape(x.shape[0], -1)) * x.shape[1]

    log = io.StringIO()
    with torch.no_grad(), contextlib.redirect_stderr(log):
        torch._dynamo.reset()
        flat = torch.compile(Flat(), backend="kiln", dynamic=True)
        for n, c in [(2, 4), (5, 2), (2, 4), (7, 8)]:
            x = torch.randn(n, c, 16 // c)
            torch.testing.assert_close(flat(x), Flat()(x), rtol=1e-5, atol=1e-5)
    assert "runs eagerly" not in log.getvalue(), log.getvalue()
    assert log.getvalue().count("torch.compile graph compiles for sizes") == 2, log.getvalue()

    # nn.TransformerEncoderLayer's fused inference fast path (inference_mode,
    # eval, batch first) reaches the backend as _transformer_encoder_layer_fwd:
    # exported as ordinary calls, not eager. An input the exported graph
    # does not read (x, used only for new_zeros' dtype) is dropped by the
    # exporter: the rest still line up.
    class Attend(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(16, 4, batch_first=True)

        def forward(self, x, q):
            return self.attn(q, q, q, need_weights=False)[0] + x.new_zeros(16)

    log = io.StringIO()
    with torch.inference_mode(), contextlib.redirect_stderr(log):
        for norm_first, act in [(False, "relu"), (True, "gelu")]:
            layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, activation=act,
                                                     batch_first=True,
                                                     norm_first=norm_first).eval()
            x = torch.randn(2, 5, 16)
            torch._dynamo.reset()
            torch.testing.assert_close(torch.compile(layer, backend="kiln")(x), layer(x),
                                       rtol=1e-4, atol=1e-5)
        attend = Attend().eval()
        x, q = torch.randn(3), torch.randn(2, 5, 16)
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(attend, backend="kiln")(x, q), attend(x, q),
                                   rtol=1e-4, atol=1e-5)
    assert "runs eagerly" not in log.getvalue(), log.getvalue()


def test_onnx_model():
    zoo = os.path.join(BUILD, "tests", "models", "zoo", "mlp-op17")
    import onnx
    from onnx import numpy_helper

    def tensor(name):
        t = onnx.TensorProto()
        with open(os.path.join(zoo, "test_data_set_0", name), "rb") as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)

    exe = kiln.compile(os.path.join(zoo, "model.onnx"), threads=1)
    got = exe(tensor("input_0.pb"))
    np.testing.assert_allclose(got, tensor("output_0.pb"), rtol=1e-4, atol=1e-5)


def captures(torch):
    """kiln.from_torch's capture paths under this torch."""
    return ["fx"] + (["export"] if hasattr(torch, "export") else [])


def test_from_torch():
    """kiln.from_torch captures a module without ONNX, through torch.fx and
    (torch 2.x) torch.export: modules, functions and methods of a CNN and a
    transformer block, against eager; every call Kiln cannot take is listed
    in one error with this file's line."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.c2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2, bias=False)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(8 * 4 * 4, 10)
            self.ln = nn.LayerNorm(10)

        def forward(self, x):
            y = F.relu(self.bn(self.c1(x)))
            parts = y.chunk(2, dim=1)
            y = torch.cat([parts[1], F.hardtanh(parts[0], -0.5, 0.5)], dim=1)
            y = self.pool(torch.sigmoid(self.c2(y)) * 2.0 + 1)
            y = y.view(y.size(0), -1)
            z = F.avg_pool2d(x, 2)[:, 1:, ::2, -1]
            return torch.softmax(self.ln(self.fc(y)), dim=-1), y.mean(dim=1), z

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
            self.norm = nn.LayerNorm(16)
            self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))

        def forward(self, x):
            h = self.norm(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(x).permute(0, 2, 1).transpose(1, 2)

    torch.manual_seed(0)
    for module, x in [(Net(), torch.randn(2, 3, 16, 16)), (Block(), torch.randn(2, 5, 16))]:
        module.eval()
        with torch.no_grad():
            for buf in module.buffers():
                if buf.is_floating_point():  # running stats away from 0 and 1
                    buf.copy_(torch.rand_like(buf) + 0.5)
            want = module(x)
        want = want if isinstance(want, tuple) else (want,)
        for capture in captures(torch):
            model = kiln.from_torch(module, x, capture=capture)
            assert isinstance(model, kiln.Model)
            got = kiln.compile(model, threads=1)(x)
            got = got if isinstance(got, tuple) else (got,)
            assert len(got) == len(want), capture
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)

    class Odd(nn.Module):
        def forward(self, x):
            for _ in range(2):
                x = torch.roll(x, 1)
            return torch.fliplr(x) + 1

    line = Odd.forward.__code__.co_firstlineno
    here = os.path.basename(__file__)
    expect_error(lambda: kiln.from_torch(Odd(), torch.randn(3, 4), capture="fx"),
                 "Kiln cannot take 3 calls", f'torch.roll at loc("',
                 f'{here}":{line + 2}:0) (2 calls)',
                 f'fliplr at loc("', f'{here}":{line + 3}:0)')
    expect_error(lambda: kiln.from_torch(Net(), torch.randn(2, 2, 8, 8), capture="fx"),
                 "from_torch: Net does not run on the example inputs")

    class Branchy(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    expect_error(lambda: kiln.from_torch(Branchy(), torch.randn(3), capture="fx"),
                 "from_torch: torch.fx cannot trace Branchy")
    expect_error(lambda: kiln.from_torch(Net(), torch.randn(3), capture="other"),
                 "capture must be 'auto', 'export' or 'fx'")
    class Padded(nn.Module):  # core ATen's constant_pad_nd, amax, clamp, max_pool 1-d lists
        def forward(self, x):
            y = F.pad(x, (1, 2, 0, 1), value=0.5).clamp(-1.0, 1.0)
            return F.max_pool2d(y, 2, padding=1) + y.amax(dim=(2, 3), keepdim=True)[..., :1, :1]

    class Decoder(nn.Module):  # flip, upsampling, comparisons, logic, arange, full
        def forward(self, x):
            y = torch.flip(x, [3])
            y = F.interpolate(y, scale_factor=2, mode="nearest") + \
                F.interpolate(y, scale_factor=2, mode="bilinear") + \
                F.interpolate(y, size=(10, 12), mode="bilinear", align_corners=True) + \
                F.interpolate(y, size=(10, 12), mode="nearest")
            keep = (y != 0.5) & ((y <= 1.0) | (y >= 2.0))
            pos = torch.arange(y.shape[3]).to(y.dtype) + torch.full((1,), 0.25)
            return torch.where(keep, y, pos)

    class Floor(nn.Module):
        def forward(self, x):
            return torch.div(x, 2, rounding_mode="floor")

    if "export" in captures(torch):
        x = torch.randn(2, 3, 5, 6)
        for module in (Padded(), Decoder()):
            got = kiln.compile(kiln.from_torch(module, x, capture="export"), threads=1)(x)
            torch.testing.assert_close(got, module(x))
        expect_error(lambda: kiln.from_torch(Floor(), x, capture="export"),
                     "rounding_mode 'floor'")
    if "export" in captures(torch):  # core ATen: roll decomposes, flip does not
        expect_error(lambda: kiln.from_torch(Odd(), torch.randn(3, 4), capture="export"),
                     "(torch.export, core ATen)", f'aten::index_select at loc("',
                     f'{here}":{line + 2}:0) (2 calls)')
        expect_error(lambda: kiln.from_torch(Net(), torch.randn(2, 2, 8, 8), capture="export"),
                     "from_torch: torch.export cannot capture Net")
        expect_error(lambda: kiln.from_torch(Branchy(), torch.randn(3), capture="export"),
                     "from_torch: torch.export cannot capture Branchy")
    try:
        import torchvision
    except ImportError:
        return  # Debian's torch 1.13 comes without torchvision; the venv has it
    m = torchvision.models.resnet18().eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        want = m(x)
    for capture in captures(torch):
        torch.testing.assert_close(kiln.compile(kiln.from_torch(m, x, capture=capture),
                                                threads=1)(x), want, rtol=1e-4, atol=1e-4)


def test_from_torch_dynamic():
    """kiln.from_torch with dynamic_shapes: the named dims become symbols of
    the Model (reshape shapes and slice bounds computed from sizes become
    expressions of them) and one Executable runs every size, against eager,
    through torch.fx and torch.export; torch.export.Dim under torch 2.x,
    names under torch 1.13."""
    import torch
    import torch.nn as nn

    try:
        from torch.export import Dim
    except ImportError:  # torch 1.13: names stand for Dims
        Dim = str

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
            self.norm = nn.LayerNorm(16)
            self.register_buffer("pos", torch.randn(1, 32, 16))

        def forward(self, x):
            x = x + self.pos[:, :x.shape[1]]
            h = self.norm(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x.reshape(x.shape[0], -1)[:, 1:x.shape[1] * 2 + 1], x[:, -1]

    torch.manual_seed(0)
    block = Block().eval()
    # S <= 32: the position table has 32 rows (torch.export proves it needs that).
    seq = Dim("S", max=32) if Dim is not str else "S"
    for capture in captures(torch):
        model = kiln.from_torch(block, torch.randn(2, 5, 16), capture=capture,
                                dynamic_shapes={"x": {0: Dim("B"), 1: seq}})
        assert list(model.inputs[0][2]) == [-1, -1, 16], model.inputs  # -1: symbolic
        exe = kiln.compile(model, threads=1)
        for b, s in [(1, 1), (3, 7), (2, 32)]:
            x = torch.randn(b, s, 16)
            with torch.no_grad():
                want = block(x)
            got = exe(x)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
        assert len(exe.specializations) == 3, exe.specializations

    class Square(nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0] * x.shape[0])

    line = Square.forward.__code__.co_firstlineno
    here = os.path.basename(__file__)
    class Halve(nn.Module):  # a shape that is a product with a floor division
        def forward(self, x):
            y = torch.nn.functional.avg_pool1d(x.unsqueeze(1), 2)
            return y.reshape(x.shape[0] * (x.shape[1] // 2))

    if "export" in captures(torch):
        halve = kiln.compile(kiln.from_torch(Halve(), torch.randn(3, 8),
                                             dynamic_shapes=({1: Dim("W", min=4)},)))
        for w in (10, 7, 8):
            x = torch.randn(3, w)
            torch.testing.assert_close(halve(x), Halve()(x))
    # The fx check size is not a multiple of the example's: 3*(W//2) is no
    # sum of products, which sizes 8 and 16 alone would not show.
    expect_error(lambda: kiln.from_torch(Halve(), torch.randn(3, 8), capture="fx",
                                         dynamic_shapes=({1: "W"},)),
                 "not a sum of products of the dynamic dims")
    if "export" in captures(torch):  # torch's own checks, with its reasons and fixes
        expect_error(lambda: kiln.from_torch(block, torch.randn(2, 5, 16),
                                             dynamic_shapes={"x": {1: Dim("S")}}),
                     "torch.export cannot capture Block", "Constraints violated (S)",
                     "Suggested fixes:", "S = Dim('S', max=32)")
    # Sampling (fx) solves sums of products only; torch.export knows n*n.
    expect_error(lambda: kiln.from_torch(Square(), torch.randn(3, 3), capture="fx",
                                         dynamic_shapes=({0: "n", 1: "n"},)),
                 f'{here}":{line + 1}:0): attribute \'shape\' is 9 at n=3, 36 at n=6',
                 "not a sum of products of the dynamic dims")
    if "export" in captures(torch):
        square = kiln.compile(kiln.from_torch(Square(), torch.randn(3, 3),
                                              dynamic_shapes=({0: Dim("n"), 1: Dim("n")},)))
        x = torch.randn(5, 5)
        torch.testing.assert_close(square(x), Square()(x))
    for capture in captures(torch):
        expect_error(lambda: kiln.from_torch(Square(), torch.randn(3, 3), capture=capture,
                                             dynamic_shapes={"y": {0: "n"}}),
                     "no input named 'y' (the inputs: x)")
        expect_error(lambda: kiln.from_torch(Square(), torch.randn(3, 3), capture=capture,
                                             dynamic_shapes=({0: 4},)),
                     "input 0 dim 0: 4 is not a named dim")
        expect_error(lambda: kiln.from_torch(Square(), torch.randn(3, 4), capture=capture,
                                             dynamic_shapes=({0: "n", 1: "n"},)),
                     "'n' is 3 in one example input and 4 in input 0 dim 1")


if __name__ == "__main__":
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_")
             and (len(sys.argv) < 5 or n == sys.argv[4])]
    for name, fn in tests:
        fn()
        print(f"ok {name}")
    print(f"{len(tests)} tests passed under Python {sys.version.split()[0]}, NumPy "
          f"{np.__version__}")
